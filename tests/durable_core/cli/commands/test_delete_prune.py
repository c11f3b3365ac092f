"""``durable delete`` and ``durable prune`` (and ``inspect --peek``) on real file, SQLite and
PostgreSQL stores: a running run is refused and stays intact."""

from __future__ import annotations

import json
import os
import sqlite3
import time

import pytest

from durable_core.cli import ExitCode
from durable_core.config import parse_store_url
from durable_core.store.locks import run_key


@pytest.fixture
def hold(ops):
    """Own a run through another store object, as a running ``durable run`` would."""
    opened = []

    def take(run_id: str):
        store = parse_store_url(ops.store_url).open()
        opened.append(store)
        return store.acquire(run_id)

    yield take
    for store in opened:
        store.close()


def lock_files(ops, run_id: str) -> list[str]:
    key = run_key(run_id)
    if ops.store_kind == "file":
        return [p.name for p in (ops.folder / "runs").glob(f"{key}.*")]
    if ops.store_kind == "sqlite":
        return [p.name for p in (ops.folder / "db" / ".runlocks").glob(f"{key}.*")]
    return []


def test_delete_removes_the_record_and_the_runs_lock(ops):
    assert ops.invoke("run", ops.config).exit_code == 0
    assert ops.invoke("run", ops.config, "--run-id", "keep").exit_code == 0
    if ops.store_kind != "postgres":
        assert lock_files(ops, "ops-1")
    revision = ops.json("inspect", ops.config)["revision"]
    deleted = ops.invoke("delete", ops.config, "ops-1", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert f"deleted run 'ops-1' (revision {revision})" in deleted.stdout
    assert lock_files(ops, "ops-1") == []  # (inspect's session would create it again)
    assert ops.invoke("inspect", ops.config).exit_code == ExitCode.NOT_FOUND
    assert [r["run_id"] for r in ops.json("list", ops.config)] == ["keep"]
    again = ops.invoke("delete", ops.config, "ops-1", "--yes")
    assert again.exit_code == ExitCode.NOT_FOUND
    # the run id can be used again
    assert ops.invoke("run", ops.config).exit_code == 0


def test_delete_of_a_running_run_is_busy_and_the_run_stays(ops, hold):
    assert ops.invoke("run", ops.config).exit_code == 0
    before = ops.json("inspect", ops.config)
    session = hold("ops-1")
    busy = ops.invoke("delete", "--store", ops.store_url, "ops-1", "--yes")
    assert busy.exit_code == ExitCode.BUSY, busy.output
    assert "is busy" in busy.stderr
    assert session.load().revision == before["revision"]  # intact, still owned
    session.close()
    assert ops.json("inspect", ops.config)["revision"] == before["revision"]


def test_delete_asks_unless_yes(ops):
    assert ops.invoke("run", ops.config).exit_code == 0
    refused = ops.invoke("delete", ops.config, "ops-1")
    assert refused.exit_code == ExitCode.USAGE
    assert ops.invoke("inspect", ops.config).exit_code == 0


def test_peek_reads_a_running_run_without_owning_it(ops, hold):
    assert ops.invoke("run", ops.config).exit_code == 0
    session = hold("ops-1")
    assert ops.invoke("inspect", ops.config).exit_code == ExitCode.BUSY
    peeked = ops.invoke("inspect", ops.config, "--peek")
    assert peeked.exit_code == 0, peeked.output
    assert "status     completed" in peeked.stdout
    assert "without taking ownership" in peeked.stderr
    data = json.loads(ops.invoke("inspect", ops.config, "--peek", "--json").stdout)
    assert data["peeked"] is True and data["revision"] == session.load().revision
    assert ops.invoke("inspect", ops.config, "nope", "--peek").exit_code == ExitCode.NOT_FOUND


def test_prune_deletes_finished_runs_only(ops, hold):
    assert ops.invoke("run", ops.config, "--run-id", "done").exit_code == 0
    assert ops.invoke("run", ops.config, "--run-id", "held").exit_code == 0
    (ops.folder / "broken").touch()
    assert ops.invoke("run", ops.config, "--run-id", "failed").exit_code == ExitCode.RUN_FAILED
    (ops.folder / "broken").unlink()
    session = hold("held")
    usage = ops.invoke("prune", ops.config, "--yes")
    assert usage.exit_code == ExitCode.USAGE and "--finished" in usage.output
    # the run owned by another process cannot be judged: kept, named, and exit 3
    dry = busy_prune(ops, ops.config, "--finished", "--dry-run")
    assert {r["run_id"]: r["deleted"] for r in dry["runs"]} == {
        "done": False,
        "failed": False,
        "held": False,
    }
    assert len(ops.json("list", ops.config)) == 3
    text = ops.invoke("prune", ops.config, "--finished", "--dry-run")
    would = [line for line in text.stdout.splitlines() if line.startswith("would delete")]
    assert len(would) == 2 and all(", last saved 20" in line for line in would), text.stdout
    pruned = busy_prune(ops, ops.config, "--finished", "--yes")
    assert {r["run_id"]: r["deleted"] for r in pruned["runs"]} == {
        "done": True,
        "failed": True,
        "held": False,
    }
    (kept,) = [r for r in pruned["runs"] if r["run_id"] == "held"]
    assert kept["status"] == "running" and "run 'held'" in kept["error"]
    assert "is busy" in kept["error"] and f"pid {os.getpid()}" in kept["error"]
    assert session.load().run_id == "held"  # the running run stays
    session.close()
    assert [r["run_id"] for r in ops.json("list", ops.config)] == ["held"]
    # without the config, only runs that failed for good count as finished
    assert ops.invoke("run", ops.config, "--run-id", "done-2").exit_code == 0
    by_url = ops.json("prune", "--store", ops.store_url, "--finished", "--yes")
    assert by_url["runs"] == []


def test_prune_older_than(ops, hold):
    # the store's own save times on every store: the file's mtime, the SQL saved_at columns
    for run_id in ("old", "new", "old-held"):
        assert ops.invoke("run", ops.config, "--run-id", run_id).exit_code == 0
    bad = ops.invoke("prune", ops.config, "--finished", "--older-than", "soon", "--yes")
    assert bad.exit_code == ExitCode.CONFIG
    nothing = ops.json("prune", ops.config, "--finished", "--older-than", "7d", "--yes")
    assert nothing["runs"] == []
    set_times(ops, "old", saved=time.time() - 8 * 86400)
    set_times(ops, "old-held", saved=time.time() - 8 * 86400)
    set_times(ops, "new", saved=time.time() - 6 * 86400)
    session = hold("old-held")  # running: never pruned, however old, and named
    dry = ops.invoke("prune", ops.config, "--finished", "--older-than", "7d", "--dry-run")
    assert dry.exit_code == ExitCode.BUSY, dry.output
    assert "would delete 'old' (completed, revision" in dry.stdout
    assert "last saved " in dry.stdout and "'new'" not in dry.output
    assert "kept 'old-held': BusyError: run 'old-held' in the " in dry.stderr
    assert "kept 1 run(s) owned by another process" in dry.stderr
    assert len(ops.json("list", ops.config)) == 3
    pruned = busy_prune(ops, ops.config, "--finished", "--older-than", "7d", "--yes")
    assert [(r["run_id"], r["deleted"]) for r in pruned["runs"]] == [
        ("old", True),
        ("old-held", False),
    ]
    assert pruned["runs"][0]["saved_at"] == pytest.approx(time.time() - 8 * 86400, abs=120)
    assert session.load().run_id == "old-held"  # intact
    session.close()
    assert [r["run_id"] for r in ops.json("list", ops.config)] == ["new", "old-held"]
    weekly = ops.json("prune", ops.config, "--finished", "--older-than", "5d", "--yes")
    assert sorted(r["run_id"] for r in weekly["runs"]) == ["new", "old-held"]
    assert ops.json("list", ops.config) == []


def busy_prune(ops, *args: str):
    """``durable prune … --json`` that kept a run owned by another process: exit 3."""
    result = ops.invoke("prune", *args, "--json")
    assert result.exit_code == ExitCode.BUSY, result.output
    return json.loads(result.stdout)


def set_times(ops, run_id: str, *, saved: float, created: float | None = None) -> None:
    """Move a run's stored times into the past, as the store keeps them: the record file's
    time (file store), the saved_at/created_at columns (SQLite, PostgreSQL)."""
    created = saved if created is None else created
    if ops.store_kind == "file":
        os.utime(ops.folder / "runs" / f"{run_key(run_id)}.json", (saved, saved))
    elif ops.store_kind == "sqlite":
        connection = sqlite3.connect(ops.folder / "db" / "runs.sqlite", isolation_level=None)
        changed = connection.execute(
            "UPDATE durable_runs SET created_at = ?, saved_at = ? WHERE run_id = ?",
            (created, saved, run_id),
        ).rowcount
        connection.close()
        assert changed == 1
    else:
        import psycopg

        with psycopg.connect(ops.store_url, autocommit=True) as connection:
            changed = connection.execute(
                "UPDATE pulse_durable.runs SET created_at = to_timestamp(%s), "
                "saved_at = to_timestamp(%s) WHERE run_key = sha256(%s)",
                [created, saved, run_id.encode()],
            ).rowcount
        assert changed == 1
