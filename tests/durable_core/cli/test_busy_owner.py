"""A busy run's error names its owner: a real ``durable run`` in another process holds the run,
and ``inspect`` says which pid, on which host, since when (file, SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from durable_core.cli import ExitCode


def _running(ops) -> subprocess.Popen:
    """Start ``durable run`` in another process and wait until its first node runs."""
    (ops.folder / "hold").touch()  # ``double`` waits while this file exists
    child = subprocess.Popen(
        [sys.executable, "-c", "from durable_core.cli import main; main()", "run", ops.config],
        cwd=ops.folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while "double" not in ops.calls():
        assert child.poll() is None, child.communicate()[1]
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.05)
    return child


# covers: E-1, E-2, R-STORE-1
def test_inspect_of_a_running_run_names_the_owner_process(ops):
    child = _running(ops)
    try:
        busy = ops.invoke("inspect", ops.config)
        by_url = ops.invoke("inspect", "--store", ops.store_url, "ops-1")
        shown = ops.invoke("show", ops.config, "ops-1", "double")
        deleted = ops.invoke("delete", ops.config, "ops-1", "--yes")
    finally:
        (ops.folder / "hold").unlink()
        assert child.wait(timeout=60) == 0, child.communicate()[1]
    assert busy.exit_code == ExitCode.BUSY, busy.output
    message = busy.stderr
    assert child.pid != os.getpid()
    assert f"in use by pid {child.pid} on host {socket.gethostname()!r} since " in message
    assert " UTC" in message
    # the hint is a complete command: the same config (or --store URL) and the run id
    assert f"run 'durable cancel {ops.config} ops-1' to ask it to stop" in message
    # The owner is named with its host; a local store never suggests "another host".
    assert "another host" not in message
    for other in (shown, deleted):
        assert other.exit_code == ExitCode.BUSY, other.output
        assert f"run 'durable cancel {ops.config} ops-1' to ask it to stop" in other.stderr
    assert by_url.exit_code == ExitCode.BUSY, by_url.output
    assert "run 'durable cancel --store " in by_url.stderr and " ops-1' to ask it" in by_url.stderr
