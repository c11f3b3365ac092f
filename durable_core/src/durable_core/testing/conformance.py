"""The Store conformance kit: every clause of the Store/Session contract as its own test.

See :mod:`durable_core.testing` for how a backend runs it.
"""

from __future__ import annotations

import itertools
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

import attrs
import pytest

from durable_core.errors import (
    BusyError,
    ConflictError,
    CorruptRecordError,
    NotFoundError,
    SessionClosedError,
)
from durable_core.recordjson import record_to_json
from durable_core.records import RunRecord, ScopeRecord
from durable_core.store import MAX_REVISION, EncodedRecord, RunLister, Session, Store
from durable_core.testing.conformance_inbox import InboxConformance
from durable_core.testing.process import StoreProcess
from durable_core.testing.records import record_delta, sample_record

__all__ = ["BUSY_LIMIT", "RawRecords", "StoreConformance", "StoreSpec"]

BUSY_LIMIT = 0.5
"""Seconds within which a second acquire of a held run must raise BusyError ("at once")."""

_THREADS = 8


@attrs.frozen
class StoreSpec:
    """How the conformance kit creates the store under test.

    Attributes:
        factory: a zero-argument callable returning a new Store object over the *same*
            storage on every call (a second call is "reopening the store"). It must be
            picklable (a module-level function or class, or ``functools.partial`` of one) when
            ``cross_process`` is true: the kit re-creates the store in child processes.
        cross_process: the store keeps records and ownership across processes. ``False``
            skips the cross-process clauses (and only those) with ``reason``.
        reason: why the store is in-process only (shown in the skip message).
        release_timeout: seconds a store may take to notice that a killed owner process is
            gone (a database server noticing a dropped connection); local OS locks release at
            once. Every acquire attempt meanwhile must still raise BusyError at once.
    """

    factory: Callable[[], Store]
    cross_process: bool = True
    reason: str = ""
    release_timeout: float = 10.0


@runtime_checkable
class RawRecords(Protocol):
    """Direct access to a backend's stored bytes, past the store: how the kit corrupts a record.

    A backend's test module returns one from the fixture ``durable_raw_records``.
    """

    def read(self, run_id: str) -> bytes | None:
        """The bytes stored as ``run_id``'s record, or ``None`` when none is stored."""
        ...

    def write(self, run_id: str, data: bytes, revision: int) -> None:
        """Store ``data`` as ``run_id``'s record, replacing what is there, as a hand edit would.

        ``revision`` is what a medium that keeps the revision beside the record (a database
        column) stores there; a medium that keeps only the record ignores it.
        """
        ...


