"""SHA-256 digests: the same answer whichever implementation serves an input's size (R-VAL-1)."""

from __future__ import annotations

import hashlib

import pytest

from durable_core._digest import SHORT_INPUT, sha256_hex
from durable_core.codecs.values import digest_of


# covers: R-VAL-1
@pytest.mark.parametrize(
    "size", [0, 1, 55, 56, 63, 64, 65, SHORT_INPUT - 1, SHORT_INPUT, SHORT_INPUT + 1, 100_000]
)
def test_every_size_gets_the_sha256_of_its_bytes(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    assert len(data) == size
    expected = hashlib.sha256(data).hexdigest()
    assert sha256_hex(data) == expected
    assert digest_of(data) == expected
