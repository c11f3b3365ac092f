"""A run's nodes as operators see them: ``durable log``'s time running and time waiting for
inputs, ``inspect --nodes``, and what ``inspect --peek`` shows of a running run (X-HIST, E-2),
on real file, SQLite and PostgreSQL stores."""

from __future__ import annotations

import datetime
import json

import pytest


def _events(ops) -> list[dict]:
    result = ops.invoke("log", ops.config, "--json")
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def _at(entry: dict) -> float:
    return datetime.datetime.fromisoformat(entry["time"]).timestamp()


def _one(events: list[dict], event: str, node: str) -> dict:
    (found,) = [e for e in events if e["event"] == event and e.get("node") == node]
    return found


# covers: X-HIST
def test_log_tells_time_running_from_time_waiting_for_inputs(ops):
    assert ops.invoke("run", ops.config).exit_code == 0
    events = _events(ops)
    double_done = _one(events, "node_confirmed", "double")
    started = _one(events, "attempt_started", "price")
    running = _one(events, "node_running", "price")
    confirmed = _one(events, "node_confirmed", "price")
    # price began when the run started and waited for double's confirmation: its body ran
    # only after it, and the wait is not counted as running
    assert events.index(started) < events.index(double_done) < events.index(running)
    assert running["attempt_id"] == started["attempt_id"] == confirmed["attempt_id"]
    waited = _at(running) - _at(started)
    assert running["waiting"] == pytest.approx(waited, abs=1e-5)
    assert confirmed["waiting"] == pytest.approx(waited, abs=1e-5)
    assert confirmed["seconds"] == pytest.approx(_at(confirmed) - _at(running), abs=1e-5)
    assert confirmed["waiting"] >= _at(double_done) - _at(started) - 1e-5
    # one node_running per node, none per element or message
    assert sorted(e["node"] for e in events if e["event"] == "node_running") == [
        "double",
        "price",
        "total",
    ]
    text = ops.invoke("log", ops.config).stdout
    (line,) = [t for t in text.splitlines() if "node_confirmed" in t and "price" in t]
    assert " ran " in line and " waited " in line
