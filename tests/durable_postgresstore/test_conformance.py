"""The Store conformance kit, unchanged, against PostgresStore (R-STORE-1…5, B-PG-1…3)."""

from __future__ import annotations

import functools

import psycopg
import pytest

from durable_core.testing import StoreConformance, StoreSpec
from durable_postgresstore import PostgresStore

pytestmark = pytest.mark.postgres


class PostgresRawRecords:
    """The ``pulse_durable.runs`` rows read and written with a plain connection, as psql would."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn

    def read(self, run_id: str) -> bytes | None:
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT record FROM pulse_durable.runs WHERE run_id = %s", [run_id.encode()]
            ).fetchone()
        return None if row is None else bytes(row[0])

    def write(self, run_id: str, data: bytes, revision: int) -> None:
        key = run_id.encode()
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO pulse_durable.runs (run_id, revision, format, record, run_key) "
                "VALUES (%s, %s::numeric, 2, %s, sha256(%s)) ON CONFLICT (run_key) DO UPDATE "
                "SET revision = excluded.revision, record = excluded.record",
                [key, revision, data, key],
            )


class TestPostgresStoreConformance(StoreConformance):
    @pytest.fixture
    def durable_store_factory(self, postgres_dsn: str) -> StoreSpec:
        # Every test starts without the pulse_durable schema (tests/conftest.py drops it), so
        # each gets a fresh, empty storage; every store made here shares it.
        return StoreSpec(functools.partial(PostgresStore, postgres_dsn), release_timeout=60.0)

    @pytest.fixture
    def durable_raw_records(self, postgres_dsn: str) -> PostgresRawRecords:
        return PostgresRawRecords(postgres_dsn)

    @pytest.fixture
    def durable_other_store_factory(self, postgres_dsn: str) -> functools.partial[PostgresStore]:
        # Other storage: a second database on the same server, without Durable's schema.
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(postgres_dsn)
        name = f"{params.get('dbname') or 'postgres'}_other"
        try:
            with psycopg.connect(postgres_dsn, autocommit=True) as conn:
                found = conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", [name]
                ).fetchone()
                if found is None:
                    conn.execute(f'CREATE DATABASE "{name}"')
            other = make_conninfo(postgres_dsn, dbname=name)
            with psycopg.connect(other, autocommit=True) as conn:
                conn.execute("DROP SCHEMA IF EXISTS pulse_durable CASCADE")
        except psycopg.Error as exc:
            pytest.skip(f"no second database for the history's isolation clause: {exc}")
        return functools.partial(PostgresStore, other)
