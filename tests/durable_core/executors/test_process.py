"""The process executor with a real ProcessPoolExecutor: bodies travel, the owner decides."""

from __future__ import annotations

import itertools
import os
import threading

import pytest

from durable_core import (
    CancelToken,
    ConfigError,
    Graph,
    Key,
    MemoryStore,
    NotFoundError,
    NotPicklableError,
    ProcessExecutor,
    RemoteBodyError,
    Retry,
    Runtime,
    Timeout,
    WorkerLostError,
    execute,
)
from tests import ROOT
from tests import executor_bodies as eb

N = Key("n", int)
OUT = Key("out", int)
OBJ = Key("obj", object)


@pytest.fixture(scope="module")
def pool():
    with ProcessExecutor(max_workers=2) as executor:
        yield executor


def one_node(body, *, requires=(N,), provides=(OUT,), aspects=()) -> Graph:
    g = Graph("one", inputs=list(requires))
    g.node("work", requires=requires, provides=provides, aspects=aspects, executor="default")(body)
    return g


def test_bodies_run_in_worker_processes_and_outputs_come_back(pool):
    g = Graph("two", inputs=[N])
    g.node("double", requires=[N], provides=[OUT], executor="default")(eb.double)
    g.node("where", requires=[OUT], provides=[Key("pid", int)], executor="default")(eb.pid_of)
    result = execute(g, {N: 21}, executor=pool)
    assert result.status == "completed", result.error
    assert result[OUT] == 42
    assert result[Key("pid", int)] != os.getpid()


def test_local_nodes_stay_in_the_owner_process(pool):
    g = Graph("local", inputs=[N])
    g.node("where", requires=[N], provides=[OUT], executor="local")(eb.pid_of)
    assert execute(g, {N: 1}, executor=pool)[OUT] == os.getpid()


def test_exception_keeps_type_and_message_across_the_boundary(pool):
    result = execute(one_node(eb.raise_audit), {N: 3}, executor=pool)
    assert result.status == "failed"
    original = result.error.original
    assert type(original) is eb.AuditError
    assert str(original) == "shard 3 is broken"


def test_exception_that_cannot_travel_is_named(pool):
    result = execute(one_node(eb.raise_unpicklable), {N: 3}, executor=pool)
    original = result.error.original
    assert isinstance(original, RemoteBodyError)
    assert original.type_name == "tests.executor_bodies.Unpicklable"
    assert "code 3: no way back" in str(original) and "'work'" in str(original)


def test_unpicklable_body_is_refused_before_anything_is_submitted():
    executor = ProcessExecutor(max_workers=1)
    g = one_node(lambda n: n)
    with pytest.raises(NotPicklableError, match=r"node 'work'.*'process' executor"):
        execute(g, {N: 1}, executor=executor)
    assert executor._pool is None  # no worker was ever started
    store = MemoryStore()
    with pytest.raises(NotPicklableError, match="node 'work'"):
        Runtime(store, executor=executor).run(g, run_id="r", version="1", inputs={N: 1})
    with store.acquire("r") as session, pytest.raises(NotFoundError):
        session.load()  # nothing was saved
    executor.close()


def test_unpicklable_input_value_fails_the_node_naming_node_and_key(pool):
    g = one_node(eb.pid_of, requires=(OBJ,))
    result = execute(g, {OBJ: threading.Lock()}, executor=pool)
    original = result.error.original
    assert isinstance(original, NotPicklableError)
    assert "node 'work'" in str(original) and "'obj'" in str(original)


def test_unpicklable_return_value_fails_the_node_naming_it(pool):
    g = one_node(eb.return_lock, provides=(OBJ,))
    original = execute(g, {N: 1}, executor=pool).error.original
    assert isinstance(original, NotPicklableError)
    assert "node 'work'" in str(original) and "'obj'" in str(original)


