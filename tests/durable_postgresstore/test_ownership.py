"""Ownership by advisory lock, bounded waiting, closing, failing closed (B-PG-1, B-PG-2)."""

from __future__ import annotations

import threading
import time

import pytest

import durable_postgresstore.store as store_module
from durable_core import (
    AcquireTimeoutError,
    BusyError,
    ConflictError,
    RunRecord,
    SessionClosedError,
)
from durable_core.store import Acquiring
from durable_postgresstore import PostgresStoreError

pytestmark = pytest.mark.postgres


def record(run_id: str, revision: int, version: str = "v1") -> RunRecord:
    return RunRecord(run_id=run_id, revision=revision, version=version)


# What a wrong implementation would wait (the timeout it should not have used, seconds) and the
# bound that tells it apart from the right one: ten times shorter, and far longer than any
# machine needs for the waits these tests expect (a few tenths of a second). Lower bounds are
# exact: a timeout never fires early, however fast the machine.
WRONG_WAIT = 600.0
BOUND = WRONG_WAIT / 10
# How long to wait at most for the server to act on something (a backend ending, a lock going).
SETTLE = 60.0


def waiting_for_a_lock(admin) -> bool:
    """Some backend of the test database waits for a row lock."""
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchone()
    return row[0] > 0


def eventually(predicate, what: str) -> None:
    """Poll ``predicate`` until it holds; fail after SETTLE seconds."""
    deadline = time.monotonic() + SETTLE
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def timed(fn, *args, **kwargs):
    start = time.monotonic()
    try:
        return fn(*args, **kwargs), time.monotonic() - start
    except Exception as exc:
        return exc, time.monotonic() - start


# covers: B-PG-1, R-STORE-1
def test_two_stores_on_one_run_the_second_is_busy_at_once(make_store, owner_pid):
    host_a, host_b = make_store(), make_store(acquire_timeout=WRONG_WAIT)
    with host_a.acquire("shared") as owner:
        error, elapsed = timed(host_b.acquire, "shared")
        assert isinstance(error, BusyError), error
        assert "advisory lock" in str(error)
        # right after the network check, never waiting for the owner (until acquire_timeout)
        assert elapsed < BOUND
        # The lock is held by the owner's connection, as pg_locks shows.
        assert owner_pid("shared") is not None
        owner.save(record("shared", 1), 0)
    # Released on close: the other store takes it at once.
    assert owner_pid("shared") is None
    with host_b.acquire("shared") as session:
        assert session.load().revision == 1


# covers: B-PG-1, R-STORE-1
def test_a_run_held_in_the_same_store_is_busy_without_touching_the_network(make_store):
    # The only connection is held by the session: any network step would have to wait for
    # capacity and end in AcquireTimeoutError. BusyError proves no network was needed.
    store = make_store(max_connections=1)
    with store.acquire("mine"):
        error, _ = timed(store.acquire, "mine")
        assert isinstance(error, BusyError) and "owned" in str(error)


# covers: B-PG-1, B-PG-2
def test_a_run_being_acquired_in_the_same_store_is_busy_at_once(make_store):
    store = make_store(max_connections=1)
    blocker = store.acquire("blocker")
    results: dict[str, object] = {}

    def pending() -> None:
        results["pending"] = timed(store.acquire, "wanted", timeout=10)

    thread = threading.Thread(target=pending)
    thread.start()
    # the thread now waits for the only connection, its place in the store taken
    eventually(lambda: isinstance(store._runs.get("wanted"), Acquiring), "the acquire never began")
    # BusyError, not AcquireTimeoutError: decided before waiting for the connection
    error, _ = timed(store.acquire, "wanted", timeout=WRONG_WAIT)
    assert isinstance(error, BusyError) and "being acquired" in str(error)
    blocker.close()
    thread.join(SETTLE)
    session, _ = results["pending"]
    assert session.run_id == "wanted"
    session.close()


# covers: B-PG-2
def test_no_free_connection_is_a_timeout_never_a_false_busy(make_store):
    holder = make_store()
    full = make_store(max_connections=1, acquire_timeout=WRONG_WAIT)
    with holder.acquire("held-elsewhere"), full.acquire("occupies-the-only-connection"):
        # A free run: capacity runs out before anything is known.
        error, elapsed = timed(full.acquire, "free-run", timeout=0.3)
        assert isinstance(error, AcquireTimeoutError), error
        assert isinstance(error, TimeoutError)
        assert "not decided" in str(error)
        assert 0.25 <= elapsed < BOUND  # the caller's timeout, not the store's
        # A run really held elsewhere: still a timeout, because ownership could not be checked.
        error, _ = timed(full.acquire, "held-elsewhere", timeout=0.3)
        assert isinstance(error, AcquireTimeoutError), error
        assert not isinstance(error, BusyError)


