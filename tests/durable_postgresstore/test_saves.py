"""How PostgresStore's saves reach the server: prepared statements and the records' compression
(B-PG-3)."""

from __future__ import annotations

import pytest

from durable_core import NotFoundError, record_to_json
from durable_core.testing import sample_record

pytestmark = pytest.mark.postgres


def _server_has_lz4(admin) -> bool:
    (values,) = admin.execute(
        "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"
    ).fetchone()
    return "lz4" in values


def _big(run_id: str, revision: int):
    # Far above the ~2 kB past which the server compresses a value it stores.
    return sample_record(run_id, revision, marker="-".join(str(n) for n in range(20_000)))


# covers: B-PG-3
def test_a_save_after_a_rollback_on_its_connection_still_writes(make_store, admin):
    # One connection for everything: the session's saves prepare their statements on it, and
    # the failed post below rolls back on it, after which psycopg deallocates every prepared
    # statement of that server session.
    store = make_store(max_connections=1)
    with store.acquire("p") as session:
        session.save(sample_record("p", 1), 0)
        session.save(sample_record("p", 2), 1)
    with pytest.raises(NotFoundError):
        store.post_message("missing", "box", b"x")
    with store.acquire("p") as session:
        session.load()
        session.save(sample_record("p", 3), 2)
        assert session.load() == sample_record("p", 3)
    (head,) = admin.execute("SELECT revision FROM pulse_durable.runs").fetchone()
    assert int(head) == 3


# covers: B-PG-3
def test_a_large_record_is_compressed_with_lz4_when_the_server_has_it(store, admin):
    if not _server_has_lz4(admin):
        pytest.skip("this PostgreSQL server was built without lz4")
    with store.acquire("z") as session:
        session.save(_big("z", 1), 0)
    (method, data) = admin.execute(
        "SELECT pg_column_compression(record), record FROM pulse_durable.runs"
    ).fetchone()
    assert method == "lz4"
    assert bytes(data) == record_to_json(_big("z", 1))
    # The server's default for everyone else is left as it was.
    assert admin.execute("SHOW default_toast_compression").fetchone() == ("pglz",)


# covers: B-PG-3
def test_a_compression_chosen_in_the_dsn_is_kept(make_store, postgres_dsn, admin):
    if not _server_has_lz4(admin):
        pytest.skip("this PostgreSQL server was built without lz4")
    store = make_store(f"{postgres_dsn} options='-c default_toast_compression=pglz'")
    with store.acquire("k") as session:
        session.save(_big("k", 1), 0)
    (method,) = admin.execute(
        "SELECT pg_column_compression(record) FROM pulse_durable.runs"
    ).fetchone()
    assert method == "pglz"
