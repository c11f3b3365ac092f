"""The run log (plugin ``runlog``), ``durable log`` and the last failures in ``inspect``."""

from __future__ import annotations

import json

from durable_core.cli import ExitCode
from durable_core.runlog import MAX_ERROR_CHARS, last_failures, log_path, log_times, scrub


def test_log_shows_times_failures_and_durations(ops, tmp_path, monkeypatch):
    monkeypatch.setenv("DURABLE_LOG_DIR", str(tmp_path / "logs"))
    (ops.folder / "broken").touch()
    assert ops.invoke("run", ops.config).exit_code == ExitCode.RUN_FAILED
    text = ops.invoke("log", "ops-1")
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert "run_started" in lines[0]
    failed = [line for line in lines if "attempt_failed" in line]
    assert failed and "total" in failed[0] and "try 1/1" in failed[0]
    assert "RuntimeError: total is broken" in text.stdout
    assert "run_finished" in lines[-2] and "failed" in lines[-2]
    assert "NodeFailedError" in lines[-1]
    events = [json.loads(line) for line in ops.invoke("log", "ops-1", "--json").stdout.splitlines()]
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
    followed = ops.invoke("log", "ops-1", "--follow")  # the run has finished: returns at once
    assert followed.exit_code == 0 and "run_finished" in followed.stdout


def test_log_of_a_run_that_never_ran_here(ops, tmp_path, monkeypatch):
    monkeypatch.setenv("DURABLE_LOG_DIR", str(tmp_path / "logs"))
    missing = ops.invoke("log", "nope")
    assert missing.exit_code == ExitCode.NOT_FOUND
    assert "no run log of run 'nope'" in missing.stderr


def test_errors_are_scrubbed_and_shortened():
    assert (
        scrub("connect failed: password=hunter2 host=db") == "connect failed: password=*** host=db"
    )
    assert scrub("postgresql://app:hunter2@db/x refused") == "postgresql://app:***@db/x refused"
    assert scrub("Authorization: Bearer abc.def") == "Authorization: Bearer ***"
    long = scrub("x" * 5000)
    assert len(long) == MAX_ERROR_CHARS and long.endswith("…")


def test_log_files_are_per_run_and_a_torn_line_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("DURABLE_LOG_DIR", str(tmp_path))
    assert log_path("a/b") != log_path("a_b")
    path = log_path("r")
    path.write_text('{"event": "attempt_failed", "node": "n", "error": "E"}\n{"event": "attempt_fa')
    assert last_failures("r") == {"n": {"event": "attempt_failed", "node": "n", "error": "E"}}


def test_times_and_failures_describe_the_last_run_of_an_id(tmp_path, monkeypatch):
    # A run deleted (or its store removed) and started again under the same id appends to the
    # same log: what inspect shows must come from the new run only.
    monkeypatch.setenv("DURABLE_LOG_DIR", str(tmp_path))
    events = [
        ("2026-01-01T10:00:00+00:00", "run_started", {}),
        ("2026-01-01T10:00:01+00:00", "attempt_failed", {"node": "old", "error": "E1"}),
        ("2026-01-01T10:00:02+00:00", "run_finished", {"status": "failed"}),
        ("2026-01-02T08:00:00+00:00", "run_started", {}),
        ("2026-01-02T08:00:03+00:00", "attempt_failed", {"node": "new", "error": "E2"}),
    ]
    log_path("r").write_text(
        "".join(json.dumps({"time": t, "event": e, **more}) + "\n" for t, e, more in events)
    )
    assert log_times("r") == {
        "started": "2026-01-02T08:00:00+00:00",
        "last_event": "2026-01-02T08:00:03+00:00",
        "duration_seconds": 3.0,
    }
    assert set(last_failures("r")) == {"new"}


def test_a_run_keeps_its_log_open_until_it_finishes_and_reopens_it_on_resume(tmp_path, monkeypatch):
    from durable_core.durable import EventKind, RecoveryEvent
    from durable_core.runlog import RunLogWriter, read_log

    monkeypatch.setenv("DURABLE_LOG_DIR", str(tmp_path))
    writer = RunLogWriter()
    path = log_path("job")

    def event(kind, **fields):
        writer.write(RecoveryEvent(kind=kind, run_id="job", **fields))

    event(EventKind.RUN_STARTED, revision=1)
    event(EventKind.NODE_CONFIRMED, node_id="a", revision=2)
    assert path in writer._files  # one descriptor for the whole run, not one per line
    path.unlink()  # removed while the run is under way (the process dies, say)
    event(EventKind.RUN_RESUMED, revision=2)  # a resume opens the log again
    event(EventKind.NODE_CONFIRMED, node_id="b", revision=3)
    event(EventKind.RUN_FINISHED, revision=3, status="completed")
    assert writer._files == {}  # a finished run's log is closed
    assert [e["event"] for e in read_log("job")] == [
        "run_resumed",
        "node_confirmed",
        "run_finished",
    ]
    event(EventKind.RUN_STARTED, revision=1)  # another run of the same id appends
    assert [e["event"] for e in read_log("job")][-1] == "run_started"


def test_a_process_keeps_a_bounded_number_of_logs_open(tmp_path, monkeypatch):
    from durable_core.durable import EventKind, RecoveryEvent
    from durable_core.runlog import _MAX_OPEN, RunLogWriter, read_log

    monkeypatch.setenv("DURABLE_LOG_DIR", str(tmp_path))
    writer = RunLogWriter()
    for n in range(_MAX_OPEN + 8):
        writer.write(RecoveryEvent(kind=EventKind.RUN_STARTED, run_id=f"run-{n}", revision=1))
    assert len(writer._files) == _MAX_OPEN
    assert log_path("run-0") not in writer._files  # the oldest went first
    writer.write(RecoveryEvent(kind=EventKind.NODE_CONFIRMED, run_id="run-0", node_id="a"))
    assert [e["event"] for e in read_log("run-0")] == ["run_started", "node_confirmed"]