# covers: B-PG-2
def test_the_shorter_of_caller_timeout_and_acquire_timeout_wins(make_store):
    short = make_store(max_connections=1, acquire_timeout=0.4)
    with short.acquire("only"):
        error, elapsed = timed(short.acquire, "other", timeout=WRONG_WAIT)
        assert isinstance(error, AcquireTimeoutError)
        assert 0.35 <= elapsed < BOUND
    long = make_store(max_connections=1, acquire_timeout=WRONG_WAIT)
    with long.acquire("only"):
        error, elapsed = timed(long.acquire, "other", timeout=0.1)
        assert isinstance(error, AcquireTimeoutError)
        assert elapsed < BOUND
        error, elapsed = timed(long.acquire, "other", timeout=0)
        assert isinstance(error, AcquireTimeoutError)
        assert elapsed < BOUND  # 0 is no waiting, not the store's limit


# covers: B-PG-2
def test_a_silent_network_makes_acquire_time_out_at_the_callers_deadline(make_store, proxy):
    frozen, dsn = proxy
    # libpq's connect_timeout follows acquire_timeout
    store = make_store(dsn, acquire_timeout=WRONG_WAIT)
    busy = store.acquire("keeps-the-idle-one-busy")
    frozen.freeze()
    # A new connection must be opened; the server never answers. libpq alone would wait for
    # its connect_timeout; the caller's 0.3 s wins.
    error, elapsed = timed(store.acquire, "new", timeout=0.3)
    assert isinstance(error, AcquireTimeoutError), error
    assert elapsed < BOUND
    frozen.thaw()
    busy.close()


# covers: B-PG-2
def test_a_silent_network_during_the_lock_check_is_a_timeout_and_the_connection_is_dropped(
    make_store, proxy, owner_pid
):
    frozen, dsn = proxy
    store = make_store(dsn, acquire_timeout=WRONG_WAIT)
    store.acquire("warm-up").close()  # leaves one idle connection for the next acquire
    frozen.freeze()
    error, elapsed = timed(store.acquire, "checked", timeout=0.5)
    assert isinstance(error, AcquireTimeoutError), error
    assert 0.45 <= elapsed < BOUND
    frozen.thaw()
    # The cut connection was destroyed: whatever the server did, the lock is not kept.
    eventually(lambda: owner_pid("checked") is None, "the cut connection kept the lock")
    with store.acquire("checked"):
        pass


# covers: B-PG-1, R-STORE-2
def test_a_terminated_owner_fails_closed_and_the_run_can_be_acquired_again(
    make_store, admin, owner_pid
):
    store, other = make_store(), make_store()
    owner = store.acquire("victim")
    owner.save(record("victim", 1), 0)
    pid = owner_pid("victim")
    assert pid is not None
    admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    # The server released the lock with the connection: another host takes the run.
    deadline = time.monotonic() + SETTLE
    while True:
        try:
            newcomer = other.acquire("victim")
            break
        except BusyError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    newcomer.save(record("victim", 2, "newcomer"), 1)
    # The old owner's next save fails: it never reconnects and writes without the lock.
    with pytest.raises(PostgresStoreError) as caught:
        owner.save(record("victim", 2, "stale owner"), 1)
    assert caught.value.connection_lost
    # The server's farewell is already on the socket: the session sees it before sending, so
    # the save is known unwritten.
    assert not caught.value.uncertain
    assert "was not attempted" in str(caught.value)
    with pytest.raises(PostgresStoreError, match="never reconnects") as again:
        owner.load()
    assert again.value.connection_lost
    assert not again.value.uncertain  # refused before anything was sent
    assert newcomer.load().version == "newcomer"
    newcomer.close()
    owner.close()  # idempotent after the loss
    # The store that lost the session can acquire the run again too.
    with store.acquire("victim") as session:
        assert session.load().revision == 2


def durable_backends(admin) -> int:
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND application_name = 'durable'"
    ).fetchone()
    return row[0]


# covers: B-PG-1
def test_a_stale_idle_connection_is_replaced_not_reported(make_store, admin):
    store = make_store()
    store.acquire("first").close()  # its connection stays idle in the store
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND application_name = 'durable'"
    )
    eventually(lambda: not durable_backends(admin), "the terminated backends stayed")
    with store.acquire("second") as session:
        session.save(record("second", 1), 0)
    # The same for listing: the idle connection left by "second" is dead too.
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND application_name = 'durable'"
    )
    eventually(lambda: not durable_backends(admin), "the terminated backends stayed")
    assert [s.run_id for s in store.list_runs()] == ["second"]


