"""Runs that wait, in real processes: suspended runs hold nothing, concurrent posts are taken
in exactly once, and a timer killed at 80 % of its wait waits only the rest after a restart."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

from durable_core import Runtime
from durable_core.durable.waiting import due_waiting_runs
from tests.e2e import inbox_graphs as graphs

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]

if os.name == "nt":  # pragma: no cover - SIGKILL is POSIX
    pytestmark = pytest.mark.skip("SIGKILL is POSIX")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(ROOT / "examples" / "approval"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def durable(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durable_core", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
    )


def _config(tmp_path: pathlib.Path, backend: str, wait: float) -> pathlib.Path:
    store = (
        'backend = "file"\ndirectory = "runs"'
        if backend == "file"
        else 'backend = "sqlite"\npath = "runs/runs.sqlite"'
    )
    text = (ROOT / "examples" / "approval" / "approval.toml").read_text()
    head = text.partition("[inputs]")[0]
    config = tmp_path / "approval.toml"
    config.write_text(
        f'{head}[inputs]\nsource = "stdlib"\nmax_files = 3\nwait_seconds = {wait}\n'
        f'out_dir = {{ path = "out" }}\n\n[store]\n{store}\n'
    )
    return config


def _store(tmp_path: pathlib.Path, backend: str):
    return graphs.make_store(
        backend, str(tmp_path / "runs" / ("runs.sqlite" if backend == "sqlite" else ""))
    )


@pytest.mark.parametrize("backend", ["file", "sqlite"])
def test_a_suspended_run_holds_nothing_and_a_send_brings_it_back(tmp_path, backend):
    # covers: X-WAIT, X-INBOX-1
    config = _config(tmp_path, backend, 600.0)
    started = durable("run", str(config), "--suspend", "--json")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["status"] == "waiting"
    listed = durable("list", str(config), "--status", "waiting", "--json")
    rows = json.loads(listed.stdout)
    assert [r["run_id"] for r in rows] == ["report-approval"]
    until = rows[0]["waiting"]["until"]
    assert 590 < until - time.time() <= 600  # the timer's deadline, saved when armed
    store = _store(tmp_path, backend)
    try:
        with store.acquire("report-approval") as session:  # no process, no lock holds it
            session.load()
        assert due_waiting_runs(store) == []
        sent = durable(
            "send", str(config), "report-approval", "decisions", '"a comment"', "--no-wake"
        )
        assert sent.returncode == 0 and "sequence 1" in sent.stdout, sent.stderr
        assert [w.run_id for w in due_waiting_runs(store)] == ["report-approval"]
    finally:
        store.close()
    woken = durable("send", str(config), "report-approval", "decisions", '"approve"')
    assert woken.returncode == 0, woken.stderr
    assert "sequence 2" in woken.stdout and "completed" in woken.stdout
    report = (tmp_path / "out" / "published" / "report.md").read_text()
    assert "approved" in report and "a comment (message 1)" in report
    listed = json.loads(durable("list", str(config), "--json").stdout)
    assert listed[0]["status"] == "completed"


def test_the_timer_path_completes_when_only_the_deadline_passes(tmp_path):
    # covers: X-TIMER, X-WAIT
    config = _config(tmp_path, "file", 1.5)
    started = durable("run", str(config), "--suspend", "--json")
    assert json.loads(started.stdout)["status"] == "waiting", started.stderr
    store = _store(tmp_path, "file")
    try:
        (waiting,) = [w for w in due_waiting_runs(store, now=time.time() + 60)]
        time.sleep(max(0.0, waiting.until - time.time()))
        assert [w.run_id for w in due_waiting_runs(store)] == ["report-approval"]
    finally:
        store.close()
    resumed = durable("resume", str(config), "--suspend")  # what recover does for a due run
    assert resumed.returncode == 0, resumed.stderr
    report = (tmp_path / "out" / "discarded" / "report.md").read_text()
    assert "expired" in report


@pytest.mark.parametrize(("backend", "per_poster"), [("sqlite", 1000), ("file", 150)])
def test_four_posting_processes_are_taken_in_exactly_once(tmp_path, backend, per_poster):
    # covers: X-INBOX-1, X-INBOX-2
    where = str(tmp_path / ("runs.sqlite" if backend == "sqlite" else "runs"))
    store = graphs.make_store(backend, where)
    expected = 4 * per_poster
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = Runtime(store, graphs.codecs()).run(
                graphs.counting, run_id="counted", version="1", inputs={graphs.EXPECTED: expected}
            )
        except BaseException as exc:  # reported by the assertions below
            outcome["error"] = exc

    owner = threading.Thread(target=run)
    owner.start()
    give_up = time.monotonic() + 30
    while owner.is_alive() and time.monotonic() < give_up:  # posts need the first record
        try:
            store.peek("counted")
            break
        except Exception:
            time.sleep(0.01)
    assert owner.is_alive(), outcome
    posters = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "inbox_graphs.py"),
                "post",
                backend,
                where,
                "counted",
                str(p * per_poster),
                str(per_poster),
                str(per_poster // 10),  # repeated idempotency keys: no-ops
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(4)
    ]
    for poster in posters:
        assert poster.wait(timeout=120) == 0, poster.stderr.read() if poster.stderr else ""
    owner.join(timeout=120)
    assert not owner.is_alive() and "error" not in outcome, outcome
    result = outcome["result"]
    try:
        assert result.status == "completed", result.error
        numbers = range(expected)
        assert result[graphs.TALLY] == {
            "count": expected,
            "total": sum(numbers),
            "squares": sum(n * n for n in numbers),
        }
        assert store.last_sequence("counted", "events") == expected
    finally:
        store.close()


def test_a_timer_killed_at_80_percent_waits_only_the_rest(tmp_path):
    # covers: X-TIMER
    wait = 2.0
    where = str(tmp_path / "runs")
    child = subprocess.Popen(
        [sys.executable, str(HERE / "inbox_graphs.py"), "timer", "file", where, "t", str(wait)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    store = graphs.make_store("file", where)
    try:
        deadline = None
        give_up = time.monotonic() + 30
        while deadline is None and time.monotonic() < give_up:
            try:
                record = store.peek("t")
                armed = record.scopes[record.root_scope].nodes.get("armed")
                if armed is not None:
                    deadline = float(json.loads(armed.outputs[0].data))
            except Exception:
                pass
            time.sleep(0.01)
        assert deadline is not None, child.communicate()
        armed_at = deadline - wait
        time.sleep(max(0.0, armed_at + 0.8 * wait - time.time()))
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        assert child.returncode == -signal.SIGKILL
        restart = time.time()
        result = Runtime(store, graphs.codecs()).resume(
            graphs.timing, run_id="t", version="1", inputs={graphs.WAIT: wait}
        )
        ended = time.time()
    finally:
        store.close()
    assert result.status == "completed"
    assert result[graphs.ENDED] >= deadline  # it waited until the deadline …
    restart_time = restart - (armed_at + 0.8 * wait)
    assert ended - armed_at <= wait + restart_time + 0.5  # … and only the time left
    assert ended - restart < 0.2 * wait + 0.5  # never the whole wait again
