"""SQLiteStore runs the whole conformance kit, unchanged, in-process and across processes."""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

import pytest

from durable_core.testing import StoreConformance
from durable_sqlitestore import SQLiteStore


class SQLiteRawRecords:
    """The ``durable_runs`` rows read and written with a plain connection, as the sqlite3 shell
    would."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self._path, isolation_level=None, timeout=5)

    def read(self, run_id: str) -> bytes | None:
        connection = self._connect()
        try:
            row = connection.execute(
                "SELECT record FROM durable_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        finally:
            connection.close()
        return None if row is None else row[0]

    def write(self, run_id: str, data: bytes, revision: int) -> None:
        connection = self._connect()
        try:
            connection.execute(
                "INSERT INTO durable_runs (run_id, revision, record) VALUES (?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET revision = excluded.revision, "
                "record = excluded.record",
                (run_id, str(revision), data),
            )
        finally:
            connection.close()


class TestSQLiteStoreConformance(StoreConformance):
    @pytest.fixture
    def durable_store_factory(self, tmp_path: Path) -> functools.partial[SQLiteStore]:
        return functools.partial(SQLiteStore, str(tmp_path / "db" / "durable.sqlite"))

    @pytest.fixture
    def durable_raw_records(self, tmp_path: Path) -> SQLiteRawRecords:
        return SQLiteRawRecords(tmp_path / "db" / "durable.sqlite")

    @pytest.fixture
    def durable_other_store_factory(self, tmp_path: Path) -> functools.partial[SQLiteStore]:
        return functools.partial(SQLiteStore, str(tmp_path / "other" / "durable.sqlite"))
