"""Which caller deltas a store keeps (``BaseSession._delta_of``), and the complete bytes a
store that keeps deltas may write when it folds them on close (``BaseSession._saved_bytes``)."""

from __future__ import annotations

import pytest

from durable_core import EncodedRecord, MemoryStore, record_to_json
from durable_core.records.delta import encode_delta
from durable_core.store.kit import BaseSession
from durable_core.testing import sample_record


def _of(delta: bytes | None, expected: int) -> bytes | None:
    return BaseSession._delta_of(EncodedRecord(b"{}", delta), expected)


def test_a_canonical_delta_from_the_expected_revision_is_kept() -> None:
    # covers: R-STORE-3
    delta = encode_delta(7, 8, [(("Revision",), 8)], [("Attempts", "a")])
    assert _of(delta, 7) is delta


@pytest.mark.parametrize("expected", [0, 6, 8, 70, 17])
def test_a_delta_from_another_revision_is_not_used(expected: int) -> None:
    # covers: R-STORE-3
    assert _of(encode_delta(7, 8, [(("Revision",), 8)]), expected) is None


def test_a_delta_that_is_not_canonical_is_read_to_decide() -> None:
    # covers: R-STORE-3
    spaced = b'{"Base": 7, "Revision": 8, "Set": [[["Revision"], 8]], "Unset": []}'
    assert _of(spaced, 7) == spaced
    assert _of(spaced, 6) is None
    assert _of(b'{"Revision":8,"Base":7}', 7) is None  # not a delta at all
    assert _of(b"not json", 7) is None
    assert _of(None, 7) is None


def test_a_session_knows_the_complete_bytes_of_its_last_save_until_it_loads() -> None:
    # covers: R-STORE-3
    first, second = sample_record("run", 1), sample_record("run", 2, marker="-2-")
    asked: list[int] = []

    def lazy() -> bytes:
        asked.append(2)
        return record_to_json(second)

    with MemoryStore() as store, store.acquire("run") as session:
        assert session._saved_bytes(1) is None  # nothing saved yet
        session.save(first, 0)
        assert session._saved_bytes(1) == record_to_json(first)
        session.save(second, 1, EncodedRecord(lazy))
        assert session._saved_bytes(1) is None  # not the last save's revision
        assert session._saved_bytes(2) == record_to_json(second)
        assert asked == [2]  # made once (this store wrote them), then kept
        session.load()
        assert session._saved_bytes(2) is None  # loaded since: what is stored decides
