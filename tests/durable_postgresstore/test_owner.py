"""BusyError names the run's owner from pg_stat_activity: the client's pid, host and since when
(E-1, B-PG-1). A real second process owns the run on the real test server."""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from durable_core import BusyError
from durable_core.store import owner_from_tag
from durable_postgresstore import advisory_key

pytestmark = pytest.mark.postgres

HOLDER = """
import sys
from durable_postgresstore import PostgresStore

store = PostgresStore({dsn!r}{options})
session = store.acquire({run_id!r})
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
session.close()
store.close()
"""


def _hold(dsn: str, run_id: str, options: str = "") -> subprocess.Popen:
    code = HOLDER.format(dsn=dsn, run_id=run_id, options=options)
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    return child


def _release(child: subprocess.Popen) -> None:
    assert child.stdin is not None
    child.stdin.close()
    assert child.wait(timeout=30) == 0


# covers: E-1, B-PG-1, R-STORE-1
# "c" has a negative advisory key, "order-17" a positive one: both are found in pg_locks.
@pytest.mark.parametrize("run_id", ["order-17", "c"])
def test_busy_error_names_the_owning_client_process(run_id, postgres_dsn, make_store):
    assert (advisory_key("c") < 0) and (advisory_key("order-17") > 0)
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    child = _hold(postgres_dsn, run_id)
    try:
        with pytest.raises(BusyError) as caught:
            make_store().acquire(run_id)
    finally:
        _release(child)
    owner = caught.value.owner
    assert owner is not None
    assert owner.pid == child.pid != os.getpid()
    assert owner.host == socket.gethostname()
    assert owner.since is not None
    assert before - datetime.timedelta(seconds=1) <= owner.since
    assert owner.since <= datetime.datetime.now(datetime.UTC)
    assert owner.detail is not None and "PostgreSQL backend pid" in owner.detail
    message = str(caught.value)
    assert f"pid {child.pid} on host {socket.gethostname()!r} since " in message
    # Released: the run is free, and the owner's connection got its own name back.
    with make_store().acquire(run_id):
        pass


# covers: E-1, B-PG-1
def test_the_owner_connection_carries_the_tag_only_while_it_holds_the_run(make_store, admin):
    store = make_store(application_name="billing")

    def names() -> list[str]:
        rows = admin.execute(
            "SELECT application_name FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
            "AND datname = current_database()"
        ).fetchall()
        return [row[0] for row in rows]

    with store.acquire("tagged"):
        tagged = [name for name in names() if owner_from_tag(name) is not None]
        assert len(tagged) == 1
        assert tagged[0].startswith("billing ")
        owner = owner_from_tag(tagged[0])
        assert owner is not None and owner.pid == os.getpid()
    assert all(owner_from_tag(name) is None for name in names())
    assert "billing" in names()  # the pooled connection is back to its own name


# covers: E-1, B-PG-1
def test_an_owner_without_a_tag_is_named_by_its_backend(postgres_dsn, make_store, admin):
    # An owner that did not name itself (another program, an older Durable): the server's
    # backend pid is what can be said.
    other = admin.execute("SELECT pg_try_advisory_lock(%s::bigint)", [advisory_key("raw")])
    assert other.fetchone()[0]
    try:
        with pytest.raises(BusyError) as caught:
            make_store().acquire("raw")
    finally:
        admin.execute("SELECT pg_advisory_unlock(%s::bigint)", [advisory_key("raw")])
    owner = caught.value.owner
    assert owner is not None and owner.pid is None and owner.host is None
    backend = admin.execute("SELECT pg_backend_pid()").fetchone()[0]
    assert f"PostgreSQL backend pid {backend}" in (owner.detail or "")
    assert f"PostgreSQL backend pid {backend}" in str(caught.value)
