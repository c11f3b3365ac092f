"""Graphs, stores and store wrappers shared by the durable runtime tests and their child process.

Bodies write one line per invocation (their path) to a side file, the *call log*, opened in
append mode and closed at once, so that the lines survive a process that dies by ``os._exit``.
The environment variable ``DURABLE_TEST_CRASH`` (``"<path>"`` or ``"<path>@<n>"``) makes the
n-th invocation of that body (default: the first, counted in the call log) end the process with
``os._exit(CRASH_EXIT)`` right after logging; ``DURABLE_TEST_FAIL`` (comma-separated paths)
makes those bodies raise after logging.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from durable_core import (
    Graph,
    In,
    Key,
    MemoryStore,
    Out,
    Retry,
    RunRecord,
    record_to_json,
)
from durable_filestore import FileStore
from durable_sqlitestore import SQLiteStore

CRASH_EXIT = 17
"""Exit code of a child process that died inside a body."""

SEED = Key("seed", int)
K1, K2, K3, K4 = (Key(f"k{i}", int) for i in range(1, 5))
OUT = Key("out", str)


class CallLog:
    """The side file where bodies log their invocations (one path per line)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def write(self, name: str) -> None:
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(name + "\n")

    def calls(self) -> list[str]:
        if not self.path.exists():
            return []
        return self.path.read_text(encoding="utf-8").split()

    def count(self, name: str) -> int:
        return self.calls().count(name)


def enter(log: CallLog, name: str) -> None:
    """Log an invocation of body ``name``; crash or fail when the environment says so."""
    log.write(name)
    crash = os.environ.get("DURABLE_TEST_CRASH", "")
    if crash:
        target, _, nth = crash.partition("@")
        if target == name and log.count(name) == int(nth or 1):
            os._exit(CRASH_EXIT)
    if name in os.environ.get("DURABLE_TEST_FAIL", "").split(","):
        raise ValueError(f"{name} failed on purpose")


# -- graphs ------------------------------------------------------------------------------------


def chain5(log: CallLog) -> Graph:
    """seed -> n1 -> n2 -> n3 -> n4 -> n5 -> out."""
    g = Graph("chain5", inputs=[SEED])

    @g.node("n1", requires=[SEED], provides=[K1])
    def n1(rc: Any) -> None:
        enter(log, "n1")
        rc.set(K1, rc.get(SEED) + 1)

    @g.node("n2", requires=[K1], provides=[K2])
    async def n2(rc: Any) -> None:
        enter(log, "n2")
        rc.set(K2, rc.get(K1) * 2)

    @g.node("n3", requires=[K2], provides=[K3])
    def n3(rc: Any) -> None:
        enter(log, "n3")
        rc.set(K3, rc.get(K2) + 3)

    @g.node("n4", requires=[K3], provides=[K4])
    async def n4(rc: Any) -> None:
        enter(log, "n4")
        rc.set(K4, rc.get(K3) * rc.get(K3))

    @g.node("n5", requires=[K4], provides=[OUT])
    def n5(rc: Any) -> None:
        enter(log, "n5")
        rc.set(OUT, f"result={rc.get(K4)}")

    return g


def retry3(log: CallLog) -> Graph:
    """seed -> prep -> flaky (Retry(3)) -> out."""
    g = Graph("retry3", inputs=[SEED])

    @g.node("prep", requires=[SEED], provides=[K1])
    def prep(rc: Any) -> None:
        enter(log, "prep")
        rc.set(K1, rc.get(SEED) * 10)

    @g.node("flaky", requires=[K1], provides=[OUT], aspects=[Retry(3)])
    def flaky(rc: Any) -> None:
        enter(log, "flaky")
        if log.count("flaky") <= 2:
            raise ConnectionError(f"flaky try {log.count('flaky')} failed")
        rc.set(OUT, f"flaky={rc.get(K1)}")

    return g


X, Y1, Y2, Y3 = Key("x", int), Key("y1", int), Key("y2", int), Key("y3", int)


def with_sub(log: CallLog) -> Graph:
    """seed -> before -> Sub "inner" (c1 -> c2 -> c3) -> after -> out."""
    child = Graph("inner", inputs=[X])

    @child.node("c1", requires=[X], provides=[Y1])
    def c1(rc: Any) -> None:
        enter(log, "inner/c1")
        rc.set(Y1, rc.get(X) + 1)

    @child.node("c2", requires=[Y1], provides=[Y2])
    def c2(rc: Any) -> None:
        enter(log, "inner/c2")
        rc.set(Y2, rc.get(Y1) * 3)

    @child.node("c3", requires=[Y2], provides=[Y3])
    def c3(rc: Any) -> None:
        enter(log, "inner/c3")
        rc.set(Y3, rc.get(Y2) - 1)

    g = Graph("outer", inputs=[SEED])

    @g.node("before", requires=[SEED], provides=[K1])
    def before(rc: Any) -> None:
        enter(log, "before")
        rc.set(K1, rc.get(SEED) + 100)

    g.sub("inner", child, bindings=[In(K1, X), Out(Y3, K2)])

    @g.node("after", requires=[K2], provides=[OUT])
    def after(rc: Any) -> None:
        enter(log, "after")
        rc.set(OUT, f"after={rc.get(K2)}")

    return g


EVENTS = Key("events", int, stream=True, capacity=4)


