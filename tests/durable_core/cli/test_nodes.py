"""A run's nodes as operators see them: ``durable log``'s time running and time waiting for
inputs, ``inspect --nodes``, and what ``inspect --peek`` shows of a running run (X-HIST, E-2),
on real file, SQLite and PostgreSQL stores."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner

from durable_core.cli import ExitCode, cli


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


# covers: E-2, X-HIST
def test_inspect_nodes_shows_each_nodes_state_times_and_last_error(ops):
    (ops.folder / "broken").touch()
    assert ops.invoke("run", ops.config).exit_code == ExitCode.RUN_FAILED
    data = ops.json("inspect", ops.config, "--nodes")
    nodes = {n["path"]: n for n in data["nodes"]}
    assert [n["path"] for n in data["nodes"]] == ["double", "price", "total"]
    assert {p: n["state"] for p, n in nodes.items()} == {
        "double": "confirmed",
        "price": "confirmed",
        "total": "failed",
    }
    events = _events(ops)
    price = _one(events, "node_confirmed", "price")
    assert nodes["price"]["started"] == _one(events, "attempt_started", "price")["time"]
    assert nodes["price"]["running_seconds"] == price["seconds"]
    assert nodes["price"]["waiting_seconds"] == price["waiting"]
    total = nodes["total"]
    assert total["last_error"] == "RuntimeError: total is broken"
    assert f"{ops.module}.py:" in total["where"] and total["where"].endswith(" in total")
    assert data["in_flight"] == []  # nothing runs: the run is not owned
    text = ops.invoke("inspect", ops.config, "--nodes")
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    start = lines.index("nodes (from the record and the run log):")
    assert lines[start + 1].split() == ["NODE", "STATE", "TRIES", "STARTED", "RUNNING", "WAITING"]
    assert lines[start + 2].split()[:2] == ["double", "confirmed"]
    assert lines[start + 4].split()[:2] == ["total", "failed"]
    assert lines[start + 5].strip() == "last error: RuntimeError: total is broken"
    assert lines[start + 6].strip() == f"at {total['where']}"
    # without the flag, no node table
    assert "nodes (from" not in ops.invoke("inspect", ops.config).stdout


def _running(ops) -> subprocess.Popen:
    """``durable run`` in another process, held in ``double``'s body (the file ``hold``)."""
    (ops.folder / "hold").touch()
    return subprocess.Popen(
        [sys.executable, "-c", "from durable_core.cli import main; main()", "run", ops.config],
        cwd=ops.folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _peek_until(ops, child, ready) -> dict:
    """``inspect --peek --nodes --json`` until ``ready(data)`` (the history reaches the store
    a moment after the events: the writer gathers them first)."""
    deadline = time.monotonic() + 60
    while True:
        assert child.poll() is None, child.communicate()[1]
        result = ops.invoke("inspect", ops.config, "--peek", "--nodes", "--json")
        if result.exit_code == 0:
            data = json.loads(result.stdout)
            if ready(data):
                return data
        assert time.monotonic() < deadline, result.output
        time.sleep(0.05)


# covers: E-2, X-HIST
def test_peek_of_a_running_run_shows_what_runs_and_what_waits(ops):
    child = _running(ops)
    try:
        data = _peek_until(ops, child, lambda d: any(n["path"] == "double" for n in d["in_flight"]))
        text = ops.invoke("inspect", ops.config, "--peek")
    finally:
        (ops.folder / "hold").unlink()
        assert child.wait(timeout=60) == 0, child.communicate()[1]
    # the record holds no attempt yet (double's root attempt is saved with its confirmation)
    assert data["attempts"]["active"] == 0
    assert data["in_flight"] == [
        {"path": "double", "state": "running", "started": data["in_flight"][0]["started"]},
        {"path": "price", "state": "waiting", "started": data["in_flight"][1]["started"]},
        {"path": "total", "state": "waiting", "started": data["in_flight"][2]["started"]},
    ]
    nodes = {n["path"]: n for n in data["nodes"]}
    assert nodes["double"]["state"] == "running" and nodes["double"]["running_seconds"] >= 0
    assert nodes["price"]["state"] == "waiting" and nodes["price"]["waiting_seconds"] >= 0
    assert nodes["price"]["running_seconds"] is None
    assert text.exit_code == 0, text.output
    assert "in flight  3 (from the run log" in text.stdout
    assert "  double  running for " in text.stdout
    assert "  price  waiting for its inputs for " in text.stdout
    settled = ops.json("inspect", ops.config, "--nodes")
    assert settled["in_flight"] == []
    assert {n["state"] for n in settled["nodes"]} == {"confirmed"}


TRIES_GRAPH = """
import pathlib

from durable_core import Graph, In, Key, Out, Retry

TEXT = Key("text", str)
LINE = Key("line", str)
LENGTH = Key("length", int)
N = Key("n", int)
SUMMARY = Key("summary", str)
TRIES = pathlib.Path(__file__).with_name("tries.txt")

measure = Graph("measure", inputs=[LINE])


@measure.node("length", requires=[LINE], provides=[LENGTH], aspects=[Retry(3)])
def length(rc):
    with TRIES.open("a") as f:
        f.write("try\\n")
    if len(TRIES.read_text().split()) < 3 or rc.get(LINE) == "never":
        raise ConnectionError(f"try {rc.attempt.index} lost its connection")
    rc.set(LENGTH, len(rc.get(LINE)))


graph = Graph("report", inputs=[TEXT])
graph.sub("measure", measure, bindings=[In(TEXT, LINE), Out(LENGTH, N)])


@graph.node("summary", requires=[N], provides=[SUMMARY])
def summary(rc):
    rc.set(SUMMARY, f"{rc.get(N)} characters")
"""


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_inspect_nodes_shows_sub_graph_nodes_by_path_and_their_retry_tries(
    store, tmp_path, monkeypatch
):
    # covers: E-2, X-HIST, R-SCOPE-1
    module = f"tries_graph_{store}"
    (tmp_path / f"{module}.py").write_text(TRIES_GRAPH)
    table = (
        '[store]\nbackend = "file"\ndirectory = "runs"\n'
        if store == "file"
        else '[store]\nbackend = "sqlite"\npath = "runs.sqlite"\n'
    )
    (tmp_path / "report.toml").write_text(
        f'graph = "{module}:graph"\nrun_id = "r"\nversion = "1"\n\n'
        f'[inputs]\ntext = "twelve chars"\n\n{table}'
    )
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    try:
        assert runner.invoke(cli, ["run", "report.toml"]).exit_code == 0
        shown = runner.invoke(cli, ["inspect", "report.toml", "--nodes", "--json"])
        text = runner.invoke(cli, ["inspect", "report.toml", "--nodes"]).stdout
    finally:
        sys.modules.pop(module, None)
    assert shown.exit_code == 0, shown.output
    nodes = {n["path"]: n for n in json.loads(shown.stdout)["nodes"]}
    assert list(nodes) == ["measure", "measure/length", "summary"]
    assert {n["state"] for n in nodes.values()} == {"confirmed"}
    length = nodes["measure/length"]
    assert length["retry_tries"] == 3
    assert length["last_error"] == "ConnectionError: try 2 lost its connection"
    assert length["where"].endswith(" in length")
    assert nodes["summary"]["retry_tries"] == 0
    (row,) = [line for line in text.splitlines() if line.startswith("  measure/length ")]
    assert row.split()[:5] == ["measure/length", "confirmed", "3", "Retry", "tries"]

    # a child node that fails for good: its scope is void in the record, the log says it failed
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        failed = runner.invoke(cli, ["run", "report.toml", "r2", "--input", "text=never"])
        assert failed.exit_code == ExitCode.RUN_FAILED, failed.output
        shown = runner.invoke(cli, ["inspect", "report.toml", "r2", "--nodes", "--json"])
    finally:
        sys.modules.pop(module, None)
    data = json.loads(shown.stdout)
    states = {n["path"]: n["state"] for n in data["nodes"]}
    # the open attempts of a Sub graph's node name the Sub's path
    assert sorted({(a["scope_path"], a["node_id"]) for a in data["open_attempts"]}) == [
        ("", "measure"),
        ("measure", "length"),
    ]
    # summary began (waiting for its input) and the run ended before it did
    assert states == {"measure": "failed", "measure/length": "failed", "summary": "canceled"}


def test_inspect_nodes_counts_a_processors_failed_message_tries(tmp_path, monkeypatch):
    # covers: E-2, X-HIST, S-7
    from tests.durable_core.cli.test_message_tries import GRAPH as FOLD

    (tmp_path / "fold_nodes.py").write_text(textwrap.dedent(FOLD))
    (tmp_path / "fold.toml").write_text(
        'graph = "fold_nodes:graph"\nrun_id = "f"\nversion = "1"\n\n'
        '[inputs]\nlimit = 30\npoison = 0\n\n[store]\nbackend = "sqlite"\npath = "runs.sqlite"\n'
    )
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    try:
        assert runner.invoke(cli, ["run", "fold.toml"]).exit_code == 0
        shown = runner.invoke(cli, ["inspect", "fold.toml", "--nodes", "--json"])
        text = runner.invoke(cli, ["inspect", "fold.toml", "--nodes"]).stdout
    finally:
        sys.modules.pop("fold_nodes", None)
    assert shown.exit_code == 0, shown.output
    nodes = {n["path"]: n for n in json.loads(shown.stdout)["nodes"]}
    fold = nodes["fold"]
    # messages 7, 14, 21 and 28 failed once: the log keeps the tries the record let go
    assert fold["state"] == "confirmed" and fold["message_tries_failed"] == 4
    assert fold["running_seconds"] is not None and fold["waiting_seconds"] is not None
    assert fold["last_error"] == "ValueError: cannot fold 28"
    assert nodes["produce"]["message_tries_failed"] == 0
    (row,) = [line for line in text.splitlines() if line.startswith("  fold ")]
    assert "4 failed of 0 message tries" not in row and "4 failed message tries" in row


# covers: E-2, X-HIST, R-ATT-4
def test_nodes_of_a_killed_run_are_interrupted_then_restored_by_a_later_resume(ops):
    child = _running(ops)
    try:
        _peek_until(ops, child, lambda d: d["nodes"][0]["state"] == "running")
    finally:
        child.kill()  # kill -9: no run_finished, the owner is gone
        child.wait(timeout=60)
        (ops.folder / "hold").unlink()
    states = {n["path"]: n["state"] for n in ops.json("inspect", ops.config, "--nodes")["nodes"]}
    # inspect holds the run's session: nothing runs, what had begun was interrupted
    assert states == {"double": "interrupted", "price": "interrupted", "total": "interrupted"}
    assert ops.invoke("resume", ops.config).exit_code == 0
    assert ops.invoke("resume", ops.config).exit_code == 0  # completed: everything restored
    nodes = ops.json("inspect", ops.config, "--nodes")["nodes"]
    assert [(n["path"], n["state"]) for n in nodes] == [
        ("double", "restored"),
        ("price", "restored"),
        ("total", "restored"),
    ]
