"""Several threads and processes on one database: different runs independent, one owner per run
(R-STORE-1, B-PG-1)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from durable_core import BusyError, RunRecord

pytestmark = pytest.mark.postgres

SAVES = 25


# covers: R-STORE-1
def test_threads_on_different_runs_work_independently(make_store):
    store = make_store(max_connections=4)

    def work(n: int) -> int:
        run_id = f"thread-{n}"
        with store.acquire(run_id, timeout=120) as session:
            for revision in range(1, SAVES + 1):
                session.save(RunRecord(run_id=run_id, revision=revision), revision - 1)
            return session.load().revision

    # More threads than connections: the extra ones wait for capacity, none is busy.
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(work, range(8))) == [SAVES] * 8
    assert [(s.run_id, s.revision) for s in store.list_runs()] == [
        (f"thread-{n}", SAVES) for n in range(8)
    ]


# covers: R-STORE-1, B-PG-1
def test_threads_racing_for_one_run_get_one_owner_and_busy_errors(make_store):
    stores = [make_store() for _ in range(3)]
    barrier = threading.Barrier(6)
    outcomes: list[str] = []
    sessions = []
    lock = threading.Lock()

    def race(n: int) -> None:
        store = stores[n % 3]
        barrier.wait()
        try:
            session = store.acquire("contested")
        except BusyError:
            result = "busy"
        else:
            result = "owner"
            sessions.append(session)
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcomes) == ["busy"] * 5 + ["owner"]
    sessions[0].close()


WORKER = textwrap.dedent(
    """
    import sys
    from durable_core import RunRecord
    from durable_postgresstore import PostgresStore

    dsn, run_id, saves = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with PostgresStore(dsn) as store, store.acquire(run_id, timeout=120) as session:
        for revision in range(1, saves + 1):
            session.save(RunRecord(run_id=run_id, revision=revision), revision - 1)
        print(session.load().revision)
    """
)

HOLDER = textwrap.dedent(
    """
    import sys, time
    from durable_core import RunRecord
    from durable_postgresstore import PostgresStore

    store = PostgresStore(sys.argv[1])
    session = store.acquire(sys.argv[2])
    session.save(RunRecord(run_id=sys.argv[2], revision=1), 0)
    print("holding", flush=True)
    time.sleep(600)
    """
)


# covers: R-STORE-1, B-PG-1
def test_processes_on_different_runs_work_independently(postgres_dsn, make_store):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, postgres_dsn, f"proc-{n}", str(SAVES)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(3)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outputs
    assert [out.strip() for out, _ in outputs] == [str(SAVES)] * 3
    assert [(s.run_id, s.revision) for s in make_store().list_runs()] == [
        (f"proc-{n}", SAVES) for n in range(3)
    ]


# covers: B-PG-1, R-STORE-1
def test_a_run_owned_by_a_killed_process_is_released_by_the_server(postgres_dsn, make_store):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, postgres_dsn, "crashed"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        # a store that waited for the owner would wait until its acquire_timeout
        store = make_store(acquire_timeout=600)
        start = time.monotonic()
        with pytest.raises(BusyError):
            store.acquire("crashed")
        assert time.monotonic() - start < 60
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        # The kernel closes the dead process's socket; the server ends that session and
        # releases its advisory lock.
        deadline = time.monotonic() + 60
        while True:
            try:
                session = store.acquire("crashed")
                break
            except BusyError:
                assert time.monotonic() < deadline, "the lock was never released"
                time.sleep(0.05)
        with session:
            assert session.load().revision == 1
            session.save(RunRecord(run_id="crashed", revision=2), 1)
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.communicate()
