"""docs/storage.md §8: the smallest store built on the kit passes the whole conformance kit."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from durable_core.testing import StoreConformance, StoreSpec

DOC = Path(__file__).resolve().parents[3] / "docs" / "storage.md"


def _doc_store() -> Any:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
    (block,) = [b for b in blocks if "class DictStore" in b]
    namespace: dict[str, Any] = {}
    exec(block, namespace)
    return namespace["DictStore"]


class DictRawRecords:
    def __init__(self, store: Any) -> None:
        self._store = store

    def read(self, run_id: str) -> bytes | None:
        row = self._store.rows.get(run_id)
        return None if row is None else row[1]

    def write(self, run_id: str, data: bytes, revision: int) -> None:
        self._store.rows[run_id] = (revision, data)


class TestDocumentedKitStore(StoreConformance):
    @pytest.fixture
    def doc_store(self) -> Any:
        return _doc_store()()

    @pytest.fixture
    def durable_store_factory(self, doc_store: Any) -> StoreSpec:
        return StoreSpec(
            factory=lambda: doc_store, cross_process=False, reason="the example keeps a dict"
        )

    @pytest.fixture
    def durable_raw_records(self, doc_store: Any) -> DictRawRecords:
        return DictRawRecords(doc_store)
