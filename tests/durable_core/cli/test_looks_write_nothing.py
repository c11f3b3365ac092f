"""A look writes nothing: after a real crash (``durable run`` killed with SIGKILL while a node
runs, its last saves left as deltas beside the complete record), ``durable list``, ``inspect``
and ``show`` and a ``resume`` refused before its first save leave every stored byte, and the
time of the last save, as they were, on the file, SQLite and PostgreSQL stores; on the file
store also in a directory made read-only. The next ``resume`` that saves goes on, completes,
and folds the deltas.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from durable_core.cli import ExitCode

# Three nodes: ``first`` and ``middle`` are confirmed, then ``second`` waits while the file
# ``hold`` exists; the run is killed there. ``first``'s large output makes the record outweigh
# the small change ``middle`` saves after it, so that the store keeps that one as a delta beside
# the complete record (a journal, a delta row).
# The config's inputs (n, calls, broken) are those of the ``ops`` fixture.
GRAPH = """
import pathlib
import time

from durable_core.graph import Graph, Key

N = Key("n", int)
CALLS = Key("calls", str)
BROKEN = Key("broken", str)
A = Key("a", int)
PAD = Key("pad", str)
M = Key("m", int)
B = Key("b", int)

graph = Graph("looks", inputs=[N, CALLS, BROKEN])


def called(rc, name):
    with open(rc.get(CALLS), "a") as f:
        f.write(name + "\\n")


@graph.node("first", requires=[N, CALLS], provides=[A, PAD])
def first(rc):
    called(rc, "first")
    rc.set(A, rc.get(N) + 1)
    rc.set(PAD, "x" * 20000)


@graph.node("middle", requires=[A, CALLS], provides=[M])
def middle(rc):
    called(rc, "middle")
    rc.set(M, rc.get(A) * 2)


@graph.node("second", requires=[M, CALLS], provides=[B])
def second(rc):
    called(rc, "second")
    hold = pathlib.Path(rc.get(CALLS)).with_name("hold")
    deadline = time.monotonic() + 120
    while hold.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    rc.set(B, rc.get(M) + 1)
