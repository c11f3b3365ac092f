"""``durable inspect`` and ``durable list`` against real stores (files on disk, SQLite).

Records are written through real sessions; a run is held busy by another process.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner

from durable_core.cli import ExitCode, cli
from durable_core.config import parse_store_url
from durable_core.records import (
    AttemptRecord,
    AttemptState,
    NodeRecord,
    RunRecord,
    ScopeRecord,
    StreamRecord,
    ValueRecord,
)

SECRET = "SECRET-BUSINESS-VALUE"
ROOT = "a" * 32
CHILD = "c" * 32  # a child scope's id is its parent node's attempt id (R-SCOPE-2)


def _value(name: str, text: str) -> ValueRecord:
    import hashlib

    data = json.dumps(text).encode()
    return ValueRecord(
        name=name,
        type_id="json:str",
        version="1",
        digest=hashlib.sha256(data).hexdigest(),
        data=data,
    )


def make_record(
    run_id: str, *, shard_state: AttemptState | None, merge_done: bool, sub: bool = True
) -> RunRecord:
    """A record of a 3-node root graph (list -> shard -> merge) plus a Sub scope under merge.

    ``shard_state`` None: shard confirmed; else its root attempt has that state (with two Retry
    tries under it, the first failed). ``sub`` False: merge is a plain node (no Sub scope).
    """
    nodes = {"list": NodeRecord("list", "1" * 32, outputs=[_value("files", SECRET)])}
    attempts = {"1" * 32: AttemptRecord(ROOT, "list", state=AttemptState.CONFIRMED)}
    if shard_state is None:
        nodes["shard"] = NodeRecord("shard", "2" * 32, outputs=[_value("part", SECRET)])
        attempts["2" * 32] = AttemptRecord(ROOT, "shard", state=AttemptState.CONFIRMED)
    else:
        attempts["2" * 32] = AttemptRecord(ROOT, "shard", state=shard_state)
        attempts["3" * 32] = AttemptRecord(
            "2" * 32, "shard", boundary="0", index=1, limit=3, state=AttemptState.FAILED
        )
        attempts["4" * 32] = AttemptRecord(
            "2" * 32, "shard", boundary="0", index=2, limit=3, state=shard_state
        )
    scopes = {ROOT: ScopeRecord(graph="demo", path="", inputs="e" * 64, nodes=nodes)}
    if merge_done:
        nodes["merge"] = NodeRecord("merge", CHILD, outputs=[_value("total", SECRET)])
        attempts[CHILD] = AttemptRecord(ROOT, "merge", state=AttemptState.CONFIRMED)
    if merge_done and sub:
        attempts["5" * 32] = AttemptRecord(CHILD, "render", state=AttemptState.CONFIRMED)
        scopes[CHILD] = ScopeRecord(
            graph="report",
            path="merge",
            inputs="f" * 64,
            nodes={"render": NodeRecord("render", "5" * 32, outputs=[_value("md", SECRET)])},
            bindings=True,
        )
    return RunRecord(
        run_id=run_id,
        revision=1,
        version="v7",
        definition="d" * 64,
        inputs="e" * 64,
        root_scope=ROOT,
        scopes=scopes,
        attempts=attempts,
        streams={
            "s0": StreamRecord(
                scope=ROOT, node_id="list", key="lines", group="", generation=2, last_sequence=5
            ),
            "s1": StreamRecord(
                scope=ROOT,
                node_id="list",
                key="lines",
                group="g",
                generation=2,
                last_sequence=5,
                acked_through=3,
            ),
        },
    )


STORES = ["file", "sqlite"]


@pytest.fixture(params=STORES)
def store_url(request, tmp_path):
    if request.param == "file":
        return f"file://{tmp_path / 'runs'}"
    return f"sqlite://{tmp_path / 'db' / 'runs.sqlite'}"


def save(store_url: str, record: RunRecord) -> None:
    store = parse_store_url(store_url).open()
    try:
        with store.acquire(record.run_id) as session:
            session.save(record, 0)
    finally:
        store.close()


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def invoke(runner: CliRunner, *args: str):
    return runner.invoke(cli, list(args), catch_exceptions=False)


# covers: E-2
def test_inspect_shows_metadata_and_never_a_business_value(runner, store_url):
    save(store_url, make_record("run-1", shard_state=AttemptState.ACTIVE, merge_done=False))
    result = invoke(runner, "inspect", "--store", store_url, "run-1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "run        run-1" in out
    assert "revision   1" in out
    assert "version    v7" in out
    assert "status     incomplete" in out
    assert "confirmed 1: list" in out
    assert "active    shard  root 1/1" in out
    assert "failed    shard  retry at 0 1/3" in out
    assert "lines group 'g': generation 2, sent 5, acked through 3" in out
    assert "list.lines writer: generation 2, sent 5" in out
    assert "group ''" not in out
    for secret in (SECRET, base64.b64encode(json.dumps(SECRET).encode()).decode()):
        assert secret not in out


# covers: E-2
def test_inspect_json(runner, store_url):
    save(store_url, make_record("run-1", shard_state=None, merge_done=True))
    result = invoke(runner, "inspect", "--store", store_url, "run-1", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["run_id"] == "run-1"
    assert (data["format"], data["revision"], data["version"]) == (2, 1, "v7")
    assert data["attempts"] == {"active": 0, "failed": 0, "confirmed": 4}
    assert data["status"] == "settled"  # no graph given: completed or between two nodes
    assert [(s["path"], s["confirmed"]) for s in data["scopes"]] == [
        ("", ["list", "merge", "shard"]),
        ("merge", ["render"]),
    ]
    assert data["nodes_confirmed"] == 4
    assert SECRET not in result.stdout


# covers: E-2
def test_inspect_never_saves(runner, store_url, tmp_path):
    save(store_url, make_record("run-1", shard_state=AttemptState.ACTIVE, merge_done=False))
    before = sorted((p.name, p.read_bytes()) for p in tmp_path.rglob("*.json"))
    for _ in range(2):
        assert invoke(runner, "inspect", "--store", store_url, "run-1").exit_code == 0
    after = sorted((p.name, p.read_bytes()) for p in tmp_path.rglob("*.json"))
    assert before == after
    store = parse_store_url(store_url).open()
    try:
        with store.acquire("run-1") as session:
            assert session.load().revision == 1
    finally:
        store.close()


# covers: E-2, R-STORE-2
def test_inspect_of_a_missing_run_says_not_found(runner, store_url):
    save(store_url, make_record("run-1", shard_state=None, merge_done=True))
    result = invoke(runner, "inspect", "--store", store_url, "run-2")
    assert result.exit_code == ExitCode.NOT_FOUND
    assert "no record of run 'run-2'" in result.stderr
    assert "check the store location and the run id" in result.stderr
    assert "does not mean the run finished" in result.stderr


HOLDER = """
import sys, time
from durable_core.config import parse_store_url
store = parse_store_url(sys.argv[1]).open()
session = store.acquire(sys.argv[2])
print("held", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def hold(tmp_path):
    """Hold a run's session in another process until the test ends."""
    procs = []

    def start(url: str, run_id: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, url, run_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for proc in procs:
        proc.stdin.close()
        proc.wait(timeout=30)


# covers: E-2, R-STORE-1
def test_inspect_of_a_run_owned_elsewhere_is_busy_at_once(runner, store_url, hold):
    save(store_url, make_record("run-1", shard_state=None, merge_done=True))
    holder = hold(store_url, "run-1")
    # The holder keeps the run for the whole call: a store that waited for the owner would
    # never return (the bound turns that into a failure instead of a hang).
    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(invoke, runner, "inspect", "--store", store_url, "run-1")
        try:
            result = call.result(timeout=300)
        except TimeoutError:
            holder.stdin.close()  # let the waiting call end
            pytest.fail("inspect waited for the run's owner instead of saying it is busy")
    assert holder.poll() is None  # still the owner when the answer came
    assert result.exit_code == ExitCode.BUSY
    assert "is busy" in result.stderr and "owned by another session" in result.stderr
    assert "never delete the lock file" in result.stderr


def test_list_shows_each_run_with_its_status(runner, store_url, hold):
    save(store_url, make_record("a-active", shard_state=AttemptState.ACTIVE, merge_done=False))
    save(store_url, make_record("b-failed", shard_state=AttemptState.FAILED, merge_done=False))
    save(store_url, make_record("c-done", shard_state=None, merge_done=True))
    save(store_url, make_record("d-held", shard_state=None, merge_done=True))
    hold(store_url, "d-held")
    result = invoke(runner, "list", "--store", store_url, "--json")
    assert result.exit_code == 0, result.output
    rows = {r["run_id"]: r for r in json.loads(result.stdout)}
    assert {k: r["status"] for k, r in rows.items()} == {
        "a-active": "incomplete",
        "b-failed": "failed",
        "c-done": "settled",
        "d-held": "running",
    }
    assert rows["c-done"]["revision"] == 1
    text = invoke(runner, "list", "--store", store_url)
    assert text.exit_code == 0
    lines = text.stdout.splitlines()
    assert lines[0].split() == [
        *("RUN", "ID", "STATUS", "REVISION", "FORMAT", "CONFIRMED"),
        *("CREATED", "SAVED", "DURATION"),
    ]
    active = next(line for line in lines if line.startswith("a-active"))
    assert active.split()[:5] == ["a-active", "incomplete", "1", "2", "1"]


GRAPH = """
from durable_core.graph import Graph, Key
A, B, C = Key("files", str), Key("part", str), Key("total", str)
graph = Graph("demo")
graph.add_node("list", lambda rc: rc.set(A, "x"), provides=[A])
graph.add_node("shard", lambda rc: rc.set(B, "x"), requires=[A], provides=[B])
graph.add_node("merge", lambda rc: rc.set(C, "x"), requires=[B], provides=[C])
"""


# covers: E-2
def test_list_with_a_config_judges_only_its_own_runs_against_the_graph(
    runner, tmp_path, monkeypatch
):
    """A store holding runs of several graphs: a run whose definition is not the config's is
    shown as such and counted from its own record, never as "3 of 3" of the wrong graph."""
    (tmp_path / "listgraph_mod.py").write_text(textwrap.dedent(GRAPH))
    config = tmp_path / "run.toml"
    config.write_text(
        'graph = "listgraph_mod:graph"\nrun_id = "c-done"\nversion = "v7"\n'
        '[store]\nbackend = "file"\ndirectory = "runs"\n'
    )
    url = f"file://{tmp_path / 'runs'}"
    monkeypatch.syspath_prepend(str(tmp_path))
    import listgraph_mod

    fingerprint = listgraph_mod.graph.fingerprint()
    between = make_record("a-between", shard_state=None, merge_done=False)
    between.definition = fingerprint
    save(url, between)
    # another graph's run: 3 root nodes confirmed plus a Sub scope the config's graph lacks
    save(url, make_record("b-other", shard_state=None, merge_done=True))
    done = make_record("c-done", shard_state=None, merge_done=True, sub=False)
    done.definition = fingerprint
    save(url, done)
    monkeypatch.chdir("/")
    try:
        result = invoke(runner, "list", str(config), "--json")
        assert result.exit_code == 0, result.output
        rows = {r["run_id"]: r for r in json.loads(result.stdout)}
        assert rows["a-between"]["status"] == "incomplete"
        assert rows["a-between"]["root_nodes_confirmed"] == 2
        assert rows["a-between"]["root_nodes_total"] == 3
        assert rows["a-between"]["definition_matches"] is True
        assert rows["b-other"]["definition_matches"] is False
        assert rows["b-other"]["status"] == "settled"  # judged from its own record
        assert rows["b-other"]["root_nodes_confirmed"] == 3
        assert rows["b-other"]["root_nodes_total"] is None
        assert rows["b-other"]["error"] is None
        assert rows["c-done"]["definition_matches"] is True
        assert rows["c-done"]["status"] == "completed"
        inspected = invoke(runner, "inspect", str(config))  # the config's run id
        assert inspected.exit_code == 0, inspected.output
        assert "status     completed (3 of 3 root nodes confirmed)" in inspected.stdout
        assert "(matches the graph)" in inspected.stdout
        other = invoke(runner, "inspect", str(config), "b-other")
        assert other.exit_code == 0, other.output
        assert "status     settled (3 root nodes confirmed; judged from the record alone" in (
            other.stdout
        )
        assert "of 3 root nodes" not in other.stdout
        assert "(differs from the graph)" in other.stdout
        table = invoke(runner, "list", str(config)).stdout.splitlines()
        assert table[0].split()[-4:] == ["DEFINITION", "CREATED", "SAVED", "DURATION"]
        by_id = {line.split()[0]: line.split() for line in table[1:]}
        assert by_id["a-between"][:6] == ["a-between", "incomplete", "1", "2", "2/3", "matches"]
        assert by_id["b-other"][:6] == ["b-other", "settled", "1", "2", "3", "differs"]
    finally:
        sys.modules.pop("listgraph_mod", None)


def test_list_of_an_empty_store(runner, tmp_path):
    (tmp_path / "empty").mkdir()
    result = invoke(runner, "list", "--store", f"file://{tmp_path / 'empty'}")
    assert result.exit_code == 0
    assert "no runs in the file store" in result.stdout


# covers: E-2, E-1
@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["inspect", "some-run"],
        ["prune", "--finished"],
        ["delete", "some-run"],
        ["delete", "--yes", "some-run"],
    ],
)
@pytest.mark.parametrize(
    "url", ["file://{tmp}/typo-dir", "sqlite://{tmp}/typo-dir/runs.sqlite", "sqlite://{tmp}/x.db"]
)
def test_reading_and_removing_commands_never_create_a_missing_store(runner, tmp_path, command, url):
    before = sorted(tmp_path.iterdir())
    result = invoke(runner, command[0], "--store", url.format(tmp=tmp_path), *command[1:])
    assert result.exit_code == ExitCode.NOT_FOUND, result.output
    assert "there is no" in result.stderr and "never creates a store" in result.stderr
    assert "inspect and list" not in result.stderr
    assert sorted(tmp_path.iterdir()) == before


