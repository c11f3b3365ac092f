"""A run's history, kept with the run in its store, written off the save path (X-HIST).

A run's history is the list of its recovery events as JSON entries (what
:mod:`durable_core.plugins.runlog` writes and ``durable log``/``inspect``/``list`` read). It
belongs to the run in its store:

- A store with the optional capability :class:`~durable_core.store.capabilities.RunHistory` keeps it
  beside the record (the file store a ``<key>.history`` file, SQLite and PostgreSQL a table,
  the memory store a list), so every host sharing the store sees the same history, and
  deleting the run removes it.
- Any other store's runs have theirs in a local file (:class:`LocalHistory`) keyed by the
  store's identity (:func:`store_identity`), the run id and the run's root scope.

Either way it is keyed by the run's root scope (``RunRecord.root_scope``, random per run): a
run deleted and started again under the same id, and a fork, start a history of their own.

Writing never delays or fails a save: :data:`WRITER` (one per process) takes entries in a
queue (:meth:`HistoryWriter.submit` only appends to it) and a daemon thread appends them, in
batches gathered over :data:`LINGER` seconds, to each run's history. A failed write is logged
once per store as a warning and its entries are dropped; the run goes on. ``Runtime.run`` and
the CLI call :func:`flush` when a run ends, so that what they read next is complete.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import pathlib
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from durable_core.store.capabilities import Capability, capabilities
from durable_core.store.history import check_entries, complete_lines

__all__ = [
    "FLUSH_TIMEOUT",
    "LINGER",
    "LOG_DIR_ENV",
    "QUEUE_LIMIT",
    "WRITER",
    "HistoryTarget",
    "HistoryWriter",
    "LocalHistory",
    "check_entries",
    "flush",
    "history_of",
    "log_directory",
    "root_scope_of",
    "store_identity",
]

log = logging.getLogger("durable_core.history")

LOG_DIR_ENV = "DURABLE_LOG_DIR"
"""Environment variable: the folder of the local history files (overrides the default)."""

FLUSH_TIMEOUT = 10.0
"""Seconds :func:`flush` waits at most, by default, for the entries already submitted."""

QUEUE_LIMIT = 100_000
"""Entries the writer holds at most; past it new ones are dropped (with a warning, once)."""

LINGER = 0.2
"""Seconds the writer gathers entries before it appends them (unless a flush is asked for)."""

_BATCH = 1000


def log_directory() -> pathlib.Path:
    """``$DURABLE_LOG_DIR``, else ``$DURABLE_HOME/logs``, else
    ``platformdirs.user_log_dir("durable")``: where :class:`LocalHistory` keeps its files."""
    explicit = os.environ.get(LOG_DIR_ENV)
    if explicit:
        return pathlib.Path(explicit).expanduser().absolute()
    home = os.environ.get("DURABLE_HOME")
    if home:
        return pathlib.Path(home).expanduser().absolute() / "logs"
    import platformdirs

    return pathlib.Path(platformdirs.user_log_dir("durable"))


def store_identity(store: Any) -> str:
    """What names ``store`` across processes: its ``repr`` (a file store's directory, a
    database's path), or its class's qualified name when its ``repr`` is Python's default
    (which holds a memory address)."""
    text = repr(store)
    if re.search(r" at 0x[0-9a-fA-F]+>$", text):
        kind = type(store)
        text = f"{kind.__module__}.{kind.__qualname__}"
    return text


class LocalHistory:
    """The histories of a store without :class:`~durable_core.store.capabilities.RunHistory`: one
    JSON-lines file per run in :func:`log_directory`, named by a readable prefix of the run id
    and a digest of the store's identity, the run id and the run's root scope. Appends use
    ``O_APPEND`` (one ``write`` per call: concurrent appenders never interleave a line)."""

    def __init__(self, identity: str, directory: pathlib.Path | None = None) -> None:
        self.identity = identity
        self._directory = directory

    def path(self, run_id: str, root_scope: str) -> pathlib.Path:
        """The file of ``run_id``'s run ``root_scope``."""
        readable = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)[:40]
        key = "\0".join((self.identity, run_id, root_scope))
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return (self._directory or log_directory()) / f"{readable}-{digest}.jsonl"

    def append_history(self, run_id: str, root_scope: str, entries: Sequence[str]) -> None:
        check_entries(root_scope, entries)
        if not entries:
            return
        path = self.path(run_id, root_scope)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = "".join(entry + "\n" for entry in entries).encode("utf-8", "replace")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def read_history(self, run_id: str, root_scope: str) -> list[str]:
        try:
            data = self.path(run_id, root_scope).read_bytes()
        except FileNotFoundError:
            return []
        return complete_lines(data)


def history_of(store: Any) -> Any:
    """Where the histories of ``store``'s runs are: the store itself when it has the
    capability, else its :class:`LocalHistory`."""

    if Capability.RUN_HISTORY in capabilities(store):
        return store
    return LocalHistory(store_identity(store))