def test_output_is_checked_against_the_declared_type(pool):
    g = one_node(eb.pid_of, requires=(N,), provides=(Key("text", str),))
    result = execute(g, {N: 1}, executor=pool)
    assert "key 'text' takes" in str(result.error.original)


def test_max_running_counts_remote_and_local_bodies(tmp_path):
    directory = str(tmp_path)
    d = Key("d", str)
    g = Graph("spans", inputs=[d])
    for i in range(2):
        g.node(f"remote{i}", requires=[d], provides=[Key(f"r{i}", tuple)], executor="default")(
            eb.spans
        )
    g.node("local", requires=[d], provides=[Key("l", tuple)], executor="local")(eb.spans)
    with ProcessExecutor(max_workers=2) as executor:
        result = execute(g, {d: directory}, executor=executor, max_running=1)
    assert result.status == "completed", result.error
    spans = sorted(result.values[name] for name in ("r0", "r1", "l"))
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end - 0.01, f"bodies overlapped with max_running=1: {spans}"


def test_timeout_fails_a_remote_body_without_waiting_for_it(tmp_path):
    d = Key("d", str)
    g = Graph("slow", inputs=[d])
    g.node("slow", requires=[d], provides=[OUT], aspects=[Timeout(1.0)], executor="default")(
        eb.held
    )
    with ProcessExecutor(max_workers=1) as executor:
        assert execute(one_node(eb.double), {N: 1}, executor=executor)[OUT] == 2  # warm worker
        result = execute(g, {d: str(tmp_path)}, executor=executor)
        # the body waits for a release file that comes only now: the owner did not wait for it
        ended = eb.runs(str(tmp_path), "held-end")
        (tmp_path / "release").touch()
    assert result.status == "failed"
    assert isinstance(result.error.original, TimeoutError)
    assert "node 'slow' timed out after 1.0 s" in str(result.error.original)
    assert ended == 0


def test_a_killed_worker_fails_the_try_and_retry_runs_it_again(tmp_path):
    with ProcessExecutor(max_workers=2) as executor:
        (tmp_path / "y").mkdir()
        result = execute(eb.die_graph(2), {eb.DIR: str(tmp_path / "y")}, executor=executor)
    assert result.status == "completed", result.error
    assert result[eb.C] == 7
    assert eb.runs(str(tmp_path / "y"), "die") == 2


def test_cancelling_the_run_cancels_bodies_that_have_not_started(tmp_path):
    d = Key("d", str)
    g = Graph("many", inputs=[d])
    for i in range(6):
        g.node(f"s{i}", requires=[d], provides=[Key(f"o{i}", int)], executor="default")(eb.held)
    token = CancelToken()
    with ProcessExecutor(max_workers=1) as executor:

        def cancel_once_one_runs():
            eb.wait_for(lambda: eb.runs(str(tmp_path), "held") >= 1)
            token.cancel()

        timer = threading.Thread(target=cancel_once_one_runs)
        assert execute(one_node(eb.double), {N: 1}, executor=executor)[OUT] == 2  # warm worker
        timer.start()
        result = execute(g, {d: str(tmp_path)}, executor=executor, cancel=token)
        timer.join()
        # the bodies wait for a release file that comes only now: the run did not wait for them
        ended = eb.runs(str(tmp_path), "held-end")
        (tmp_path / "release").touch()
    # the pool is shut down: whatever was still queued has run by now
    assert result.status == "canceled"
    assert ended == 0
    # One body ran, at most one more was already handed to the worker; the others never started.
    assert eb.runs(str(tmp_path), "held") <= 2


@pytest.mark.slow
def test_crash_of_the_owner_then_resume_restores_confirmed_remote_nodes(tmp_path):
    with ProcessExecutor(max_workers=2) as executor:
        result, marks = eb.kill_owner_then_resume(
            tmp_path, "process", executor, workers_die_with_owner=True
        )
    assert result.status == "completed", result.error
    assert result[eb.C] == 3
    assert result.restored == 2
    assert eb.runs(marks, "a") == 1 and eb.runs(marks, "b") == 1
    assert eb.runs(marks, "c") == 2