"""


def _crash(ops: Any) -> None:
    """Run the graph in a real process and SIGKILL it while ``second`` runs."""
    (ops.folder / f"{ops.module}.py").write_text(textwrap.dedent(GRAPH))
    hold = ops.folder / "hold"
    hold.touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "durable_core", "run", ops.config],
        cwd=ops.folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while "second" not in ops.calls():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never reached its second node"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    hold.unlink()
    assert ops.calls() == ["first", "middle", "second"]


def _files(directory: Path, *, locks: bool) -> dict[str, tuple[bytes, int, int]]:
    """Every file under ``directory``: its bytes, mode and modification time (ns)."""
    found = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and (locks or path.suffix != ".lock"):
            st = path.stat()
            found[str(path.relative_to(directory))] = (
                path.read_bytes(),
                stat.S_IMODE(st.st_mode),
                st.st_mtime_ns,
            )
    return found


def _stored(ops: Any) -> Any:
    """What the store holds for the run, as its medium keeps it, with every save time.

    The file store: every file of the directory but the lock files (a look takes the run's
    exclusive session, and the lock file names its owner while it is held). SQLite: every row
    with its times, and the database file's bytes (its write-ahead log checkpointed first, so
    that the file is all there is). PostgreSQL: every row with its times.
    """
    if ops.store_kind == "file":
        return _files(ops.folder / "runs", locks=False)
    if ops.store_kind == "sqlite":
        path = ops.folder / "db" / "runs.sqlite"
        connection = sqlite3.connect(path, isolation_level=None)
        try:
            rows = connection.execute(
                "SELECT run_id, revision, record, created_at, saved_at FROM durable_runs "
                "UNION ALL SELECT run_id, base, delta, NULL, saved_at FROM durable_deltas "
                "ORDER BY 1, 2"
            ).fetchall()
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            connection.close()
        return rows, path.read_bytes()
    import psycopg

    with psycopg.connect(ops.store_url, autocommit=True) as connection:
        return (
            connection.execute(
                "SELECT run_id, revision, format, record, created_at, saved_at "
                "FROM pulse_durable.runs ORDER BY run_key"
            ).fetchall(),
            connection.execute(
                "SELECT run_key, base, delta FROM pulse_durable.deltas ORDER BY run_key, base"
            ).fetchall(),
        )


def _deltas(ops: Any) -> int:
    """How many saves the store keeps apart from the complete record (journal, delta rows)."""
    if ops.store_kind == "file":
        journals = list((ops.folder / "runs").glob("*.journal"))
        return sum(path.stat().st_size for path in journals)
    if ops.store_kind == "sqlite":
        connection = sqlite3.connect(ops.folder / "db" / "runs.sqlite", isolation_level=None)
        try:
            return connection.execute("SELECT count(*) FROM durable_deltas").fetchone()[0]
        finally:
            connection.close()
    import psycopg

    with psycopg.connect(ops.store_url, autocommit=True) as connection:
        return connection.execute("SELECT count(*) FROM pulse_durable.deltas").fetchone()[0]


def _looks(ops: Any) -> dict[str, Any]:
    """``list``, ``inspect`` and ``show`` of the crashed run, each required to succeed."""
    listed = ops.json("list", ops.config)
    inspected = ops.json("inspect", ops.config)
    shown = ops.json("show", ops.config, "ops-1", "first")
    text = ops.invoke("inspect", ops.config)
    assert text.exit_code == 0, text.output
    return {"list": listed, "inspect": inspected, "show": shown}


# covers: E-2, R-STORE-4, R-RT-2
def test_looks_and_a_refused_resume_after_a_crash_write_nothing(ops: Any) -> None:
    _crash(ops)
    assert _deltas(ops) > 0, "the crash left no deltas: the test would prove nothing"
    before = _stored(ops)
    seen = _looks(ops)
    (row,) = seen["list"]
    assert row["status"] == "incomplete"
    assert seen["show"]["outputs"]["a"]["value"] == 22
    saved = seen["inspect"]["times"]["saved"]
    assert row["times"]["saved"] == saved
    assert _stored(ops) == before
    # looking again shows the same save time: nobody saved meanwhile
    again = _looks(ops)
    assert again["inspect"]["times"]["saved"] == saved
    assert again["list"][0]["times"]["saved"] == saved
    assert _stored(ops) == before
    # a resume refused before its first save (another version of the code) writes nothing
    other = ops.write_config("other.toml")
    Path(other).write_text(Path(other).read_text().replace('version = "1"', 'version = "2"'))
    refused = ops.invoke("resume", other)
    assert refused.exit_code == ExitCode.CONFLICT, refused.output
    assert _stored(ops) == before
    assert ops.json("inspect", ops.config)["times"]["saved"] == saved
    assert ops.calls() == ["first", "middle", "second"]
    # the next resume that saves goes on from the crash, completes and folds the deltas
    resumed = ops.json("resume", ops.config)
    assert resumed["status"] == "completed"
    assert ops.calls() == ["first", "middle", "second", "second"]
    assert _deltas(ops) == 0
    assert ops.json("show", ops.config, "ops-1", "second")["outputs"]["b"]["value"] == 45
    assert ops.json("inspect", ops.config)["times"]["saved"] > saved


def _read_only_look(ops: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """``durable ARGS…`` in a process that cannot write the store: root keeps its uid, but
    without the capabilities that let it write where the permissions say no."""
    command = [sys.executable, "-m", "durable_core", *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and setpriv(1) is missing")
        command = [
            setpriv,
            "--bounding-set",
            "-dac_override,-dac_read_search,-fowner",
            "--",
            *command,
        ]
    return subprocess.run(
        command, cwd=ops.folder, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("ops", ["file"], indirect=True)
def test_a_read_only_directory_can_be_looked_at_after_a_crash(ops: Any) -> None:
    # covers: E-2, B-FILE-2
    _crash(ops)
    runs = ops.folder / "runs"
    assert _deltas(ops) > 0
    saved = ops.json("inspect", ops.config)["times"]["saved"]
    modes = {path: stat.S_IMODE(path.stat().st_mode) for path in [runs, *runs.iterdir()]}
    for path, mode in modes.items():  # chmod -R a-w
        path.chmod(mode & ~0o222)
    try:
        before = _files(runs, locks=True)
        probe = _read_only_look(ops, "run", ops.config, "--run-id", "probe")
        assert probe.returncode != 0, "the directory is writable: the test would prove nothing"
        listed = _read_only_look(ops, "list", ops.config, "--json")
        inspected = _read_only_look(ops, "inspect", ops.config, "--json")
        shown = _read_only_look(ops, "show", ops.config, "ops-1", "first", "--json")
        for done in (listed, inspected, shown):
            assert done.returncode == 0, done.stdout + done.stderr
        (row,) = json.loads(listed.stdout)
        assert row["status"] == "incomplete"
        assert json.loads(inspected.stdout)["times"]["saved"] == saved
        assert json.loads(shown.stdout)["outputs"]["a"]["value"] == 22
        assert _files(runs, locks=True) == before  # every file, the lock files too
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
    resumed = ops.json("resume", ops.config)
    assert resumed["status"] == "completed"
    assert _deltas(ops) == 0


@pytest.mark.parametrize("ops", ["file"], indirect=True)
def test_a_journal_without_its_record_is_refused_as_corrupt_and_kept(ops: Any) -> None:
    # covers: R-RT-3, R-STORE-2, E-1
    _crash(ops)
    runs = ops.folder / "runs"
    (journal,) = runs.glob("*.journal")
    journal.with_suffix(".json").unlink()  # the record removed by hand; its last saves remain
    kept = journal.read_bytes()
    for command in (("run", ops.config), ("resume", ops.config), ("inspect", ops.config)):
        refused = ops.invoke(*command)
        assert refused.exit_code == ExitCode.CORRUPT, (command, refused.output)
        assert "is missing" in refused.stderr
        assert journal.read_bytes() == kept
    assert not journal.with_suffix(".json").exists()
    listed = ops.invoke("list", ops.config, "--json")
    assert listed.exit_code == ExitCode.CORRUPT, listed.output  # listed, and a script learns it
    (row,) = json.loads(listed.stdout)
    assert row["status"] == "unreadable" and row["location"] == str(journal)
    deleted = ops.invoke("delete", ops.config, "ops-1", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert not journal.exists()
    assert ops.json("run", ops.config)["status"] == "completed"


@pytest.mark.parametrize("ops", ["file", "sqlite"], indirect=True)
def test_a_resume_refused_as_corrupt_after_a_crash_writes_nothing(ops: Any) -> None:
    # covers: E-1, E-2, R-STORE-4, R-VAL-3
    from tests.durable_core.cli.test_corrupt import _damage

    _crash(ops)
    assert _deltas(ops) > 0
    # a stored value's bytes no longer match their digest: resume refuses the record
    if ops.store_kind == "file":
        (record_file,) = (ops.folder / "runs").glob("*.json")
        record_file.write_bytes(_damage(record_file.read_bytes()))
    else:
        connection = sqlite3.connect(ops.folder / "db" / "runs.sqlite", isolation_level=None)
        try:
            (data,) = connection.execute("SELECT record FROM durable_runs").fetchone()
            connection.execute("UPDATE durable_runs SET record = ?", (_damage(bytes(data)),))
        finally:
            connection.close()
    before = _stored(ops)
    for command in (("resume", ops.config), ("inspect", ops.config)):
        refused = ops.invoke(*command)
        assert refused.exit_code == ExitCode.CORRUPT, (command, refused.output)
        assert _stored(ops) == before
    assert ops.calls() == ["first", "middle", "second"]
