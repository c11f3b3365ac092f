"""Which caller deltas a store keeps: ``BaseSession._delta_of``."""

from __future__ import annotations

import pytest

from durable_core import EncodedRecord
from durable_core.recorddelta import encode_delta
from durable_core.store.kit import BaseSession


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
