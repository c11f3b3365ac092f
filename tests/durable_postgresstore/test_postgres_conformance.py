"""The Store conformance kit, unchanged, against PostgresStore (R-STORE-1…5, B-PG-1…3)."""

from __future__ import annotations

import functools

import pytest

from durable_core.testing import StoreConformance, StoreSpec
from durable_postgresstore import PostgresStore

pytestmark = pytest.mark.postgres


class TestPostgresStoreConformance(StoreConformance):
    @pytest.fixture
    def durable_store_factory(self, postgres_dsn: str) -> StoreSpec:
        # Every test starts without the pulse_durable schema (tests/conftest.py drops it), so
        # each gets a fresh, empty storage; every store made here shares it.
        return StoreSpec(functools.partial(PostgresStore, postgres_dsn), release_timeout=10.0)
