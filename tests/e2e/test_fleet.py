"""The fleet, end to end: ``examples/stdlib_batch`` on a real PostgreSQL server, a real Dask
``LocalCluster`` with worker processes, real ``durable`` processes and real SIGKILLs.

- crash recovery: 40 runs on 2 Dask workers, 8 workers SIGKILLed at random points;
- coordinator crash: ``durable submit --wait`` SIGKILLed and its cluster shut down, then
  ``durable recover`` with a fresh cluster;
- duplicate launches: ``durable submit`` of the same 20 runs from two processes at once.

Every body appends ``<package> <node> <attempt id>`` to a trace file as it ends. No confirmed
node runs twice: the last trace line of each node is the attempt its record confirmed (a node
that ran again after its confirmation would end with another line). The results are compared
with an uninterrupted run of each package on the plain engine.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time
import urllib.parse

import pytest

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "stdlib_batch"
CONFIG = str(EXAMPLE / "batch-postgres.toml")

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def batch():
    """The example's graph module, loaded under the name its config gives it (``batch``)."""
    import importlib.util

    if "batch" in sys.modules:
        return sys.modules["batch"]
    spec = importlib.util.spec_from_file_location("batch", EXAMPLE / "batch.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["batch"] = module
    spec.loader.exec_module(module)
    return module


def small_units(batch, count: int) -> list[str]:
    """``count`` small packages and modules of the standard library (quick runs)."""
    small = ["__phello__", "concurrent", "dbm", "html", "json", "tomllib", "wsgiref", "zoneinfo"]
    chosen = [u for u in small if u in batch.units()]
    modules = [u for u in batch.units(with_modules=True) if u not in batch.units()]
    return (chosen + modules)[:count]


@pytest.fixture(scope="module")
def uninterrupted(batch):
    """Package -> the summary of an uninterrupted run on the plain engine (no trace, no delay)."""
    from durable_core.graph import execute

    cache: dict[str, str] = {}

    def summary(package: str) -> str:
        if package not in cache:
            result = execute(batch.graph, {batch.PACKAGE: package})
            cache[package] = result[batch.SUMMARY]
        return cache[package]

    return summary


@pytest.fixture
def fleet_env(postgres_dsn, tmp_path, monkeypatch):
    """The environment of the submitters and of the clusters' workers."""
    trace = tmp_path / "trace.txt"
    monkeypatch.setenv("DURABLE_PG_DSN", postgres_dsn)
    monkeypatch.setenv("STDLIB_BATCH_TRACE", str(trace))
    monkeypatch.setenv("STDLIB_BATCH_DELAY", "0.1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(EXAMPLE), *sys.path]))
    return trace


class Shortage:
    """Keeps a LocalCluster at 2 live workers, as a supervisor keeps a real cluster's: a nanny
    restarts its worker when the worker dies, but not always one killed soon after a restart
    on a loaded machine; after 10 s short of workers, a worker is added."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.added = 0

    def workers(self, cluster, client) -> int:
        live = len(client.scheduler_info()["workers"])
        now = time.monotonic()
        if live >= 2:
            self.since = None
        elif self.since is None:
            self.since = now
        elif now - self.since > 10:
            cluster.scale(len(cluster.worker_spec) + 2 - live)
            self.added += 2 - live
            self.since = None
        return live


def start_cluster(allowed_failures: int = 20):
    with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures}):
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        )
    return cluster


def target(cluster) -> str:
    return "dask://" + cluster.scheduler_address.removeprefix("tcp://")


def runs_file(tmp_path: pathlib.Path, batch, packages: list[str]) -> str:
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(batch.run_line(p) + "\n" for p in packages))
    return str(path)


def durable(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "durable_core", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def postgres_url(dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    parts = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    auth = urllib.parse.quote(parts.get("user", ""), safe="")
    if parts.get("password"):
        auth += ":" + urllib.parse.quote(parts["password"], safe="")
    netloc = (f"{auth}@" if auth else "") + parts.get("host", "localhost")
    if "port" in parts:
        netloc += f":{parts['port']}"
    return f"postgresql://{netloc}/{urllib.parse.quote(parts.get('dbname', ''), safe='')}"


def records(postgres_dsn: str) -> dict:
    """Run id -> its record, read through short sessions."""
    from durable_postgresstore import PostgresStore

    store = PostgresStore(postgres_dsn)
    try:
        out = {}
        for summary in store.list_runs():
            with store.acquire(summary.run_id) as session:
                out[summary.run_id] = session.load()
        return out
    finally:
        store.close()


def started_runs(postgres_dsn: str) -> int:
    from durable_postgresstore import PostgresStore

    try:
        store = PostgresStore(postgres_dsn)
    except Exception:
        return 0
    try:
        return len(list(store.list_runs()))
    except Exception:
        return 0
    finally:
        store.close()


def check_done(postgres_dsn, trace: pathlib.Path, batch, packages, uninterrupted) -> None:
    """Every run completed with the uninterrupted result; no confirmed node ran twice."""
    from durable_core.durable import Runtime
    from durable_core.runinfo import run_status
    from durable_postgresstore import PostgresStore

    found = records(postgres_dsn)
    assert set(found) == {f"stdlib-{p}" for p in packages}
    ended: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for line in trace.read_text().splitlines():
        package, node, attempt = line.split()
        ended[(package, node)].append(attempt)
    nodes = list(batch.graph.nodes)
    for package in packages:
        record = found[f"stdlib-{package}"]
        assert run_status(record, nodes) == "completed"
        confirmed = record.scopes[record.root_scope].nodes
        assert set(confirmed) == set(nodes)
        for node, outputs in confirmed.items():
            # the last body of each node to end is the confirmed one: nothing ran after it
            assert ended[(package, node)][-1] == outputs.attempt, (package, node)
    from durable_core import Codecs
    from durable_core.plugins import make_plugin_manager

    pm = make_plugin_manager(plugins=[("batch", batch)])
    store = PostgresStore(postgres_dsn)
    try:
        runtime = Runtime(store, Codecs.from_plugins(pm), plugins=pm)
        for package in packages:
            result = runtime.resume(
                batch.graph,
                run_id=f"stdlib-{package}",
                version="1",
                inputs={batch.PACKAGE: package},
            )
            assert result.status == "completed" and result.saves == 0
            assert result[batch.SUMMARY] == uninterrupted(package)
    finally:
        store.close()


# covers: X-LAUNCH
def test_crash_recovery_40_runs_8_workers_killed(
    fleet_env, tmp_path, postgres_dsn, batch, uninterrupted, monkeypatch
):
    # Shards long enough that the batch outlasts eight kills on a loaded machine too (a kill
    # waits for a worker its nanny restarted a while ago; with 0.1 s shards a busy machine
    # finished the batch after seven).
    monkeypatch.setenv("STDLIB_BATCH_DELAY", "0.25")
    packages = small_units(batch, 40)
    runs = runs_file(tmp_path, batch, packages)
    cluster = start_cluster()
    rng = random.Random(1729)
    kills = 0
    try:
        with distributed.Client(cluster, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=120)
            out_file, err_file = tmp_path / "out.json", tmp_path / "err.txt"
            submitter = subprocess.Popen(
                [sys.executable, "-m", "durable_core", "submit", CONFIG, "--inputs-file", runs,
                 "--on", target(cluster), "--wait", "--json"],
                stdout=out_file.open("w"), stderr=err_file.open("w"),
            )  # fmt: skip
            deadline = time.monotonic() + 150
            seen: dict[str, float] = {}  # worker address -> when it was first registered
            short = Shortage()
            while kills < 8 and submitter.poll() is None and time.monotonic() < deadline:
                time.sleep(rng.uniform(0.3, 1.0))
                try:
                    if short.workers(cluster, client) < 2:
                        continue
                    # kill only a worker registered a while ago that is running a run
                    now = time.monotonic()
                    for address in client.scheduler_info()["workers"]:
                        seen.setdefault(address, now)
                    running = [
                        w
                        for w, keys in client.processing().items()
                        if keys and now - seen.get(w, now) >= 1.5
                    ]
                    if not running:
                        continue
                    pids = client.run(os.getpid, workers=running, on_error="ignore")
                except Exception:
                    continue
                if not pids:
                    continue
                os.kill(rng.choice(sorted(pids.values())), signal.SIGKILL)
                kills += 1
            while submitter.poll() is None and time.monotonic() < deadline + 60:
                short.workers(cluster, client)
                time.sleep(0.5)
            if submitter.poll() is None:
                submitter.kill()
                submitter.wait()
                err = err_file.read_text()
                states = collections.Counter(t.state for t in cluster.scheduler.tasks.values())
                raise AssertionError(
                    f"the batch did not end: {kills} kills, {short.added} workers added, tasks "
                    f"{states}; submitter's stderr: {err[-3000:]}"
                )
            out, err = out_file.read_text(), err_file.read_text()
    finally:
        cluster.close()
    assert kills == 8, f"the batch ended after {kills} kills: {err}"
    assert submitter.returncode == 0, err
    document = json.loads(out)
    assert document["counts"] == {"completed": 40}, document["counts"]
    check_done(postgres_dsn, fleet_env, batch, packages, uninterrupted)


# covers: X-LAUNCH
def test_coordinator_crash_then_recover_with_a_fresh_cluster(
    fleet_env, tmp_path, postgres_dsn, batch, uninterrupted, monkeypatch
):
    monkeypatch.setenv("STDLIB_BATCH_DELAY", "0.6")  # the crash comes in the middle of runs
    packages = small_units(batch, 16)
    runs = runs_file(tmp_path, batch, packages)
    cluster = start_cluster()
    monkeypatch.setenv("STDLIB_BATCH_DELAY", "0.1")  # the fresh cluster's workers
    try:
        submitter = durable(
            "submit", CONFIG, "--inputs-file", runs, "--on", target(cluster), "--wait",
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while started_runs(postgres_dsn) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        with distributed.Client(cluster, set_as_default=False) as client:
            workers = client.run(os.getpid, on_error="ignore")
        os.kill(submitter.pid, signal.SIGKILL)
        submitter.wait(timeout=30)
        for pid in workers.values():  # the cluster goes down with the runs it was running
            os.kill(pid, signal.SIGKILL)
    finally:
        cluster.close()
    left = records(postgres_dsn)
    assert len(left) >= 3 and not all(
        r.root_scope in r.scopes and len(r.scopes[r.root_scope].nodes) == 7 for r in left.values()
    ), "every run was done before the crash: it proved nothing"

    fresh = start_cluster()
    try:
        recover = durable(
            "recover", CONFIG, "--store", postgres_url(postgres_dsn), "--inputs-file", runs,
            "--on", target(fresh), "--wait", "--json",
        )  # fmt: skip
        out, err = recover.communicate(timeout=150)
    finally:
        fresh.close()
    assert recover.returncode == 0, err
    document = json.loads(out)
    assert document["owned"] == []
    assert len(document["orphans"]) + len(document["unstarted"]) >= 1
    assert set(document["counts"]) == {"completed"}
    check_done(postgres_dsn, fleet_env, batch, packages, uninterrupted)


# covers: X-LAUNCH
def test_duplicate_launches_from_two_submitters(
    fleet_env, tmp_path, postgres_dsn, batch, uninterrupted
):
    packages = small_units(batch, 20)
    runs = runs_file(tmp_path, batch, packages)
    started = time.monotonic()
    both = [
        durable("submit", CONFIG, "--inputs-file", runs, "--on", "local:2", "--wait", "--json")
        for _ in range(2)
    ]
    documents = []
    for process in both:
        out, err = process.communicate(timeout=150)
        assert process.returncode == 0, err  # the loser of each race does not fail
        documents.append(json.loads(out))
    assert time.monotonic() - started < 150  # nor waits without bound
    for document in documents:
        assert document["counts"] == {"completed": 20}
    lines = collections.Counter(
        tuple(line.split()[:2]) for line in fleet_env.read_text().splitlines()
    )
    assert len(lines) == 20 * 7 and set(lines.values()) == {1}, "a node ran twice"
    check_done(postgres_dsn, fleet_env, batch, packages, uninterrupted)