def root_scope_of(store: Any, run_id: str) -> str:
    """The root scope of ``run_id``'s record in ``store``, read without taking the run's
    session where the store can (``RecordPeeker``), else through a short session.

    Raises:
        NotFoundError: no record.
        BusyError: the run is owned and the store cannot be read without its session.
        CorruptRecordError: the record cannot be read.
    """

    if Capability.PEEK in capabilities(store):
        return store.peek(run_id).root_scope
    with store.acquire(run_id) as session:
        return session.load().root_scope


@attrs.frozen
class HistoryTarget:
    """Whose history an event goes to: a run (``run_id``, ``root_scope``) of ``store``.

    Given to the ``durable_recovery_event`` hook as its ``history`` argument, by the runtime
    that saved the event's change."""

    store: Any = attrs.field(eq=False, repr=store_identity)
    run_id: str
    root_scope: str

    @property
    def key(self) -> tuple[int, str, str]:
        return (id(self.store), self.run_id, self.root_scope)


class HistoryWriter:
    """Appends run histories from a daemon thread; one per process (:data:`WRITER`).

    :meth:`submit` never blocks and never raises for a write: it puts the work in a queue. The
    thread takes what has come, calls each item's ``produce`` (which returns the entries, as
    text) in submission order, and appends each run's entries in one call. An exception is
    logged once per store (and once per ``produce`` function) as a warning; the entries are
    dropped.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._unwritten = 0
        self._thread: threading.Thread | None = None
        self._warned: set[str] = set()

    def submit(self, target: HistoryTarget, produce: Callable[..., list[str]], *args: Any) -> None:
        """Queue ``produce(target, *args)`` (called on the writer's thread; it returns the
        entries to append to ``target``'s history)."""
        with self._lock:
            if self._unwritten >= QUEUE_LIMIT:
                self._warn_once(
                    "queue",
                    "the run history's queue is full (%d entries); "
                    "events are dropped until it drains",
                    QUEUE_LIMIT,
                )
                return
            self._unwritten += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="durable-history", daemon=True
                )
                self._thread.start()
        self._queue.put((target, produce, args))

    def pending(self) -> bool:
        """Whether entries submitted are not written yet."""
        return self._unwritten > 0

    def flush(self, timeout: float | None = FLUSH_TIMEOUT) -> bool:
        """Wait until everything submitted before the call is written (or dropped); at most
        ``timeout`` seconds. Returns False when the time ran out."""
        if not self._unwritten or self._thread is None:
            return True
        done = threading.Event()
        self._queue.put((None, done, ()))
        if done.wait(timeout):
            return True
        log.warning("the run history was not written within %s s; the rest follows", timeout)
        return False

    def _work(self) -> None:
        q = self._queue
        while True:
            batch = [q.get()]
            # Gather what comes for a moment (a flush request ends it at once): one append
            # per run per batch, so a store's medium is touched a few times a second at most
            # (SQLite serializes writers: a save never meets a history transaction per event).
            deadline = time.monotonic() + LINGER
            while len(batch) < _BATCH and batch[-1][0] is not None:
                remaining = deadline - time.monotonic()
                try:
                    batch.append(q.get(timeout=remaining) if remaining > 0 else q.get_nowait())
                except queue.Empty:
                    break
            self._write(batch)

    def _write(self, batch: list[Any]) -> None:
        groups: dict[tuple[int, str, str], tuple[HistoryTarget, list[str]]] = {}
        flushed: list[threading.Event] = []
        count = 0
        for target, produce, args in batch:
            if target is None:
                flushed.append(produce)
                continue
            count += 1
            try:
                entries = produce(target, *args)
            except Exception as exc:
                self._warn_once(
                    f"produce {getattr(produce, '__qualname__', produce)}",
                    "could not describe a recovery event for the run history: %s: %s; "
                    "it is left out",
                    type(exc).__name__,
                    exc,
                )
                continue
            if entries:
                groups.setdefault(target.key, (target, []))[1].extend(entries)
        for target, entries in groups.values():
            try:
                history_of(target.store).append_history(target.run_id, target.root_scope, entries)
            except Exception as exc:
                identity = store_identity(target.store)
                self._warn_once(
                    identity,
                    "could not write the history of run %r in %s: %s: %s; its events are "
                    "dropped (the run goes on; this is reported once per store)",
                    target.run_id,
                    identity,
                    type(exc).__name__,
                    exc,
                )
        with self._lock:
            self._unwritten -= count
        for done in flushed:
            done.set()

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        log.warning(message, *args)


WRITER = HistoryWriter()
"""The process's history writer."""


def flush(timeout: float | None = FLUSH_TIMEOUT) -> bool:
    """Wait for :data:`WRITER` to write what was submitted (see :meth:`HistoryWriter.flush`)."""
    return WRITER.flush(timeout)


if hasattr(os, "register_at_fork"):  # a forked child starts with no writer thread
    os.register_at_fork(after_in_child=WRITER._reset)


@atexit.register
def _flush_at_exit() -> None:
    with contextlib.suppress(Exception):
        WRITER.flush(2.0)