def _corrupt(kind: str) -> bytes:
    """Bytes that are not a valid stored record of ``run-a`` at revision 1."""
    good = record_to_json(sample_record("run-a", 1))
    if kind == "not json":
        return b"{not json"
    if kind == "truncated":
        return good[: len(good) // 2]
    if kind == "invalid utf-8":
        return good.replace(b'"v1"', b'"v1\xff"', 1)
    if kind == "another run":
        return record_to_json(sample_record("run-b", 1))
    if kind == "empty":
        return b""
    raise ValueError(kind)


def _chain(run_id: str, count: int) -> list[RunRecord]:
    """Records at revisions 1 … ``count`` of one run, each a little different from the last."""
    return [
        sample_record(run_id, revision, marker=f"-{revision}-" + "d" * (100 + revision % 50))
        for revision in range(1, count + 1)
    ]


def _encoded(previous: RunRecord | None, record: RunRecord) -> EncodedRecord:
    """What the runtime hands ``save``: the complete bytes and (after the first) the delta."""
    delta = None if previous is None else record_delta(previous, record)
    return EncodedRecord(lambda: record_to_json(record), delta)


def _confirmed(progress: str) -> int:
    """The last revision a killed chain child confirmed (complete lines only), or 0."""
    try:
        with open(progress, encoding="ascii") as lines:
            done = [line for line in lines if line.endswith("\n")]
    except FileNotFoundError:
        return 0
    return int(done[-1]) if done else 0


def _json(record: RunRecord) -> bytes:
    return record_to_json(record)


_APPENDS = 20
_PER_APPEND = 5
_PADDING = 5000


def _append_history_child(factory: Callable[[], Store], name: str, start: Any) -> None:
    """A child process appending to one run's history, in many calls of several long
    entries each (``name:number:padding``)."""
    store: Any = factory()
    try:
        start.wait(60)
        for call in range(_APPENDS):
            store.append_history(
                "shared",
                "scope-1",
                [f"{name}:{call * _PER_APPEND + i}:{'x' * _PADDING}" for i in range(_PER_APPEND)],
            )
    finally:
        store.close()


def _timed_busy(acquire: Callable[[], Any]) -> float:
    """Call ``acquire``, require BusyError, return the seconds it took."""
    started = time.monotonic()
    with pytest.raises(BusyError):
        session = acquire()
        session.close()  # not reached when the store is correct
    return time.monotonic() - started


class StoreConformance(InboxConformance):
    """Subclass this (as ``Test…``) and define the fixture ``durable_store_factory``.

    The fixture returns either a :class:`StoreSpec` or a bare zero-argument callable (then
    taken as ``StoreSpec(factory=callable)``). It must give a fresh, empty storage per test
    (use ``tmp_path``, a new database, a new schema …), and every call of the factory must
    return a store over that same storage.
    """

    # -- fixtures --------------------------------------------------------------------------

    @pytest.fixture
    def durable_store_spec(self, durable_store_factory: Any) -> StoreSpec:
        """The backend's :class:`StoreSpec`, from its ``durable_store_factory`` fixture."""
        if isinstance(durable_store_factory, StoreSpec):
            return durable_store_factory
        if callable(durable_store_factory):
            return StoreSpec(factory=durable_store_factory)
        raise TypeError(
            "the fixture durable_store_factory must return a StoreSpec or a zero-argument "
            f"callable returning a Store, found {type(durable_store_factory).__name__}"
        )

    @pytest.fixture
    def durable_open_store(self, durable_store_spec: StoreSpec) -> Iterator[Callable[[], Store]]:
        """A function opening another store over the test's storage; closed at teardown."""
        opened: list[Store] = []

        def open_store() -> Store:
            store = durable_store_spec.factory()
            assert isinstance(store, Store), f"{store!r} does not implement the Store protocol"
            opened.append(store)
            return store

        yield open_store
        for store in reversed(opened):
            store.close()

    @pytest.fixture
    def durable_store(self, durable_open_store: Callable[[], Store]) -> Store:
        """The store under test."""
        return durable_open_store()

    @pytest.fixture
    def durable_raw_records(self) -> RawRecords:
        """The backend's :class:`RawRecords`; every backend must define this fixture."""
        pytest.fail(
            "define the fixture durable_raw_records in your StoreConformance subclass: it "
            "returns a RawRecords (read/write of the stored bytes past the store), which the "
            "kit uses to check that a corrupt stored record is refused and never overwritten"
        )

    @pytest.fixture
    def durable_spawn(self, durable_store_spec: StoreSpec) -> Iterator[Callable[[], StoreProcess]]:
        """Start child processes using the store; skips for in-process stores."""
        if not durable_store_spec.cross_process:
            pytest.skip(
                "in-process store, cross-process clauses do not apply: "
                f"{durable_store_spec.reason or 'declared cross_process=False'}"
            )
        started: list[StoreProcess] = []

        def spawn() -> StoreProcess:
            try:
                child = StoreProcess(durable_store_spec.factory)
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                pytest.fail(
                    f"the store factory {durable_store_spec.factory!r} cannot be pickled for a "
                    f"child process ({exc}); use a module-level function or class, or "
                    "functools.partial of one, with picklable arguments"
                )
            started.append(child)
            return child

        yield spawn
        for child in started:
            child.__exit__(None, None, None)

    # -- load / save (R-STORE-2, R-STORE-3) ------------------------------------------------

    def test_session_owns_its_run_id(self, durable_store: Store) -> None:
        # covers: R-STORE-2
        with durable_store.acquire("run-ä") as session:
            assert isinstance(session, Session)
            assert session.run_id == "run-ä"

    def test_load_without_record_raises_not_found(self, durable_store: Store) -> None:
        # covers: R-STORE-2
        with durable_store.acquire("run-a") as session, pytest.raises(NotFoundError):
            session.load()

    def test_not_found_is_per_run(self, durable_store: Store) -> None:
        # covers: R-STORE-1, R-STORE-2
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
        with durable_store.acquire("run-b") as session, pytest.raises(NotFoundError):
            session.load()

    def test_first_save_expects_zero_and_writes_revision_one(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        record = sample_record("run-a", 1)
        with durable_store.acquire("run-a") as session:
            session.save(record, 0)
            loaded = session.load()
        assert loaded.revision == 1
        assert loaded == record
        assert _json(loaded) == _json(record)

    def test_each_save_raises_the_revision_by_one(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            for revision in range(1, 6):
                session.save(sample_record("run-a", revision, marker=str(revision)), revision - 1)
                loaded = session.load()
                assert loaded.revision == revision
                assert loaded.version == f"v1{revision}"

    @pytest.mark.parametrize("expected", [0, 1, 3, 4])
    def test_cas_conflict_keeps_the_old_record(self, durable_store: Store, expected: int) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
            session.save(sample_record("run-a", 2, marker="stored"), 1)
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", expected + 1, marker="lost"), expected)
            loaded = session.load()
            assert _json(loaded) == _json(sample_record("run-a", 2, marker="stored"))
            # the session stays usable after a conflict
            session.save(sample_record("run-a", 3), 2)
            assert session.load().revision == 3

    @pytest.mark.parametrize("expected", [1, 2, 7])
    def test_first_save_must_expect_zero(self, durable_store: Store, expected: int) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", expected + 1), expected)
            with pytest.raises(NotFoundError):
                session.load()

    @pytest.mark.parametrize("revision", [0, 1, 3, 4])
    def test_record_revision_must_be_expected_plus_one(
        self, durable_store: Store, revision: int
    ) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", revision, marker="lost"), 1)
            assert _json(session.load()) == _json(sample_record("run-a", 1))

    def test_run_id_mismatch_is_refused(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            with pytest.raises(ConflictError):
                session.save(sample_record("run-b", 1), 0)
            with pytest.raises(NotFoundError):
                session.load()
            session.save(sample_record("run-a", 1), 0)
            with pytest.raises(ConflictError):
                session.save(sample_record("run-A", 2), 1)
            assert _json(session.load()) == _json(sample_record("run-a", 1))
        with durable_store.acquire("run-b") as other, pytest.raises(NotFoundError):
            other.load()

    def test_revision_overflow_is_refused(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", MAX_REVISION + 1), MAX_REVISION)
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", MAX_REVISION + 2), MAX_REVISION + 1)
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", 0), -1)
            with pytest.raises(NotFoundError):
                session.load()
            session.save(sample_record("run-a", 1), 0)
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", MAX_REVISION + 1), MAX_REVISION)
            assert session.load().revision == 1

    def test_load_returns_an_isolated_copy(self, durable_store: Store) -> None:
        # covers: R-STORE-2
        record = sample_record("run-a", 1)
        with durable_store.acquire("run-a") as session:
            session.save(record, 0)
            first = session.load()
            first.version = "changed"
            first.scopes["new"] = ScopeRecord(graph="g")
            next(iter(first.attempts.values())).index = 99
            first.scopes[first.root_scope].nodes["extract"].outputs[0].data = b"changed"
            second = session.load()
            assert first is not second
            assert _json(second) == _json(record)

    def test_save_copies_the_record(self, durable_store: Store) -> None:
        # covers: R-STORE-2, R-STORE-3
        record = sample_record("run-a", 1)
        expected = _json(record)
        with durable_store.acquire("run-a") as session:
            session.save(record, 0)
            record.version = "changed after save"
            record.scopes[record.root_scope].nodes.clear()
            assert _json(session.load()) == expected

    def test_successful_save_is_whole(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        with durable_store.acquire("run-a") as session:
            small = sample_record("run-a", 1, rich=False)
            session.save(small, 0)
            big = sample_record("run-a", 2)
            session.save(big, 1)
            assert _json(session.load()) == _json(big)
            smaller = sample_record("run-a", 3, rich=False)
            session.save(smaller, 2)
            assert _json(session.load()) == _json(smaller)

    def test_save_writes_the_callers_encoding(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        first = sample_record("run-a", 1)
        second = sample_record("run-a", 2, marker="encoded")
        with durable_store.acquire("run-a") as session:
            session.save(first, 0, EncodedRecord(record_to_json(first)))
            assert _json(session.load()) == _json(first)
            made: list[int] = []

            def encode() -> bytes:
                made.append(1)
                return record_to_json(second)

            session.save(second, 1, encoded=EncodedRecord(encode))
            assert len(made) <= 1
            assert _json(session.load()) == _json(second)
            with pytest.raises(ConflictError):  # the encoding changes no rule
                session.save(second, 1, EncodedRecord(record_to_json(second)))
            assert _json(session.load()) == _json(second)

    def test_a_very_long_run_id_is_kept_exactly(self, durable_store: Store) -> None:
        # covers: R-STORE-1, R-STORE-2, R-REC-4
        run_id = ("ü-🚀-" * 200_000)[:1_000_000]
        record = sample_record(run_id, 1)
        with durable_store.acquire(run_id) as session:
            session.save(record, 0)
        with durable_store.acquire(run_id) as session:
            loaded = session.load()
            assert loaded.run_id == run_id
            session.save(sample_record(run_id, 2), 1)
        with durable_store.acquire(run_id[:-1]) as other, pytest.raises(NotFoundError):
            other.load()
        if isinstance(durable_store, RunLister):
            assert [s.run_id for s in durable_store.list_runs()] == [run_id]

    # -- a corrupt stored record (R-STORE-2, R-STORE-3, E-1) -------------------------------

    @pytest.mark.parametrize(
        "kind", ["not json", "truncated", "invalid utf-8", "another run", "empty"]
    )
    def test_a_corrupt_record_is_refused_and_never_overwritten(
        self, durable_store: Store, durable_raw_records: RawRecords, kind: str
    ) -> None:
        # covers: R-STORE-2, R-STORE-3, E-1
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
        assert durable_raw_records.read("run-a") is not None
        corrupt = _corrupt(kind)
        durable_raw_records.write("run-a", corrupt, 1)
        with durable_store.acquire("run-a") as session:  # a save without a load first
            with pytest.raises(CorruptRecordError):
                session.save(sample_record("run-a", 2, marker="over"), 1)
            assert durable_raw_records.read("run-a") == corrupt
        with durable_store.acquire("run-a") as session:  # a load, then a save
            with pytest.raises(CorruptRecordError):
                session.load()
            with pytest.raises(CorruptRecordError):
                session.save(sample_record("run-a", 2, marker="over"), 1)
            with pytest.raises((CorruptRecordError, ConflictError)):
                session.save(sample_record("run-a", 1, marker="over"), 0)
        assert durable_raw_records.read("run-a") == corrupt

    # -- saves in proportion to the change: deltas, folding, rest --------------------------

    def test_saves_with_deltas_load_the_complete_record(
        self,
        durable_store: Store,
        durable_open_store: Callable[[], Store],
        durable_raw_records: RawRecords,
    ) -> None:
        # covers: R-STORE-2, R-STORE-3
        records = _chain("run-a", 80)
        with durable_store.acquire("run-a") as session:
            previous = None
            for record in records:
                expected = 0 if previous is None else previous.revision
                session.save(record, expected, _encoded(previous, record))
                if record.revision % 9 == 0:
                    assert _json(session.load()) == _json(record)
                previous = record
            assert _json(session.load()) == _json(records[-1])
            with pytest.raises(ConflictError):  # CAS holds for delta saves too
                session.save(records[-1], records[-2].revision, _encoded(records[-2], records[-1]))
        # At rest (the last session closed cleanly) the store holds the complete record.
        assert durable_raw_records.read("run-a") == _json(records[-1])
        with durable_open_store().acquire("run-a") as session:
            assert _json(session.load()) == _json(records[-1])

    def test_a_delta_that_does_not_fit_is_not_used(self, durable_store: Store) -> None:
        # covers: R-STORE-3
        first, second, third = _chain("run-a", 3)
        with durable_store.acquire("run-a") as session:
            session.save(first, 0)
            # A delta from another revision (a caller's mistake): the complete bytes count.
            session.save(second, 1, EncodedRecord(_json(second), record_delta(second, third)))
            assert _json(session.load()) == _json(second)
            session.save(third, 2, _encoded(second, third))
            assert _json(session.load()) == _json(third)

    @pytest.mark.slow
    @pytest.mark.parametrize("delay", [0.05, 0.3, 0.8])
    def test_a_killed_writer_loses_no_confirmed_save_and_shows_no_half_save(
        self,
        durable_store: Store,
        durable_spawn: Callable[[], StoreProcess],
        durable_store_spec: StoreSpec,
        durable_raw_records: RawRecords,
        tmp_path: Any,
        delay: float,
    ) -> None:
        # covers: R-STORE-2, R-STORE-3, R-RT-2
        records = _chain("run-a", 400)
        deltas = [None, *(record_delta(a, b) for a, b in itertools.pairwise(records))]
        child = durable_spawn()
        child.acquire("run-a").expect_ok()
        progress = str(tmp_path / "progress")
        child.start_chain("run-a", records, deltas, 0, progress)
        time.sleep(delay)
        child.kill()  # SIGKILL at any point: mid-save, mid-fold, between saves
        confirmed = _confirmed(progress)
        with self._acquire_after_release(durable_store, "run-a", durable_store_spec) as session:
            try:
                loaded = session.load()
            except NotFoundError:
                assert confirmed == 0, f"revision {confirmed} was confirmed, then lost"
                return
            # Every confirmed save is there; the one in flight is there whole or not at all.
            assert confirmed <= loaded.revision <= confirmed + 1, (confirmed, loaded.revision)
            assert _json(loaded) == _json(records[loaded.revision - 1])
            # The run goes on from there, with deltas again, and rests as a complete record.
            after = sample_record("run-a", loaded.revision + 1, marker="after the crash")
            session.save(after, loaded.revision, _encoded(loaded, after))
            assert _json(session.load()) == _json(after)
        assert durable_raw_records.read("run-a") == _json(after)

    def test_a_session_that_did_not_save_changes_no_stored_byte(
        self,
        durable_store: Store,
        durable_spawn: Callable[[], StoreProcess],
        durable_store_spec: StoreSpec,
        durable_raw_records: RawRecords,
    ) -> None:
        # covers: R-STORE-2, R-STORE-4, E-2
        records = _chain("run-a", 6)
        child = durable_spawn()
        child.acquire("run-a").expect_ok()
        previous = None
        for record in records:
            delta = None if previous is None else record_delta(previous, record)
            child.save("run-a", record, record.revision - 1, delta).expect_ok()
            previous = record
        child.kill()  # the owner dies: whatever it keeps beside the record stays as it is
        stored = durable_raw_records.read("run-a")
        saved_at = getattr(durable_store, "saved_at", None)
        when = saved_at("run-a") if saved_at is not None else None
        # A look (load, close), a session that saves nothing, and one whose save is refused
        # leave every stored byte, and the time of the last save, as they were.
        with self._acquire_after_release(durable_store, "run-a", durable_store_spec) as session:
            assert _json(session.load()) == _json(records[-1])
        assert durable_raw_records.read("run-a") == stored
        with durable_store.acquire("run-a"):
            pass
        with durable_store.acquire("run-a") as session:
            session.load()
            with pytest.raises(ConflictError):
                session.save(sample_record("run-a", 3, marker="stale"), 2)
        assert durable_raw_records.read("run-a") == stored
        if saved_at is not None:
            assert saved_at("run-a") == when
        # The next session that saves goes on from the complete record, and rests complete.
        with durable_store.acquire("run-a") as session:
            assert _json(session.load()) == _json(records[-1])
            after = sample_record("run-a", 7, marker="after the looks")
            session.save(after, 6, _encoded(records[-1], after))
        assert durable_raw_records.read("run-a") == _json(after)

    # -- UTF-8 (B-FILE-5, R-REC-4) ---------------------------------------------------------

    @pytest.mark.parametrize(
        "spot", ["version", "scope key", "node id", "value name", "attempt boundary"]
    )
    def test_invalid_utf8_is_refused_before_writing(self, durable_store: Store, spot: str) -> None:
        # covers: B-FILE-5, R-REC-4, R-STORE-3
        good = sample_record("run-a", 1)
        bad = sample_record("run-a", 2)
        lone = "bad\udc80"
        root = bad.scopes[bad.root_scope]
        if spot == "version":
            bad.version = lone
        elif spot == "scope key":
            bad.scopes[lone] = ScopeRecord(graph="g")
        elif spot == "node id":
            root.nodes["extract"].node_id = lone
        elif spot == "value name":
            root.nodes["extract"].outputs[1].name = lone
        else:
            next(iter(bad.attempts.values())).boundary = lone
        with durable_store.acquire("run-a") as session:
            session.save(good, 0)
            with pytest.raises(CorruptRecordError):
                session.save(bad, 1)
            assert _json(session.load()) == _json(good)
            session.save(sample_record("run-a", 2), 1)
            assert session.load().revision == 2

    def test_valid_unicode_and_bytes_are_kept(self, durable_store: Store) -> None:
        # covers: B-FILE-5, R-REC-4
        record = sample_record("运行-🚀", 1)
        record.version = "é\u0301 \U0010ffff \u2028 \x00"
        with durable_store.acquire("运行-🚀") as session:
            session.save(record, 0)
            loaded = session.load()
        assert loaded == record
        assert _json(loaded) == _json(record)

    # -- close (R-STORE-4) -----------------------------------------------------------------

    def test_close_is_idempotent_and_load_save_after_close_raise(
        self, durable_store: Store
    ) -> None:
        # covers: R-STORE-4
        session = durable_store.acquire("run-a")
        session.save(sample_record("run-a", 1), 0)
        session.close()
        session.close()
        with pytest.raises(SessionClosedError):
            session.load()
        with pytest.raises(SessionClosedError):
            session.save(sample_record("run-a", 2), 1)
        with durable_store.acquire("run-a") as again:
            assert _json(again.load()) == _json(sample_record("run-a", 1))

    def test_with_block_closes_the_session(self, durable_store: Store) -> None:
        # covers: R-STORE-4
        with durable_store.acquire("run-a") as session:
            pass
        with pytest.raises(SessionClosedError):
            session.load()
        durable_store.acquire("run-a").close()

    def test_close_releases_ownership(
        self, durable_store: Store, durable_open_store: Callable[[], Store]
    ) -> None:
        # covers: R-STORE-4, R-STORE-1
        other = durable_open_store()
        for _ in range(3):
            session = durable_store.acquire("run-a")
            session.close()
            session = other.acquire("run-a")
            session.close()

    def test_store_close_closes_its_sessions(
        self, durable_store: Store, durable_open_store: Callable[[], Store]
    ) -> None:
        # covers: R-STORE-4
        session = durable_store.acquire("run-a")
        session.save(sample_record("run-a", 1), 0)
        durable_store.close()
        durable_store.close()
        with pytest.raises(SessionClosedError):
            session.load()
        with pytest.raises(SessionClosedError):
            session.save(sample_record("run-a", 2), 1)
        other = durable_open_store()
        if other is not durable_store:  # a store reopened over the same storage
            with other.acquire("run-a") as again:
                assert _json(again.load()) == _json(sample_record("run-a", 1))

    # -- ownership (R-STORE-1) -------------------------------------------------------------

    def test_second_acquire_in_the_same_store_is_busy_at_once(self, durable_store: Store) -> None:
        # covers: R-STORE-1
        with durable_store.acquire("run-a") as owner:
            elapsed = _timed_busy(lambda: durable_store.acquire("run-a"))
            assert elapsed < BUSY_LIMIT, f"BusyError took {elapsed:.3f} s"
            owner.save(sample_record("run-a", 1), 0)  # the owner is unaffected
            assert owner.load().revision == 1

    def test_second_acquire_from_another_store_object_is_busy_at_once(
        self, durable_store: Store, durable_open_store: Callable[[], Store]
    ) -> None:
        # covers: R-STORE-1
        other = durable_open_store()
        with durable_store.acquire("run-a") as owner:
            elapsed = _timed_busy(lambda: other.acquire("run-a"))
            assert elapsed < BUSY_LIMIT, f"BusyError took {elapsed:.3f} s"
            owner.save(sample_record("run-a", 1), 0)
        with other.acquire("run-a") as session:
            assert session.load().revision == 1

    def test_racing_acquires_of_one_run_have_one_winner(
        self, durable_store: Store, durable_open_store: Callable[[], Store]
    ) -> None:
        # covers: R-STORE-1
        stores = [durable_store, durable_open_store()]
        barrier = threading.Barrier(_THREADS, timeout=30)
        winners: list[Session] = []
        busy: list[float] = []
        failures: list[BaseException] = []
        mutex = threading.Lock()

        def attempt(index: int) -> None:
            store = stores[index % 2]
            barrier.wait()
            started = time.monotonic()
            try:
                session = store.acquire("run-a")
            except BusyError:
                with mutex:
                    busy.append(time.monotonic() - started)
            except BaseException as exc:
                with mutex:
                    failures.append(exc)
            else:
                with mutex:
                    winners.append(session)

        threads = [threading.Thread(target=attempt, args=(i,)) for i in range(_THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not failures, failures
        assert len(winners) == 1, f"{len(winners)} sessions own the same run"
        assert len(busy) == _THREADS - 1
        assert max(busy) < BUSY_LIMIT * 2, f"slowest BusyError took {max(busy):.3f} s"
        winners[0].close()

    def test_different_runs_are_independent_and_concurrent(self, durable_store: Store) -> None:
        # covers: R-STORE-1
        barrier = threading.Barrier(_THREADS, timeout=30)
        failures: list[BaseException] = []

        def work(index: int) -> None:
            run_id = f"run-{index}"
            try:
                with durable_store.acquire(run_id) as session:
                    barrier.wait()  # every run is owned at the same time
                    for revision in range(1, 6):
                        session.save(
                            sample_record(run_id, revision, marker=str(index)), revision - 1
                        )
                    loaded = session.load()
                    assert _json(loaded) == _json(sample_record(run_id, 5, marker=str(index)))
                    barrier.wait()
            except BaseException as exc:
                failures.append(exc)
                barrier.abort()

        threads = [threading.Thread(target=work, args=(i,)) for i in range(_THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not failures, failures
        for index in range(_THREADS):
            with durable_store.acquire(f"run-{index}") as session:
                assert session.load().revision == 5

    def test_stale_owner_cannot_overwrite_a_newer_record(
        self, durable_store: Store, durable_open_store: Callable[[], Store]
    ) -> None:
        # covers: R-STORE-3, R-STORE-4, R-RT-2
        stuck = durable_store.acquire("run-a")
        stuck.save(sample_record("run-a", 1), 0)
        snapshot = stuck.load()
        stuck.close()  # the stuck owner's session is gone
        newer = sample_record("run-a", 2, marker="newer")
        with durable_open_store().acquire("run-a") as session:
            session.save(newer, 1)
        with pytest.raises(SessionClosedError):
            stuck.save(sample_record("run-a", 2, marker="stale"), snapshot.revision)
        with durable_store.acquire("run-a") as again:
            with pytest.raises(ConflictError):
                again.save(sample_record("run-a", 2, marker="stale"), snapshot.revision)
            assert _json(again.load()) == _json(newer)

    def test_record_survives_reopening_the_store(
        self, durable_store: Store, durable_open_store: Callable[[], Store]
    ) -> None:
        # covers: R-STORE-2, R-STORE-3
        record = sample_record("run-a", 2)
        with durable_store.acquire("run-a") as session:
            session.save(sample_record("run-a", 1), 0)
            session.save(record, 1)
        with durable_open_store().acquire("run-a") as session:
            assert _json(session.load()) == _json(record)

    # -- listing (RunLister) ---------------------------------------------------------------

    def test_list_runs(self, durable_store: Store) -> None:
        # covers: R-STORE-1
        if not isinstance(durable_store, RunLister):
            pytest.skip("the store does not implement RunLister.list_runs")
        assert list(durable_store.list_runs()) == []
        ids = ["run-b", "run-a", "运行-ü"]
        for revisions, run_id in enumerate(ids, start=1):
            with durable_store.acquire(run_id) as session:
                for revision in range(1, revisions + 1):
                    session.save(sample_record(run_id, revision), revision - 1)
        with durable_store.acquire("run-a"):  # an owned run is listed too
            summaries = list(durable_store.list_runs())
        assert [s.run_id for s in summaries] == sorted(ids)
        assert {s.run_id: s.revision for s in summaries} == {"run-b": 1, "run-a": 2, "运行-ü": 3}
        assert all(s.ok and s.format == 2 for s in summaries)

    # -- across processes ------------------------------------------------------------------

    def test_busy_across_processes_at_once(
        self, durable_store: Store, durable_spawn: Callable[[], StoreProcess]
    ) -> None:
        # covers: R-STORE-1, B-FILE-2
        child = durable_spawn()
        child.acquire("run-child").expect_ok()
        child.save("run-child", sample_record("run-child", 1), 0).expect_ok()
        elapsed = _timed_busy(lambda: durable_store.acquire("run-child"))
        assert elapsed < BUSY_LIMIT, f"BusyError took {elapsed:.3f} s"

        with durable_store.acquire("run-parent"):
            reply = child.acquire("run-parent")
            assert reply.raised(BusyError), reply
            assert reply.elapsed < BUSY_LIMIT, f"BusyError took {reply.elapsed:.3f} s"
        child.acquire("run-parent").expect_ok()  # released by the parent's close
        child.close("run-parent").expect_ok()

        with durable_store.acquire("run-other") as session:  # other runs are not blocked
            session.save(sample_record("run-other", 1), 0)

    def test_close_releases_ownership_across_processes(
        self, durable_store: Store, durable_spawn: Callable[[], StoreProcess]
    ) -> None:
        # covers: R-STORE-4, R-STORE-1
        child = durable_spawn()
        child.acquire("run-a").expect_ok()
        child.save("run-a", sample_record("run-a", 1), 0).expect_ok()
        child.close("run-a").expect_ok()
        with durable_store.acquire("run-a") as session:
            assert _json(session.load()) == _json(sample_record("run-a", 1))
            session.save(sample_record("run-a", 2), 1)
        child.acquire("run-a").expect_ok()
        assert child.load("run-a").expect_ok().record_json == _json(sample_record("run-a", 2))

    def test_killed_owner_process_releases_ownership(
        self,
        durable_store: Store,
        durable_spawn: Callable[[], StoreProcess],
        durable_store_spec: StoreSpec,
    ) -> None:
        # covers: R-STORE-1, B-FILE-2
        child = durable_spawn()
        child.acquire("run-a").expect_ok()
        child.save("run-a", sample_record("run-a", 1), 0).expect_ok()
        elapsed = _timed_busy(lambda: durable_store.acquire("run-a"))
        assert elapsed < BUSY_LIMIT, f"BusyError took {elapsed:.3f} s"
        child.kill()  # SIGKILL: no close, no cleanup in the child
        session = self._acquire_after_release(durable_store, "run-a", durable_store_spec)
        with session:
            assert _json(session.load()) == _json(sample_record("run-a", 1))
            session.save(sample_record("run-a", 2), 1)

    def test_stale_owner_in_another_process_gets_conflict(
        self,
        durable_store: Store,
        durable_spawn: Callable[[], StoreProcess],
        durable_store_spec: StoreSpec,
    ) -> None:
        # covers: R-STORE-3, R-RT-2
        stuck = durable_spawn()
        stuck.acquire("run-a").expect_ok()
        stuck.save("run-a", sample_record("run-a", 1), 0).expect_ok()
        snapshot = stuck.load("run-a").expect_ok().record
        stuck.kill()  # the stuck owner is gone
        newer = sample_record("run-a", 2, marker="newer")
        with self._acquire_after_release(durable_store, "run-a", durable_store_spec) as session:
            session.save(newer, 1)
        late = durable_spawn()  # the old owner's code comes back with its old snapshot
        late.acquire("run-a").expect_ok()
        reply = late.save("run-a", sample_record("run-a", 2, marker="stale"), snapshot.revision)
        assert reply.raised(ConflictError), reply
        assert late.load("run-a").expect_ok().record_json == _json(newer)
        late.close("run-a").expect_ok()
        with durable_store.acquire("run-a") as session:
            assert _json(session.load()) == _json(newer)

    def test_record_is_byte_identical_in_a_new_process(
        self, durable_store: Store, durable_spawn: Callable[[], StoreProcess]
    ) -> None:
        # covers: R-STORE-2, R-REC-4, B-FILE-5
        record = sample_record("run-ü-🚀", 1)
        with durable_store.acquire("run-ü-🚀") as session:
            session.save(record, 0)
        durable_store.close()
        child = durable_spawn()
        child.acquire("run-ü-🚀").expect_ok()
        assert child.load("run-ü-🚀").expect_ok().record_json == _json(record)
        from_child = sample_record("run-ü-🚀", 2, marker="child")
        child.save("run-ü-🚀", from_child, 1).expect_ok()
        assert child.exit() == 0
        child = durable_spawn()  # a third process reads what the second wrote
        child.acquire("run-ü-🚀").expect_ok()
        assert child.load("run-ü-🚀").expect_ok().record_json == _json(from_child)

    # -- helpers ---------------------------------------------------------------------------

    # -- run history (X-HIST; optional capability RunHistory) --------------------------------

    @pytest.fixture
    def durable_history_store(self, durable_store: Store) -> Any:
        """The store under test when it has the capability RunHistory; skips otherwise."""
        from durable_core.maintenance import RunHistory

        if not isinstance(durable_store, RunHistory):
            pytest.skip("the store does not keep runs' histories (optional capability)")
        return durable_store

    @pytest.fixture
    def durable_other_store_factory(self) -> Callable[[], Store] | None:
        """A factory of a store over *other* storage (another directory, database …), for the
        history's isolation between two stores holding one run id; None skips that clause."""
        return None

    def test_history_is_read_back_in_the_order_appended(self, durable_history_store: Any) -> None:
        # covers: X-HIST
        store = durable_history_store
        assert store.read_history("h", "scope-1") == []
        store.append_history("h", "scope-1", ['{"n": 1}', '{"n": 2}'])
        store.append_history("h", "scope-1", [])
        store.append_history("h", "scope-1", ['{"n": 3, "text": "é \\u0000 ✓"}'])
        assert store.read_history("h", "scope-1") == [
            '{"n": 1}',
            '{"n": 2}',
            '{"n": 3, "text": "é \\u0000 ✓"}',
        ]
        many = [f'{{"n": {i}}}' for i in range(500)]
        store.append_history("h-many", "scope-1", many)
        assert store.read_history("h-many", "scope-1") == many

    def test_history_refuses_an_entry_that_is_not_one_line(
        self, durable_history_store: Any
    ) -> None:
        # covers: X-HIST
        store = durable_history_store
        with pytest.raises(ValueError):
            store.append_history("h", "scope-1", ['{"a": 1}', "two\nlines"])
        with pytest.raises(ValueError):
            store.append_history("h", "", ['{"a": 1}'])
        assert store.read_history("h", "scope-1") == []

    def test_history_is_kept_per_run_and_per_root_scope(self, durable_history_store: Any) -> None:
        # covers: X-HIST
        store = durable_history_store
        store.append_history("a", "scope-1", ['{"run": "a1"}'])
        store.append_history("b", "scope-1", ['{"run": "b1"}'])
        store.append_history("a", "scope-2", ['{"run": "a2"}'])
        assert store.read_history("a", "scope-1") == ['{"run": "a1"}']
        assert store.read_history("b", "scope-1") == ['{"run": "b1"}']
        assert store.read_history("a", "scope-2") == ['{"run": "a2"}']
        assert store.read_history("c", "scope-1") == []

    def test_history_is_kept_per_store(
        self,
        durable_history_store: Any,
        durable_other_store_factory: Callable[[], Store] | None,
    ) -> None:
        # covers: X-HIST
        if durable_other_store_factory is None:
            pytest.skip("the backend gives no store over other storage")
        other: Any = durable_other_store_factory()
        try:
            for store, name in ((durable_history_store, "first"), (other, "second")):
                with store.acquire("same") as session:
                    session.save(sample_record("same", 1), 0)
                store.append_history("same", "scope-1", [f'{{"store": "{name}"}}'])
            assert durable_history_store.read_history("same", "scope-1") == ['{"store": "first"}']
            assert other.read_history("same", "scope-1") == ['{"store": "second"}']
        finally:
            other.close()

    def test_history_is_seen_by_another_store_object_on_the_same_storage(
        self, durable_history_store: Any, durable_store_spec: StoreSpec
    ) -> None:
        # covers: X-HIST
        if not durable_store_spec.cross_process:
            pytest.skip("in-process store: another store object has storage of its own")
        durable_history_store.append_history("shared", "scope-1", ['{"n": 1}'])
        other: Any = durable_store_spec.factory()
        try:
            assert other.read_history("shared", "scope-1") == ['{"n": 1}']
            other.append_history("shared", "scope-1", ['{"n": 2}'])
        finally:
            other.close()
        assert durable_history_store.read_history("shared", "scope-1") == ['{"n": 1}', '{"n": 2}']

    def test_a_deleted_runs_history_goes_with_it(self, durable_history_store: Any) -> None:
        # covers: X-HIST
        from durable_core.maintenance import RunDeleter

        store = durable_history_store
        with store.acquire("gone") as session:
            if not isinstance(session, RunDeleter):
                pytest.skip("the store's sessions cannot delete runs")
            session.save(sample_record("gone", 1), 0)
        store.append_history("gone", "scope-1", ['{"n": 1}'])
        store.append_history("kept", "scope-1", ['{"n": 1}'])
        session = store.acquire("gone")
        session.delete()
        assert store.read_history("gone", "scope-1") == []
        assert store.read_history("kept", "scope-1") == ['{"n": 1}']
        with store.acquire("gone") as session:  # the same id started again
            session.save(sample_record("gone", 1), 0)
        store.append_history("gone", "scope-2", ['{"n": "new"}'])
        assert store.read_history("gone", "scope-1") == []
        assert store.read_history("gone", "scope-2") == ['{"n": "new"}']

    def test_history_never_changes_the_record(
        self, durable_history_store: Any, durable_raw_records: RawRecords
    ) -> None:
        # covers: X-HIST
        store = durable_history_store
        records = _chain("rec", 3)
        with store.acquire("rec") as session:
            session.save(records[0], 0)
            session.save(records[1], 1)
            before = durable_raw_records.read("rec")
            # appended while the run is owned, as the history writer does
            store.append_history("rec", "scope-1", ['{"event": "while owned"}'] * 50)
            assert durable_raw_records.read("rec") == before  # the stored bytes
            assert session.load() == records[1]
            session.save(records[2], 2)  # the revision the session knows is still the stored one
        with store.acquire("rec") as session:
            assert session.load() == records[2]
        store.append_history("rec", "scope-1", ['{"event": "at rest"}'])
        with store.acquire("rec") as session:
            assert session.load() == records[2]

    def test_concurrent_appenders_in_two_processes_never_tear_an_entry(
        self, durable_history_store: Any, durable_store_spec: StoreSpec
    ) -> None:
        # covers: X-HIST
        if not durable_store_spec.cross_process:
            pytest.skip(
                "in-process store, cross-process clauses do not apply: "
                f"{durable_store_spec.reason or 'declared cross_process=False'}"
            )
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        start = context.Event()
        children = [
            context.Process(
                target=_append_history_child, args=(durable_store_spec.factory, name, start)
            )
            for name in ("p", "q")
        ]
        for child in children:
            child.start()
        start.set()
        for child in children:
            child.join(120)
            assert child.exitcode == 0, f"history appender {child.name} exited {child.exitcode}"
        entries = durable_history_store.read_history("shared", "scope-1")
        assert len(entries) == 2 * _APPENDS * _PER_APPEND
        seen: dict[str, list[int]] = {"p": [], "q": []}
        for entry in entries:
            name, number, padding = entry.split(":")
            assert padding == "x" * _PADDING, "an entry was torn or interleaved"
            seen[name].append(int(number))
        for numbers in seen.values():  # each appender's entries, whole and in its order
            assert numbers == list(range(_APPENDS * _PER_APPEND))

    @staticmethod
    def _acquire_after_release(store: Store, run_id: str, spec: StoreSpec) -> Session:
        """Acquire ``run_id`` once the store noticed its killed owner is gone.

        Each attempt must be a BusyError at once; the whole wait is bounded by
        ``spec.release_timeout``.
        """
        deadline = time.monotonic() + spec.release_timeout
        while True:
            started = time.monotonic()
            try:
                return store.acquire(run_id)
            except BusyError:
                elapsed = time.monotonic() - started
                assert elapsed < BUSY_LIMIT, f"BusyError took {elapsed:.3f} s"
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"run {run_id!r} was still owned {spec.release_timeout} s after its "
                        "owner process was killed"
                    ) from None
                time.sleep(0.05)
