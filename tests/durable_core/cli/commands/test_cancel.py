"""``durable cancel``: the owner of a running run (another process) stops cleanly on request;
the run stays resumable. File and SQLite pass the request as a marker file, PostgreSQL as a
notification (which reaches an owner on any host)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from durable_core.cli import ExitCode


def test_cancel_stops_a_running_run_that_resumes_later(ops):
    hold = ops.folder / "hold"
    hold.touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "durable_core", "run", ops.config],
        cwd=ops.folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while "double" not in ops.calls():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        asked = ops.invoke("cancel", ops.config)
        assert asked.exit_code == 0, asked.output
        assert "asked the owner of run 'ops-1' to stop" in asked.stdout
        # the owner sees the request within its polling interval; ``double`` logs when its
        # node was canceled, and only then is it let go (else the run could go on and end)
        while "double-canceled" not in ops.calls():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the owner never saw the cancel request"
            time.sleep(0.05)
        hold.unlink()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == ExitCode.RUN_FAILED, (out, err)
    assert "run 'ops-1' canceled" in out
    assert "canceled on request ('durable cancel'): the record stays resumable" in err
    assert ops.calls().count("total") == 0
    resumed = ops.json("resume", ops.config)
    assert resumed["status"] == "completed"
    assert ops.calls().count("total") == 1


def test_cancel_of_a_run_that_is_not_running(ops):
    assert ops.invoke("run", ops.config).exit_code == 0
    result = ops.invoke("cancel", ops.config, "ops-1", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["requested"] is False
    assert "nothing to cancel" in ops.invoke("cancel", ops.config).stdout
    # no request is left behind for the next run of this id
    assert ops.invoke("resume", ops.config).exit_code == 0
