"""The run log (plugin ``runlog``) in the run's history, ``durable log``, and what ``inspect``
and ``list`` read from it (X-HIST)."""

from __future__ import annotations

import json

from durable_core.cli import ExitCode
from durable_core.history import LocalHistory
from durable_core.runlog import MAX_ERROR_CHARS, last_failures, log_times, scrub


def test_log_shows_times_failures_and_durations(ops):
    # covers: X-HIST
    (ops.folder / "broken").touch()
    assert ops.invoke("run", ops.config).exit_code == ExitCode.RUN_FAILED
    text = ops.invoke("log", ops.config)
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert "run_started" in lines[0]
    failed = [line for line in lines if "attempt_failed" in line]
    assert failed and "total" in failed[0] and "try 1/1" in failed[0]
    assert "RuntimeError: total is broken" in text.stdout
    assert "run_finished" in lines[-2] and "failed" in lines[-2]
    assert "NodeFailedError" in lines[-1]
    events = [
        json.loads(line) for line in ops.invoke("log", ops.config, "--json").stdout.splitlines()
    ]
    confirmed = [e for e in events if e["event"] == "node_confirmed"]
    assert {e["node"] for e in confirmed} == {"double", "price"}
    assert all(e["seconds"] >= 0 for e in confirmed)
    assert all(e["time"].endswith("+00:00") for e in events)
    inspected = ops.invoke("inspect", ops.config)
    assert "last failure of each node not confirmed (from the run log):" in inspected.stdout
    assert "RuntimeError: total is broken" in inspected.stdout
    data = ops.json("inspect", ops.config)
    assert data["last_failures"]["total"]["error"] == "RuntimeError: total is broken"
    times = data["times"]
    assert times["started"] <= times["last_event"] and times["duration_seconds"] >= 0
    assert times["saved"].endswith("+00:00")  # every persistent store knows when it was saved
    (times_line,) = [line for line in inspected.stdout.splitlines() if line.startswith("times ")]
    assert ", started " in times_line and ", last event " in times_line
    (row,) = ops.json("list", ops.config)
    assert row["times"]["started"] == times["started"]
    followed = ops.invoke("log", ops.config, "--follow")  # the run has finished: returns at once
    assert followed.exit_code == 0 and "run_finished" in followed.stdout


def test_log_of_a_run_not_in_the_store(ops):
    assert ops.invoke("run", ops.config).exit_code == 0  # the store exists
    missing = ops.invoke("log", "--store", ops.store_url, "nope")
    assert missing.exit_code == ExitCode.NOT_FOUND
    assert "no record of run 'nope'" in missing.stderr


def _second_config(ops) -> str:
    """A config of the same run id in another store (a file store for PostgreSQL)."""
    table = (
        '[store]\nbackend = "sqlite"\npath = "db2/runs.sqlite"\n'
        if ops.store_kind == "sqlite"
        else '[store]\nbackend = "file"\ndirectory = "runs2"\n'
    )
    path = ops.folder / "second.toml"
    path.write_text(ops.folder.joinpath("ops.toml").read_text().split("[store]")[0] + table)
    return str(path)


def test_two_stores_with_one_run_id_keep_separate_histories(ops):
    # covers: X-HIST
    second = _second_config(ops)
    assert ops.invoke("run", ops.config).exit_code == 0
    (ops.folder / "broken").touch()
    assert ops.invoke("run", second).exit_code == ExitCode.RUN_FAILED
    first_log = ops.invoke("log", ops.config, "--json")
    second_log = ops.invoke("log", second, "--json")
    assert first_log.exit_code == 0 and second_log.exit_code == 0, second_log.output
    first_events = [json.loads(line) for line in first_log.stdout.splitlines()]
    second_events = [json.loads(line) for line in second_log.stdout.splitlines()]
    assert [e["event"] for e in first_events].count("run_started") == 1
    assert [e["event"] for e in second_events].count("run_started") == 1
    assert "attempt_failed" not in [e["event"] for e in first_events]
    assert first_events[-1]["status"] == "completed"
    assert second_events[-1]["status"] == "failed"
    assert ops.json("inspect", ops.config)["last_failures"] == {}
    assert set(ops.json("inspect", second)["last_failures"]) == {"total"}
    for config, events in ((ops.config, first_events), (second, second_events)):
        (row,) = ops.json("list", config)
        assert row["times"]["started"] == events[0]["time"]  # its own run's start
        inspected = ops.json("inspect", config)["times"]
        assert inspected["started"] == events[0]["time"]
        assert inspected["last_event"] == events[-1]["time"]


def test_a_run_deleted_and_started_again_shows_only_the_new_history(ops):
    # covers: X-HIST
    (ops.folder / "broken").touch()
    assert ops.invoke("run", ops.config).exit_code == ExitCode.RUN_FAILED
    assert ops.invoke("delete", "--store", ops.store_url, "ops-1", "--yes").exit_code == 0
    (ops.folder / "broken").unlink()
    assert ops.invoke("run", ops.config).exit_code == 0
    events = [
        json.loads(line) for line in ops.invoke("log", ops.config, "--json").stdout.splitlines()
    ]
    assert [e["event"] for e in events].count("run_started") == 1
    assert "attempt_failed" not in [e["event"] for e in events]
    assert ops.json("inspect", ops.config)["last_failures"] == {}


def test_errors_are_scrubbed_and_shortened():
    assert (
        scrub("connect failed: password=hunter2 host=db") == "connect failed: password=*** host=db"
    )
    assert scrub("postgresql://app:hunter2@db/x refused") == "postgresql://app:***@db/x refused"
    assert scrub("Authorization: Bearer abc.def") == "Authorization: Bearer ***"
    long = scrub("x" * 5000)
    assert len(long) == MAX_ERROR_CHARS and long.endswith("…")


def test_local_histories_are_per_store_and_root_scope_and_a_torn_line_is_skipped(tmp_path):
    # covers: X-HIST
    here, there = (
        LocalHistory("FileStore('/a')", tmp_path),
        LocalHistory("FileStore('/b')", tmp_path),
    )
    assert here.path("r", "s1") != there.path("r", "s1") != here.path("r", "s2")
    assert here.path("a/b", "s1") != here.path("a_b", "s1")
    here.append_history("r", "s1", ['{"event": "attempt_failed", "node": "n", "error": "E"}'])
    with open(here.path("r", "s1"), "a") as f:
        f.write('{"event": "attempt_fa')  # torn by a crash
    assert here.read_history("r", "s1") == [
        '{"event": "attempt_failed", "node": "n", "error": "E"}'
    ]
    assert there.read_history("r", "s1") == [] and here.read_history("r", "s2") == []


def test_times_and_failures_come_from_the_entries():
    events = [
        ("2026-01-02T08:00:00+00:00", "run_started", {}),
        ("2026-01-02T08:00:01+00:00", "attempt_failed", {"node": "old", "error": "E1"}),
        ("2026-01-02T08:00:02+00:00", "node_confirmed", {"node": "old"}),
        ("2026-01-02T08:00:03+00:00", "attempt_failed", {"node": "new", "error": "E2"}),
    ]
    entries = [{"time": t, "event": e, **more} for t, e, more in events]
    assert log_times(None, "r", entries=entries) == {
        "started": "2026-01-02T08:00:00+00:00",
        "last_event": "2026-01-02T08:00:03+00:00",
        "duration_seconds": 3.0,
    }
    assert set(last_failures(None, "r", entries=entries)) == {"new"}
