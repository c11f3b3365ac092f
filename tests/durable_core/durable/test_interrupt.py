"""Ctrl-C (SIGINT) during ``Runtime.run`` in a real child process, with and without a
``CancelToken``: the call ends only after the running bodies have ended, and the record stays
resumable (docs/durable.md, "Stopping a run: Ctrl-C and CancelToken")."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from durable_core import AttemptState, Runtime
from tests import ROOT
from tests.durable_core.durable.interrupt_child import BOUND, SEED, B, C, graph
from tests.durable_core.durable.scenarios import CallLog, load, open_store

CHILD = "tests.durable_core.durable.interrupt_child"


def interrupt(mode: str, kind: str, location: Path, log: CallLog) -> dict[str, object]:
    """Start the child, send SIGINT once both slow bodies are running (a ``worker-`` mode's
    child sends it to itself), return its outcome. The child must end well before its slow
    bodies' bound of a minute: the interrupt, not their end, must have stopped the run."""
    proc = subprocess.Popen(
        [sys.executable, "-m", CHILD, mode, kind, str(location), str(log.path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not {"plain", "waits"} <= set(log.calls()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the bodies never started"
            time.sleep(0.01)
        started = time.monotonic()
        if not mode.startswith("worker-"):
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert took < BOUND / 2, f"the run ended {took:.1f} s after the interrupt: {err}"
    return json.loads(out.strip().splitlines()[-1])


def resumes_cleanly(kind: str, location: Path, log: CallLog, *, plain_kept: bool) -> None:
    """The interrupted run's async node left nothing in the record (it was canceled in its
    body); the plain body, which cannot be interrupted, was confirmed when it returned after a
    cancel by a token (``plain_kept``) and dropped by a bare Ctrl-C. Resume runs the rest
    again and ends."""
    store = open_store(kind, location)
    try:
        record = load(store, "r1")
        states = {a.node_id: a.state for a in record.attempts.values()}
        expected = {"first": AttemptState.CONFIRMED}
        if plain_kept:
            expected["plain"] = AttemptState.CONFIRMED
        assert states == expected
        result = Runtime(store).resume(graph(log, 0.0), run_id="r1", version="v1", inputs={SEED: 1})
        assert result.status == "completed", result.error
        assert result.restored == (2 if plain_kept else 1)
        assert (result[B], result[C]) == (2, 3)
        assert log.count("first") == 1 and log.count("waits") == 2
        assert log.count("plain") == (1 if plain_kept else 2)
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_ctrl_c_raises_keyboard_interrupt_after_bodies_end_and_the_run_resumes(
    kind: str, tmp_path: Path
) -> None:
    # covers: G-6, R-ATT-4, R-RT-2
    location, log = tmp_path / "store", CallLog(tmp_path / "calls.log")
    outcome = interrupt("plain", kind, location, log)
    # the plain body could not be interrupted: the call waited for it to return
    assert outcome == {"raised": "KeyboardInterrupt", "plain_returned": True}
    resumes_cleanly(kind, location, log, plain_kept=False)


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_cancel_token_from_a_sigint_handler_ends_the_run_canceled(
    kind: str, tmp_path: Path
) -> None:
    # covers: G-6, R-ATT-4
    location, log = tmp_path / "store", CallLog(tmp_path / "calls.log")
    outcome = interrupt("token", kind, location, log)
    assert outcome == {"status": "canceled", "error": None, "plain_returned": True}
    # the plain body finished after the cancel: its work is kept, not run again
    resumes_cleanly(kind, location, log, plain_kept=True)


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_ctrl_c_received_by_a_worker_thread_stops_the_run_at_once(
    kind: str, tmp_path: Path
) -> None:
    # covers: G-6, R-RT-2
    # Linux may hand a Ctrl-C to any thread; when a plain body's worker thread gets it, the
    # event loop, asleep until a timer a minute away, must still wake and stop the run.
    location, log = tmp_path / "store", CallLog(tmp_path / "calls.log")
    outcome = interrupt("worker-plain", kind, location, log)
    assert outcome == {"raised": "KeyboardInterrupt", "plain_returned": True}
    resumes_cleanly(kind, location, log, plain_kept=False)


def test_a_cancel_token_handler_runs_at_once_when_a_worker_thread_gets_the_sigint(
    tmp_path: Path,
) -> None:
    # covers: G-6, R-ATT-4
    location, log = tmp_path / "store", CallLog(tmp_path / "calls.log")
    outcome = interrupt("worker-token", "sqlite", location, log)
    assert outcome == {"status": "canceled", "error": None, "plain_returned": True}
    resumes_cleanly(kind="sqlite", location=location, log=log, plain_kept=True)
