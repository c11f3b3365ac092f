"""What every clause group of the conformance kit shares: the spec, the fixtures, the helpers.

A backend's test class gives ``durable_store_factory`` and ``durable_raw_records``; the fixtures
here build the rest (:class:`KitFixtures`). The helpers make the records and encodings the
clauses save, and wait for a killed owner's run to be free again.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

import attrs
import pytest

from durable_core.errors import BusyError
from durable_core.records import RunRecord
from durable_core.records.jsonio import record_to_json
from durable_core.store import EncodedRecord, Session, Store
from durable_core.store.capabilities import Capability, capabilities
from durable_core.testing.process import StoreProcess
from durable_core.testing.records import record_delta, sample_record

__all__ = [
    "BUSY_LIMIT",
    "KitFixtures",
    "RawRecords",
    "StoreSpec",
    "acquire_after_release",
    "needs",
]

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


def _timed_busy(acquire: Callable[[], Any]) -> float:
    """Call ``acquire``, require BusyError, return the seconds it took."""
    started = time.monotonic()
    with pytest.raises(BusyError):
        session = acquire()
        session.close()  # not reached when the store is correct
    return time.monotonic() - started


def needs(store: Any, capability: Capability, session: Any = None) -> None:
    """Skip the clause unless ``store`` (or ``session``) declares ``capability``."""
    found = capabilities(store)
    if session is not None:
        found = found | capabilities(session)
    if capability not in found:
        pytest.skip(f"the store does not declare Capability.{capability.name} (optional)")


def acquire_after_release(store: Store, run_id: str, spec: StoreSpec) -> Session:
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


class KitFixtures:
    """The fixtures every clause group uses; :class:`StoreConformance` inherits them."""

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