def test_options_are_checked():
    with pytest.raises(ConfigError, match="max_workers"):
        ProcessExecutor(max_workers=0)
    with pytest.raises(ConfigError, match="fork"):
        ProcessExecutor(start_method="fork")


def test_retry_budget_is_the_owners(tmp_path):
    """A body that always dies is tried exactly as often as the Retry allows."""
    (tmp_path / "z").mkdir()
    g = Graph("always", inputs=[eb.DIR])
    g.node("die", requires=[eb.DIR], provides=[OUT], aspects=[Retry(2)], executor="default")(
        eb.die_always
    )
    with ProcessExecutor(max_workers=1) as executor:
        result = execute(g, {eb.DIR: str(tmp_path / "z")}, executor=executor)
    assert isinstance(result.error.original, WorkerLostError)
    assert "node 'die'" in str(result.error.original)
    assert eb.runs(str(tmp_path / "z"), "die") == 2


def test_a_script_without_a_main_guard_gets_a_clear_error(tmp_path):
    """Spawned workers import the main module again; unguarded, they die while starting."""
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(
        "from tests.executor_bodies import double\n"
        "from durable_core import Graph, Key, ProcessExecutor, execute\n"
        "N, OUT = Key('n', int), Key('out', int)\n"
        "g = Graph('g', inputs=[N])\n"
        "g.node('double', requires=[N], provides=[OUT], executor='default')(double)\n"
        "with ProcessExecutor(max_workers=1) as pool:\n"
        "    execute(g, {N: 1}, executor=pool)\n"
    )
    # A user's script run by its path: the tests package is found through PYTHONPATH.
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode != 0
    assert "WorkerLostError: process executor: its worker processes died while starting" in (
        done.stderr
    )
    assert "__name__ == '__main__'" in done.stderr


def _children(pid: int) -> dict[int, str]:
    """The processes whose parent is ``pid``, with their command lines."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid:
            found[int(entry)] = command
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to find the owner's children")
def test_a_killed_owner_leaves_no_leaked_semaphore_warning(tmp_path):
    # covers: E-1
    import signal
    import subprocess
    import sys

    store_dir, mark_dir = tmp_path / "store", tmp_path / "marks"
    mark_dir.mkdir()
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        owner = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.executor_owner",
                str(store_dir),
                str(mark_dir),
                "process",
            ],
            cwd=ROOT,
            stderr=stderr,
        )
        try:
            eb.wait_for(lambda: eb.runs(str(mark_dir), "c") >= 1 or owner.poll() is not None)
            assert owner.poll() is None, f"the owner ended early with {owner.returncode}"
            trackers = [
                p
                for p, cmd in _children(owner.pid).items()
                if "resource_tracker import main" in cmd
            ]
            assert trackers, _children(owner.pid)  # the pool's semaphores are tracked
            owner.send_signal(signal.SIGKILL)
            owner.wait(30)
        finally:
            if owner.poll() is None:
                owner.kill()
                owner.wait()
        workers = {int(p.name.split(".")[1]) for p in mark_dir.glob("c.*")}
        # the tracker removes the semaphores once the owner and its workers are gone
        eb.wait_for(lambda: not any(eb._alive(pid) for pid in [*trackers, *workers]), 60)
    (mark_dir / "release").touch()
    text = (tmp_path / "stderr.txt").read_text(errors="replace")
    assert "leaked semaphore" not in text, text


def test_a_worker_whose_owner_is_already_gone_when_it_starts_ends_by_itself():
    # covers: E-1
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid now names no process: an owner killed while the pool started workers
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\n"
            "from durable_core.executors.process import _watch_owner\n"
            f"_watch_owner({dead.pid})\n"
            "time.sleep(120)\n",
        ]
    )
    try:
        assert worker.wait(60) == 70  # ended by the watch, not after its sleep
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
