"""SQLiteStore runs the whole conformance kit, unchanged, in-process and across processes."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from durable_core.testing import StoreConformance
from durable_sqlitestore import SQLiteStore


class TestSQLiteStoreConformance(StoreConformance):
    @pytest.fixture
    def durable_store_factory(self, tmp_path: Path) -> functools.partial[SQLiteStore]:
        return functools.partial(SQLiteStore, str(tmp_path / "db" / "durable.sqlite"))