def streaming(log: CallLog) -> Graph:
    """seed -> tail (a resumable producer of ``8 + seed`` elements) -> stream ``events``, read by
    three groups: ``every`` acks each delivery, ``sparse`` acks all but every third sequence
    (gaps stay pending until the node is confirmed), ``total`` never acks -> out."""
    g = Graph("streaming", inputs=[SEED])

    @g.node("tail", requires=[SEED], provides=[EVENTS])
    async def tail(rc: Any) -> None:
        enter(log, "tail")
        w = rc.writer(EVENTS)
        for i in range(w.position or 0, 8 + rc.get(SEED)):
            await w.send_at(i * 10, i + 1)

    @g.node("every", requires=[EVENTS], provides=[K1])
    async def every(rc: Any) -> None:
        enter(log, "every")
        seen = 0
        async for d in rc.reader(EVENTS).deliveries():
            seen += 1
            await d.ack()
        rc.set(K1, seen)

    @g.node("sparse", requires=[EVENTS], provides=[K2])
    async def sparse(rc: Any) -> None:
        enter(log, "sparse")
        seen = 0
        async for d in rc.reader(EVENTS).deliveries():
            seen += 1
            if d.sequence % 3:
                await d.ack()
        rc.set(K2, seen)

    @g.node("total", requires=[EVENTS], provides=[K3])
    def total(rc: Any) -> None:
        enter(log, "total")
        rc.set(K3, sum(rc.reader(EVENTS)))

    @g.node("out", requires=[K1, K2, K3], provides=[OUT])
    def out(rc: Any) -> None:
        enter(log, "out")
        rc.set(OUT, f"every={rc.get(K1)} sparse={rc.get(K2)} total={rc.get(K3)}")

    return g


SCENARIOS: dict[str, Callable[[CallLog], Graph]] = {
    "chain5": chain5,
    "retry3": retry3,
    "with_sub": with_sub,
}

# -- stores ------------------------------------------------------------------------------------


def open_store(kind: str, location: str | Path) -> Any:
    """A real store: ``memory``, ``file`` (a directory), ``sqlite`` (a directory for the database
    file) or ``postgres`` (a DSN)."""
    if kind == "memory":
        return MemoryStore()
    if kind == "file":
        return FileStore(location)
    if kind == "sqlite":
        return SQLiteStore(Path(location) / "runs.sqlite")
    if kind == "postgres":  # ``location`` is the DSN
        from durable_postgresstore import PostgresStore

        return PostgresStore(str(location))
    raise ValueError(kind)


def load(store: Any, run_id: str) -> RunRecord:
    """The stored record of ``run_id`` (through a session, closed at once)."""
    with store.acquire(run_id) as session:
        return session.load()


def stored_bytes(store: Any, run_id: str) -> bytes:
    """The canonical JSON of the stored record (to compare before/after)."""
    return record_to_json(load(store, run_id))


# -- store wrappers (they delegate every call to a real store) ----------------------------------


class SaveFailure(OSError):
    """The error a :class:`FailingStore` raises for a save."""


class FailingStore:
    """A real store whose sessions raise on one save.

    Args:
        store: the real store.
        fail_on: the 1-based number of the save (counted over all sessions) that raises, or a
            predicate of the proposed record.
        written: when True, the failing save is passed to the real store first (it is written)
            and raises after: an uncertain save (R-RT-2).
    """

    def __init__(
        self,
        store: Any,
        fail_on: int | Callable[[RunRecord], bool],
        *,
        written: bool = False,
    ) -> None:
        self.store = store
        self.fail_on = fail_on
        self.written = written
        self.saves = 0
        self.failed: list[int] = []

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        return _FailingSession(self, self.store.acquire(run_id, timeout))

    def close(self) -> None:
        self.store.close()


class _FailingSession:
    def __init__(self, owner: FailingStore, session: Any) -> None:
        self._owner = owner
        self._session = session
        self.run_id = session.run_id

    def load(self) -> RunRecord:
        return self._session.load()

    def save(self, record: RunRecord, expected_revision: int) -> None:
        owner = self._owner
        owner.saves += 1
        fail_on = owner.fail_on
        fail = owner.saves == fail_on if isinstance(fail_on, int) else fail_on(record)
        if not fail:
            self._session.save(record, expected_revision)
            return
        owner.failed.append(record.revision)
        if owner.written:
            self._session.save(record, expected_revision)
        raise SaveFailure(f"the disk went away during save #{owner.saves}")

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> _FailingSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class RecordingStore:
    """A real store whose sessions append ``("saved", revision, record)`` to a shared list
    after each successful save, so that tests can order saves against body starts.

    Args:
        store: the real store.
        events: the shared list.
        lock: guards ``events``.
        delay: seconds each save waits before it writes (widens the window in which an
            engine that published early would be caught).
    """

    def __init__(
        self, store: Any, events: list[Any], lock: threading.Lock, delay: float = 0.0
    ) -> None:
        self.store = store
        self.events = events
        self.lock = lock
        self.delay = delay
        self.saves = 0

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        return _RecordingSession(self, self.store.acquire(run_id, timeout))

    def close(self) -> None:
        self.store.close()


class _RecordingSession:
    def __init__(self, owner: RecordingStore, session: Any) -> None:
        self._owner = owner
        self._session = session
        self.run_id = session.run_id

    def load(self) -> RunRecord:
        return self._session.load()

    def save(self, record: RunRecord, expected_revision: int) -> None:
        if self._owner.delay:
            time.sleep(self._owner.delay)
        self._session.save(record, expected_revision)
        with self._owner.lock:
            self._owner.saves += 1
            self._owner.events.append(("saved", record.revision, record))

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> _RecordingSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
