"""What a save writes and a load returns: copies, the caller's encoding, deltas, UTF-8 (SPEC
R-STORE-2, R-STORE-3, R-REC-4, B-FILE-5)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from durable_core.errors import (
    ConflictError,
    CorruptRecordError,
    NotFoundError,
)
from durable_core.records import ScopeRecord
from durable_core.records.jsonio import record_to_json
from durable_core.store import Capability, EncodedRecord, Store, capabilities
from durable_core.testing.conformance.base import (
    RawRecords,
    _chain,
    _encoded,
    _json,
)
from durable_core.testing.records import record_delta, sample_record

__all__ = ["EncodingClauses"]


class EncodingClauses:
    """Records come back byte for byte, whole, isolated, from complete bytes or deltas."""

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
        if Capability.LIST_RUNS in capabilities(durable_store):
            assert [s.run_id for s in durable_store.list_runs()] == [run_id]

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