def test_list_shows_an_unreadable_record_with_its_location(runner, tmp_path):
    url = f"file://{tmp_path / 'runs'}"
    save(url, make_record("ok-run", shard_state=None, merge_done=True))
    record_file = next((tmp_path / "runs").glob("*.json"))
    broken = record_file.with_name("0" * 64 + ".json")
    broken.write_bytes(b"{not json")
    result = invoke(runner, "list", "--store", url, "--json")
    assert result.exit_code == ExitCode.CORRUPT, result.output  # a script learns of it
    rows = json.loads(result.stdout)
    bad = [r for r in rows if r["status"] == "unreadable"]
    assert len(bad) == 1
    assert bad[0]["location"] == str(broken)
    assert bad[0]["error"] and all(r["error"] is None for r in rows if r is not bad[0])
    table = invoke(runner, "list", "--store", url)
    assert table.exit_code == ExitCode.CORRUPT, table.output
    assert bad[0]["error"] not in table.stdout  # the reason is not in the table...
    assert f"{broken}: unreadable: " in table.stderr  # ...but right after it
    unnamed = next(line for line in table.stdout.splitlines() if line.startswith("?"))
    assert unnamed.startswith("? (…") and str(broken) not in unnamed  # the path is below
    widths = {len(line.split("  ")[0]) for line in table.stdout.splitlines()[1:]}
    assert max(widths) <= 24  # an unreadable record does not widen the RUN ID column
    assert broken.read_bytes() == b"{not json"  # evidence kept


def test_default_store_honours_durable_home(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("DURABLE_HOME", str(tmp_path))
    save(f"file://{tmp_path / 'runs'}", make_record("home-run", shard_state=None, merge_done=True))
    result = invoke(runner, "list", "--json")
    assert result.exit_code == 0, result.output
    assert [r["run_id"] for r in json.loads(result.stdout)] == ["home-run"]
    result = invoke(runner, "inspect", "home-run")
    assert result.exit_code == 0, result.output
    assert "run        home-run" in result.stdout


# covers: E-2 (--run-id works for inspect as for run and resume)
def test_inspect_takes_the_run_id_as_an_option_too(runner, store_url):
    save(store_url, make_record("run-7", shard_state=None, merge_done=True))
    positional = invoke(runner, "inspect", "--store", store_url, "run-7", "--json")
    option = invoke(runner, "inspect", "--store", store_url, "--run-id", "run-7", "--json")
    assert positional.exit_code == option.exit_code == 0, option.output
    assert json.loads(option.stdout)["run_id"] == "run-7"
    assert json.loads(option.stdout) == json.loads(positional.stdout)
    both = invoke(runner, "inspect", "--store", store_url, "run-7", "--run-id", "run-7")
    assert both.exit_code == 2