# covers: B-PG-2, R-STORE-2, R-RT-2
def test_an_operation_past_operation_timeout_cuts_the_connection_and_loses_the_run(
    make_store, postgres_dsn
):
    import psycopg

    store, other = make_store(operation_timeout=0.5), make_store()
    session = store.acquire("slow")
    session.save(record("slow", 1), 0)
    with psycopg.connect(postgres_dsn) as blocker:
        # Another transaction locks the row: the session's UPDATE waits, like on a dead network.
        blocker.execute("SELECT 1 FROM pulse_durable.runs FOR UPDATE").fetchall()
        error, elapsed = timed(session.save, record("slow", 2), 1)
        assert isinstance(error, PostgresStoreError), error
        assert error.connection_lost
        assert error.uncertain
        assert "operation_timeout" in str(error)
        assert "may or may not have been written" in str(error)
        assert 0.45 <= elapsed < BOUND  # without operation_timeout: until the blocker ends
        # The server backend of the cut connection still waits with the run's lock: until it
        # ends, nobody else can own the run, so its late write cannot mix with a new owner's.
        with pytest.raises(BusyError):
            other.acquire("slow")
        blocker.rollback()
    with pytest.raises(PostgresStoreError, match="never reconnects"):
        session.load()
    deadline = time.monotonic() + SETTLE
    while True:
        try:
            again = store.acquire("slow")
            break
        except BusyError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    with again:
        # The uncertain save either happened whole or not at all (R-RT-2).
        assert again.load() in (record("slow", 1), record("slow", 2))


# covers: B-PG-2
def test_close_cancels_pending_acquires_and_closes_open_sessions(make_store, owner_pid):
    store = make_store(max_connections=1)
    other = make_store()
    open_session = store.acquire("open")
    open_session.save(record("open", 1), 0)
    results: dict[str, object] = {}
    thread = threading.Thread(
        target=lambda: results.setdefault(
            "pending", timed(store.acquire, "pending", timeout=WRONG_WAIT)
        )
    )
    thread.start()
    # the thread waits for the only connection, its place in the store taken
    eventually(lambda: isinstance(store._runs.get("pending"), Acquiring), "no pending acquire")
    _, elapsed = timed(store.close)
    thread.join(SETTLE)
    assert elapsed < BOUND
    error, waited = results["pending"]
    assert isinstance(error, SessionClosedError), error
    assert waited < BOUND  # not until its timeout
    with pytest.raises(SessionClosedError):
        open_session.load()
    # The lock was released before close returned: another store takes the run at once.
    assert owner_pid("open") is None
    with other.acquire("open") as session:
        assert session.load().revision == 1


# covers: B-PG-2
def test_close_does_not_wait_more_than_its_budget_for_a_stuck_save(
    make_store, postgres_dsn, admin, monkeypatch
):
    import psycopg

    monkeypatch.setattr(store_module, "CLOSE_TIMEOUT", 0.5)
    store = make_store(operation_timeout=None)
    session = store.acquire("stuck")
    session.save(record("stuck", 1), 0)
    results: dict[str, object] = {}
    with psycopg.connect(postgres_dsn) as blocker:
        blocker.execute("SELECT 1 FROM pulse_durable.runs FOR UPDATE").fetchall()
        thread = threading.Thread(
            target=lambda: results.setdefault("save", timed(session.save, record("stuck", 2), 1))
        )
        thread.start()
        # the save is stuck behind the blocker's row lock
        eventually(lambda: waiting_for_a_lock(admin), "the save never reached the row lock")
        _, elapsed = timed(store.close)
        thread.join(SETTLE)
        assert elapsed < BOUND  # its budget, not until the blocker ends
        error, _ = results["save"]
        assert isinstance(error, PostgresStoreError) and error.connection_lost
        blocker.rollback()


# covers: R-STORE-3, B-PG-1
def test_an_old_session_of_a_reacquired_run_cannot_overwrite(make_store):
    # Within one store the same run is never owned twice; across stores the CAS still guards
    # a record written by the next owner.
    store, other = make_store(), make_store()
    with store.acquire("cas-owner") as first:
        first.save(record("cas-owner", 1), 0)
    with other.acquire("cas-owner") as second:
        second.save(record("cas-owner", 2), 1)
        with pytest.raises(ConflictError):
            second.save(record("cas-owner", 2), 1)


# covers: B-PG-2
def test_an_unlock_that_cannot_finish_destroys_the_connection(
    make_store, proxy, owner_pid, admin, monkeypatch
):
    monkeypatch.setattr(store_module, "CLOSE_TIMEOUT", 0.3)
    frozen, dsn = proxy
    store = make_store(dsn)
    session = store.acquire("unlock")
    old_pid = owner_pid("unlock")
    frozen.freeze()
    _, elapsed = timed(session.close)
    assert elapsed < BOUND  # its budget, not until the network answers again
    frozen.thaw()
    # The connection was not kept for reuse: its server session ends and the lock goes with it.
    eventually(lambda: owner_pid("unlock") is None, "the lock stayed with the old connection")
    with store.acquire("unlock"):
        assert owner_pid("unlock") != old_pid
    # The server ends the old backend once it notices the closed socket: its locks go first,
    # its row in pg_stat_activity a moment later.
    eventually(
        lambda: (
            admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [old_pid]
            ).fetchone()
            == (0,)
        ),
        "the old connection's server session is still alive",
    )
