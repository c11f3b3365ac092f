"""``durable list`` for many runs: newest first, ``--status``, ``--since``, ``--graph``,
``--limit``; exit 8 when a listed run is corrupt or unreadable."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from durable_core import Graph, Key, Runtime
from durable_core.cli import ExitCode, cli
from durable_core.config import parse_store_url

N = Key("n", int)
OUT = Key("out", int)


def graph_named(name: str) -> Graph:
    graph = Graph(name, inputs=[N])

    @graph.node("double", requires=[N], provides=[OUT])
    def double(rc):
        if rc.get(N) % 5 == 0:
            raise ValueError("every fifth run fails")
        rc.set(OUT, rc.get(N) * 2)

    return graph


@pytest.fixture(params=["file", "sqlite"])
def store_url(request, tmp_path):
    if request.param == "file":
        return f"file://{tmp_path / 'runs'}"
    return f"sqlite://{tmp_path / 'runs.sqlite'}"


def make_runs(url: str, count: int) -> None:
    """``count`` runs, ``r-000`` saved first; the first ten last saved an hour ago and more."""
    store = parse_store_url(url).open()
    try:
        runtime = Runtime(store)
        for i in range(count):
            graph = graph_named("evens" if i % 2 == 0 else "odds")
            runtime.run(graph, run_id=f"r-{i:03d}", version="1", inputs={N: i})
        for i in range(10):  # long ago, in the order they ran
            with store.acquire(f"r-{i:03d}") as session:
                then = time.time() - 7200 + i
                session.restore_times(then, then)
    finally:
        store.close()


def listed(url: str, *options: str) -> tuple[int, list[dict]]:
    result = CliRunner().invoke(cli, ["list", "--store", url, *options, "--json"])
    return result.exit_code, json.loads(result.stdout)


def test_list_filters_and_orders_many_runs(store_url):
    make_runs(store_url, 40)
    code, rows = listed(store_url)
    assert code == 0
    ids = [r["run_id"] for r in rows]
    assert ids == [f"r-{i:03d}" for i in reversed(range(40))]  # newest first
    code, failed = listed(store_url, "--status", "failed")
    assert [r["run_id"] for r in failed] == [f"r-{i:03d}" for i in (35, 30, 25, 20, 15, 10, 5, 0)]
    code, newest = listed(store_url, "--status", "failed", "--limit", "3")
    assert [r["run_id"] for r in newest] == ["r-035", "r-030", "r-025"]
    code, odds = listed(store_url, "--graph", "odds", "--status", "failed", "--status", "settled")
    assert {r["graph"] for r in odds} == {"odds"} and len(odds) == 20
    code, recent = listed(store_url, "--since", "1h")
    assert [r["run_id"] for r in recent] == [f"r-{i:03d}" for i in reversed(range(10, 40))]
    code, none = listed(store_url, "--since", "1h", "--graph", "nothing-like-it")
    assert (code, none) == (0, [])
    table = CliRunner().invoke(cli, ["list", "--store", store_url, "--limit", "2"])
    assert [line.split()[0] for line in table.stdout.splitlines()[1:]] == ["r-039", "r-038"]


def test_a_corrupt_run_is_listed_whatever_the_filters_and_ends_with_exit_8(store_url, tmp_path):
    make_runs(store_url, 12)
    if store_url.startswith("file"):
        record = next(p for p in (tmp_path / "runs").glob("*.json"))
        record.write_bytes(b"{broken")
    else:
        import sqlite3

        with sqlite3.connect(tmp_path / "runs.sqlite") as db:
            db.execute("UPDATE durable_runs SET record = ? WHERE run_id = ?", (b"{broken", "r-011"))
    code, rows = listed(store_url, "--status", "completed", "--limit", "1")
    assert code == ExitCode.CORRUPT
    damaged = [r for r in rows if r["status"] in ("corrupt", "unreadable")]
    assert len(damaged) == 1 and damaged[0]["error"]
    bad = CliRunner().invoke(cli, ["list", "--store", store_url, "--since", "soon"])
    assert bad.exit_code == ExitCode.CONFIG and "--since 'soon'" in bad.stderr
