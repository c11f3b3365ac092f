"""Function-form bodies the executor tests send to real worker processes.

Workers import this module by name, ``tests.executor_bodies`` (they get the test process's
``sys.path``, where pytest puts the repository root), so every body
here is defined at module level. Bodies leave marker files to count how often they ran.
"""

from __future__ import annotations

import os
import pathlib
import signal
import threading
import time
import uuid

from durable_core import Graph, Key, Retry, SkipNode
from tests import ROOT

DIR = Key("dir", str)
A = Key("a", int)
B = Key("b", int)
C = Key("c", int)


def mark(directory: str, name: str) -> None:
    """Leave one marker file: one run of body ``name``."""
    pathlib.Path(directory, f"{name}.{os.getpid()}.{uuid.uuid4().hex}").touch()


def runs(directory: str, name: str) -> int:
    """How many times body ``name`` ran (started)."""
    return len(list(pathlib.Path(directory).glob(f"{name}.*")))


def pid_of(_: object = None) -> int:
    return os.getpid()


def double(n: int) -> int:
    return n * 2


def spans(directory: str) -> tuple[float, float]:
    """Busy for 0.3 s; return (start, end) wall-clock times."""
    start = time.time()
    mark(directory, "span")
    time.sleep(0.3)
    return start, time.time()


class AuditError(Exception):
    """A picklable exception of the business."""


class Unpicklable(Exception):
    """An exception that cannot be rebuilt from its args (pickle fails on the way back)."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"code {code}: {detail}")


def skip_when_positive(n: int) -> int:
    """Skips its node (raises SkipNode in the worker) for a positive ``n``."""
    if n > 0:
        raise SkipNode("nothing to do")
    return n


def raise_audit(n: int) -> int:
    raise AuditError(f"shard {n} is broken")


def raise_unpicklable(n: int) -> int:
    raise Unpicklable(n, "no way back")


def return_lock(n: int) -> object:
    return threading.Lock()


def die_once(directory: str) -> int:
    """Kill the worker process running it on its first run; return 7 on the next."""
    if runs(directory, "die") == 0:
        mark(directory, "die")
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)
    mark(directory, "die")
    return 7


def wait_for_release(directory: str, seconds: float = 60.0) -> None:
    """Wait for a file named ``release`` in ``directory`` (at most ``seconds``)."""
    deadline = time.monotonic() + seconds
    while not pathlib.Path(directory, "release").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("no release file")
        time.sleep(0.05)


def held(directory: str) -> int:
    """Mark ``held``, wait for a file named ``release`` (at most 60 s), then mark ``held-end``
    (also when the wait ran out): a test sees whether the body is still running, whatever the
    machine's speed."""
    mark(directory, "held")
    try:
        wait_for_release(directory)
    finally:
        mark(directory, "held-end")
    return 1


def step_a(directory: str) -> int:
    mark(directory, "a")
    return 1


def step_b(directory: str) -> int:
    mark(directory, "b")
    return 2


def step_c(directory: str, a: int, b: int) -> int:
    """Mark, then wait for a file named ``release`` (at most 60 s)."""
    mark(directory, "c")
    wait_for_release(directory)
    return a + b


def crash_graph() -> Graph:
    """a and b run first; c waits for a release file (the owner is killed meanwhile)."""
    g = Graph("crash", inputs=[DIR])
    g.node("a", requires=[DIR], provides=[A], executor="default")(step_a)
    g.node("b", requires=[DIR], provides=[B], executor="default")(step_b)
    g.node("c", requires=[DIR, A, B], provides=[C], executor="default")(step_c)
    return g


def die_graph(attempts: int) -> Graph:
    g = Graph("die", inputs=[DIR])
    g.node("die", requires=[DIR], provides=[C], aspects=[Retry(attempts)], executor="default")(
        die_once
    )
    return g


def wait_for(predicate, seconds: float = 60.0) -> None:
    """Poll ``predicate`` until it is true; fail after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s for {predicate}")
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def kill_owner_then_resume(
    tmp_path: pathlib.Path, where: str, executor: object, *, workers_die_with_owner: bool = False
):
    """Start a run of :func:`crash_graph` in a child process (the owner), SIGKILL it while
    ``c`` runs (``a`` and ``b`` are confirmed by then), resume in this process with
    ``executor`` and return ``(result, marker_dir)``. With ``workers_die_with_owner``, first
    check that the worker process that was running ``c`` ends by itself."""
    import subprocess
    import sys

    from durable_core import Runtime
    from durable_filestore import FileStore

    store_dir, mark_dir = tmp_path / "store", tmp_path / "marks"
    mark_dir.mkdir()
    owner = subprocess.Popen(
        [sys.executable, "-m", "tests.executor_owner", str(store_dir), str(mark_dir), where],
        cwd=ROOT,
    )
    try:
        wait_for(lambda: runs(str(mark_dir), "c") >= 1 or owner.poll() is not None)
        assert owner.poll() is None, f"the owner ended early with {owner.returncode}"
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
    if workers_die_with_owner:
        # The worker running c had no release file: it must end because its owner died.
        pids = {int(p.name.split(".")[1]) for p in mark_dir.glob("c.*")}
        wait_for(lambda: not any(_alive(pid) for pid in pids), 30)
    pathlib.Path(mark_dir, "release").touch()
    runtime = Runtime(FileStore(store_dir), executor=executor)
    result = runtime.resume(crash_graph(), run_id="crash", version="1", inputs={DIR: str(mark_dir)})
    return result, str(mark_dir)


def die_always(directory: str) -> int:
    mark(directory, "die")
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)
    return 0
