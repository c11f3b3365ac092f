"""Launchers and runs that wait without a process: ``submit --suspend`` ends a run ``waiting``,
``recover`` leaves it alone until its deadline passed, then finishes it; ``send --on`` wakes
an inbox run on a launcher. Real worker processes, a real SQLite store.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
import time

import pytest

_counter = itertools.count()

GRAPH = """
import time

from durable_core.graph import Graph, Key
from durable_core.graph.waits import sleep_until

WAIT = Key("wait", float)
DEADLINE = Key("deadline", float)
ENDED = Key("ended", float)

graph = Graph("launch_timing", inputs=[WAIT])
graph.timer("armed", seconds_from=WAIT, provides=DEADLINE)


@graph.node("sleep", requires=[DEADLINE], provides=[ENDED])
async def sleep(rc) -> None:
    await sleep_until(rc, rc.get(DEADLINE))
    rc.set(ENDED, time.time())
"""


@pytest.fixture
def timing(tmp_path):
    module = f"launch_timing_{next(_counter)}"
    (tmp_path / f"{module}.py").write_text(GRAPH)
    config = tmp_path / "timing.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            graph = "{module}:graph"
            run_id = "sleeper"
            version = "1"

            [inputs]
            wait = 8.0

            [store]
            backend = "sqlite"
            path = "runs.sqlite"
            """
        )
    )
    return str(config)


def durable(*args: str) -> tuple[int, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "durable_core", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


# covers: X-LAUNCH, X-WAIT
def test_a_waiting_run_is_recovered_once_its_deadline_passed(timing):
    code, submitted = durable("submit", timing, "--on", "local:1", "--suspend", "--wait")
    assert code == 0 and submitted["counts"] == {"waiting": 1}, submitted
    # The deadline is at most 8 s from now: room for a start of the CLI on a busy machine.
    waited = time.monotonic()
    code, early = durable("recover", timing, "--on", "local:1", "--wait")
    assert code == 0 and early["orphans"] == [] and early["runs"] == []  # not due yet
    assert early["waiting"] == ["sleeper"]  # left alone, and said so
    time.sleep(max(0.0, 8.2 - (time.monotonic() - waited)))
    code, due = durable("recover", timing, "--on", "local:1", "--wait")
    assert code == 0 and due["orphans"] == ["sleeper"], due
    assert [r["status"] for r in due["runs"]] == ["completed"]
    assert due["runs"][0]["outputs"]["ended"] >= 0
    assert due["waiting"] == []


INBOX_GRAPH = """
from durable_core.graph import Graph, Key

EVENTS = Key("events", int, stream=True, inbox=True, capacity=16)
EXPECTED = Key("expected", int)
TOTAL = Key("total", int)

graph = Graph("launch_inbox", inputs=[EXPECTED])


@graph.processor(
    "count", input=EVENTS, state=int, initial=0, requires=[EXPECTED], provides=[TOTAL],
)
def count(rc, state: int, n: int) -> int:
    state += n
    if n < 0 or state >= rc.get(EXPECTED):
        rc.stop()
    return state


@count.finish
def finish(rc, state: int) -> None:
    rc.set(TOTAL, state)
"""


# covers: X-LAUNCH, X-WAIT, X-INBOX-1
def test_send_on_a_launcher_wakes_a_waiting_run_there(tmp_path):
    module = f"launch_inbox_{next(_counter)}"
    (tmp_path / f"{module}.py").write_text(INBOX_GRAPH)
    config = tmp_path / "inbox.toml"
    config.write_text(
        f'graph = "{module}:graph"\nrun_id = "mailbox"\nversion = "1"\n\n[inputs]\n'
        'expected = 5\n\n[store]\nbackend = "sqlite"\npath = "runs.sqlite"\n'
    )
    code, submitted = durable("submit", str(config), "--on", "local:1", "--suspend", "--wait")
    assert code == 0 and submitted["counts"] == {"waiting": 1}, submitted
    code, posted = durable("send", str(config), "mailbox", "events", "5", "--on", "local:1")
    assert code == 0 and posted["woken"] is True
    code, rows = durable("list", str(config))
    assert [(r["run_id"], r["status"]) for r in rows] == [("mailbox", "completed")]
