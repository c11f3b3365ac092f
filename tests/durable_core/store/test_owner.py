"""BusyError names the run's owner: pid, host and since when (E-1, R-STORE-1).

The file and SQLite stores read it from the lock file the owner holds; a real second process
owns the run here. The memory store's owner is this process.
"""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from durable_core import BusyError
from durable_core.store import MemoryStore, RunOwner, owner_from_bytes, owner_to_bytes
from durable_core.store.locks import RunLock, run_key
from durable_filestore import FileStore
from durable_sqlitestore import SQLiteStore

HOLDER = """
import sys
from {module} import {cls}

store = {cls}({location!r})
session = store.acquire({run_id!r})
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
session.close()
store.close()
"""

STORES = {
    "file": ("durable_filestore", "FileStore", lambda tmp: str(tmp / "runs")),
    "sqlite": ("durable_sqlitestore", "SQLiteStore", lambda tmp: str(tmp / "runs.sqlite")),
}


def _open(kind: str, location: str) -> FileStore | SQLiteStore:
    return FileStore(location) if kind == "file" else SQLiteStore(location)


def _lock_file(kind: str, location: str, run_id: str) -> Path:
    folder = Path(location) if kind == "file" else Path(location).parent / ".runlocks"
    return folder / f"{run_key(run_id)}.lock"


@pytest.fixture
def held_by_child(tmp_path: Path) -> Iterator[Callable[[str, str], tuple[subprocess.Popen, str]]]:
    """``hold(kind, run_id)``: a real second process owns the run until the test ends."""
    children: list[subprocess.Popen] = []

    def hold(kind: str, run_id: str) -> tuple[subprocess.Popen, str]:
        module, cls, where = STORES[kind]
        location = where(tmp_path)
        _open(kind, location).close()  # create the store before the child uses it
        code = HOLDER.format(module=module, cls=cls, location=location, run_id=run_id)
        child = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        children.append(child)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        return child, location

    yield hold
    for child in children:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


# covers: E-1, R-STORE-1, B-FILE-2, B-SQL-2
@pytest.mark.parametrize("kind", sorted(STORES))
def test_busy_error_names_the_owning_process_pid_host_and_time(kind, held_by_child):
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    child, location = held_by_child(kind, "order-17")
    store = _open(kind, location)
    try:
        with pytest.raises(BusyError) as caught:
            store.acquire("order-17")
    finally:
        store.close()
    owner = caught.value.owner
    assert owner is not None
    assert owner.pid == child.pid != os.getpid()
    assert owner.host == socket.gethostname()
    assert owner.since is not None and owner.since.tzinfo is not None
    assert before - datetime.timedelta(seconds=1) <= owner.since
    assert owner.since <= datetime.datetime.now(datetime.UTC)
    message = str(caught.value)
    assert f"pid {child.pid} on host {socket.gethostname()!r} since " in message
    assert f"{owner.since:%Y-%m-%d %H:%M:%S} UTC" in message
    # A local store: its owner is on this host, never "another host".
    assert "another host" not in message
    # The note in the lock file is the owner's: one JSON line.
    assert owner_from_bytes(_lock_file(kind, location, "order-17").read_bytes()) == owner


# covers: E-1, B-FILE-2
def test_an_unreadable_note_makes_the_owner_unknown_not_the_run_free(tmp_path):
    path = tmp_path / "x.lock"
    with RunLock.acquire(path):
        path.write_bytes(b'{"pid": 1')  # cut short: no newline, not a whole owner
        with pytest.raises(BusyError, match="names no live process") as caught:
            RunLock.acquire(path, description="run 'x'")
        assert caught.value.owner is None


# covers: E-1, B-FILE-2
def test_a_note_naming_a_dead_process_of_this_host_is_not_shown_as_the_owner(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    stale = RunOwner(
        pid=int(dead.stdout),
        host=socket.gethostname(),
        since=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    )
    path = tmp_path / "x.lock"
    with RunLock.acquire(path):
        path.write_bytes(owner_to_bytes(stale))  # what a crashed owner left behind
        with pytest.raises(BusyError) as caught:
            RunLock.acquire(path, description="run 'x'")
        assert caught.value.owner is None
        assert str(stale.pid) not in str(caught.value)


# covers: E-1, B-FILE-2
def test_the_lock_file_names_the_owner_while_held(tmp_path):
    path = tmp_path / "x.lock"
    with RunLock.acquire(path):
        owner = owner_from_bytes(path.read_bytes())
        assert owner is not None and owner.pid == os.getpid() and owner.is_this_process
    assert path.read_bytes() == b""  # emptied before the lock was let go


# covers: E-1, R-STORE-1, B-MEM
def test_memory_store_says_the_owner_is_this_process():
    store = MemoryStore()
    with store.acquire("m"), pytest.raises(BusyError) as caught:
        store.acquire("m")
    owner = caught.value.owner
    assert owner is not None and owner.is_this_process and owner.since is not None
    message = str(caught.value)
    assert "in this process" in message and f"pid {os.getpid()}" in message
    assert "another host" not in message


def test_busy_error_keeps_its_owner_through_pickle():
    import pickle

    owner = RunOwner(pid=7, host="h", since=datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC))
    copy = pickle.loads(pickle.dumps(BusyError("busy", owner=owner)))
    assert copy.owner == owner and str(copy) == "busy"


# covers: E-1, B-PG-1
def test_owner_tag_fits_application_name_and_reads_back():
    from durable_core.store import owner_from_tag, owner_tag

    since = datetime.datetime(2026, 12, 1, 11, 2, 3, tzinfo=datetime.UTC)
    short = RunOwner(pid=4242, host="build-7", since=since)
    assert owner_from_tag(owner_tag("durable", short)) == short
    long_host = RunOwner(pid=4242, host="h" * 80 + ".example.com", since=since)
    tag = owner_tag("a-very-long-application-name-set-by-the-user", long_host)
    assert len(tag.encode()) <= 63
    read = owner_from_tag(tag)
    assert read is not None and read.pid == 4242 and read.since == since
    assert read.host is not None and read.host.endswith("~")
    assert owner_from_tag("durable") is None and owner_from_tag(None) is None
