"""The dask executor against a real distributed.LocalCluster (2 worker processes)."""

from __future__ import annotations

import os
import threading

import cloudpickle
import pytest

from durable_core import (
    ConfigError,
    Graph,
    Key,
    MemoryStore,
    NotPicklableError,
    Runtime,
    Timeout,
    WorkerLostError,
    execute,
    make_plugin_manager,
)
from tests import executor_bodies as eb

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
from durable_executor_dask import DaskExecutor  # noqa: E402

N = Key("n", int)
OUT = Key("out", int)
OBJ = Key("obj", object)


@pytest.fixture(scope="module")
def cluster():
    """One cluster for the module: 2 worker processes; a dying worker is never rescheduled."""
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        local = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        )
    yield local
    local.close()


def _wait_for_workers(cluster) -> None:
    with distributed.Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=120)


@pytest.fixture
def executor(cluster):
    with DaskExecutor(address=cluster.scheduler_address) as executor:
        yield executor


def one_node(body, *, requires=(N,), provides=(OUT,), aspects=()) -> Graph:
    g = Graph("one", inputs=list(requires))
    g.node("work", requires=requires, provides=provides, aspects=aspects, executor="default")(body)
    return g


def test_bodies_run_on_the_cluster_and_are_committed_by_the_owner(executor):
    g = Graph("two", inputs=[N])
    g.node("double", requires=[N], provides=[OUT], executor="default")(eb.double)
    g.node("where", requires=[OUT], provides=[Key("pid", int)], executor="default")(eb.pid_of)
    runtime = Runtime(MemoryStore(), executor=executor)
    result = runtime.run(g, run_id="r", version="1", inputs={N: 21})
    assert result.status == "completed", result.error
    assert result[OUT] == 42 and result[Key("pid", int)] != os.getpid()
    assert runtime.resume(g, run_id="r", version="1", inputs={N: 21}).restored == 2


def test_closures_travel_by_value(executor):
    offset = 100
    g = one_node(lambda n: n + offset)
    assert execute(g, {N: 1}, executor=executor)[OUT] == 101


def test_exception_keeps_type_and_message(executor):
    original = execute(one_node(eb.raise_audit), {N: 5}, executor=executor).error.original
    assert type(original) is eb.AuditError and str(original) == "shard 5 is broken"


def test_unpicklable_value_is_refused_naming_node_and_key(executor):
    result = execute(
        one_node(eb.pid_of, requires=(OBJ,)), {OBJ: threading.Lock()}, executor=executor
    )
    original = result.error.original
    assert isinstance(original, NotPicklableError)
    assert "node 'work'" in str(original) and "'obj'" in str(original)


def test_unpicklable_body_is_refused_before_anything_is_submitted(cluster):
    lock = threading.Lock()
    executor = DaskExecutor(address=cluster.scheduler_address)
    with pytest.raises(NotPicklableError, match=r"node 'work'.*'dask' executor"):
        execute(one_node(lambda n: n if lock else 0), {N: 1}, executor=executor)
    assert executor._client is None  # never even connected
    executor.close()


def test_timeout_on_a_remote_body(executor, tmp_path):
    d = Key("d", str)
    g = Graph("slow", inputs=[d])
    g.node("slow", requires=[d], provides=[OUT], aspects=[Timeout(1.0)], executor="default")(
        eb.held
    )
    assert execute(one_node(eb.double), {N: 1}, executor=executor)[OUT] == 2  # warm workers
    result = execute(g, {d: str(tmp_path)}, executor=executor)
    # the body waits for a release file that comes only now: the owner did not wait for it
    ended = eb.runs(str(tmp_path), "held-end")
    (tmp_path / "release").touch()
    assert isinstance(result.error.original, TimeoutError)
    assert "node 'slow' timed out" in str(result.error.original)
    assert ended == 0


@pytest.mark.slow
def test_crash_of_the_owner_then_resume_restores_confirmed_remote_nodes(cluster, tmp_path):
    with DaskExecutor(address=cluster.scheduler_address) as executor:
        result, marks = eb.kill_owner_then_resume(tmp_path, cluster.scheduler_address, executor)
    assert result.status == "completed", result.error
    assert result[eb.C] == 3 and result.restored == 2
    assert eb.runs(marks, "a") == 1 and eb.runs(marks, "b") == 1


def test_options_are_checked():
    with pytest.raises(ConfigError, match="either address"):
        DaskExecutor()
    with pytest.raises(ConfigError, match="either address"):
        DaskExecutor(address="tcp://x:1", cluster="local")
    with pytest.raises(ConfigError, match="must be 'local'"):
        DaskExecutor(cluster="kubernetes")
    with pytest.raises(ConfigError, match="n_workers must be a positive"):
        DaskExecutor(cluster="local", n_workers=0)
    with pytest.raises(ConfigError, match="sized where it runs"):
        DaskExecutor(address="tcp://x:1", n_workers=2)


def test_the_plugin_registers_dask_with_durable_register_executors():
    pm = make_plugin_manager()
    assert pm.executors().provider("dask") == "dask"
    built = pm.executor_factory("dask")(cluster="local", n_workers=1)
    assert isinstance(built, DaskExecutor) and built.n_workers == 1


def test_cloudpickle_is_the_body_pickler(executor):
    assert cloudpickle.loads(executor.dumps(eb.double))(2) == 4


def _unfinished_tasks(dask_scheduler) -> int:
    """Tasks the scheduler still has to run (or is running)."""
    done = ("memory", "erred", "released", "forgotten")
    return sum(task.state not in done for task in dask_scheduler.tasks.values())


def test_cancelling_the_run_cancels_futures_that_have_not_started(executor, cluster, tmp_path):
    from durable_core import CancelToken

    d = Key("d", str)
    g = Graph("many", inputs=[d])
    for i in range(8):
        g.node(f"s{i}", requires=[d], provides=[Key(f"o{i}", int)], executor="default")(eb.held)
    token = CancelToken()

    def cancel_once_one_runs():
        eb.wait_for(lambda: eb.runs(str(tmp_path), "held") >= 1)
        token.cancel()

    timer = threading.Thread(target=cancel_once_one_runs)
    timer.start()
    result = execute(g, {d: str(tmp_path)}, executor=executor, cancel=token, max_running=8)
    timer.join()
    assert result.status == "canceled"
    # The bodies wait for a release file: the running ones end now, and any future that had
    # not been canceled would run to its end before the scheduler is idle.
    (tmp_path / "release").touch()
    with distributed.Client(cluster, set_as_default=False) as client:
        eb.wait_for(lambda: client.run_on_scheduler(_unfinished_tasks) == 0)
    assert eb.runs(str(tmp_path), "held") <= 2  # one per worker thread at most


# The tests that kill workers come last: the nanny restarts a killed worker, which takes a
# while on a busy machine, and the tests above should not wait for it.


def test_a_killed_worker_fails_the_try_and_retry_runs_it_again(executor, cluster, tmp_path):
    _wait_for_workers(cluster)
    runtime = Runtime(MemoryStore(), executor=executor)
    result = runtime.run(eb.die_graph(2), run_id="die", version="1", inputs={eb.DIR: str(tmp_path)})
    assert result.status == "completed", result.error
    assert result[eb.C] == 7
    assert eb.runs(str(tmp_path), "die") == 2


def test_a_killed_worker_without_retry_is_a_worker_lost_error(executor, cluster, tmp_path):
    _wait_for_workers(cluster)
    result = execute(eb.die_graph(1), {eb.DIR: str(tmp_path)}, executor=executor)
    assert isinstance(result.error.original, WorkerLostError)
    assert "node 'die'" in str(result.error.original)
