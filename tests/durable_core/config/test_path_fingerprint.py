"""``{ path = … }`` inputs in the input fingerprint: relative to the configuration's folder when
under it, so that a project folder can be moved or cloned and its runs still resume.

Real file stores in real folders; moving a project is a real copy of its files and store
(``shutil.copytree``). The subprocess crash-and-move test of the ``durable`` command is in
tests/e2e/test_moved_project.py.
"""

from __future__ import annotations

import pathlib
import shutil
import textwrap

import pytest

from durable_core import Codecs, InputsMismatchError, Runtime
from durable_core.config import load_config
from durable_core.config.inputs import PathInput, input_identity, parse_input_override
from durable_core.durable import fork_run
from durable_core.graph import CancelToken, Graph, Key

DATA = Key("data", str)
WHERE = Key("where", pathlib.Path)  # no default codec: only for input_identity
OUT = Key("out", str)
N = Key("n", int)
LOADED = Key("loaded", str)
REPORT = Key("report", str)


def make_graph(cancel: list[CancelToken]) -> Graph:
    """``load`` reads ``data/input.txt``; ``report`` writes ``out/report.txt`` and returns its
    path; the first time ``report`` runs while ``cancel`` holds a token, the run is canceled
    (it stays resumable)."""
    graph = Graph("moved", inputs=[DATA, OUT, N])

    def called(rc, name):
        with open(pathlib.Path(rc.get(OUT)) / "calls.txt", "a") as f:
            f.write(name + "\n")

    @graph.node("load", requires=[DATA, OUT], provides=[LOADED])
    def load(rc):
        called(rc, "load")
        rc.set(LOADED, (pathlib.Path(rc.get(DATA)) / "input.txt").read_text())

    @graph.node("report", requires=[LOADED, OUT, N], provides=[REPORT])
    def report(rc):
        called(rc, "report")
        if cancel:
            cancel.pop().cancel()
            return
        target = pathlib.Path(rc.get(OUT)) / "report.txt"
        target.write_text(rc.get(LOADED) * rc.get(N))
        rc.set(REPORT, str(target))

    return graph


def make_project(folder: pathlib.Path) -> pathlib.Path:
    (folder / "data").mkdir(parents=True)
    (folder / "out").mkdir()
    (folder / "data" / "input.txt").write_text("ab")
    config = folder / "run.toml"
    config.write_text(
        textwrap.dedent(
            """
            graph = "not_imported:graph"
            run_id = "r1"
            version = "1"

            [inputs]
            data = { path = "data" }
            out = { path = "./out/../out" }
            n = 2

            [store]
            backend = "file"
            directory = "runs"
            """
        )
    )
    return config


def calls(folder: pathlib.Path) -> list[str]:
    return (folder / "out" / "calls.txt").read_text().split()


def start(config_path: pathlib.Path, graph: Graph, *, identity: bool, run_id: str = "r1"):
    """Start the run and cancel it inside ``report``: ``load`` is confirmed."""
    config = load_config(config_path)
    token = CancelToken()
    graph_cancel.append(token)
    store = config.open_store()
    try:
        result = Runtime(store, Codecs.default()).run(
            graph,
            run_id=run_id,
            version="1",
            inputs=config.resolve_inputs(graph),
            cancel=token,
            input_identity=config.input_identity(graph) if identity else None,
        )
    finally:
        store.close()
    assert result.status == "canceled", result.error


def resume(config_path: pathlib.Path, graph: Graph, run_id: str = "r1"):
    config = load_config(config_path)
    store = config.open_store()
    try:
        return Runtime(store, Codecs.default()).resume(
            graph,
            run_id=run_id,
            version="1",
            inputs=config.resolve_inputs(graph),
            input_identity=config.input_identity(graph),
        )
    finally:
        store.close()


graph_cancel: list[CancelToken] = []
GRAPH = make_graph(graph_cancel)


@pytest.fixture(autouse=True)
def _no_pending_cancel():
    graph_cancel.clear()
    yield
    graph_cancel.clear()


def test_identity_is_the_path_relative_to_the_config_folder(tmp_path):
    # covers: R-REC-2
    config = load_config(make_project(tmp_path / "p"))
    identity = {key.name: value for key, value in config.input_identity(GRAPH).items()}
    assert identity == {"data": "data", "out": "out"}  # '..' normalized
    values = {key.name: value for key, value in config.resolve_inputs(GRAPH).items()}
    assert values["data"] == str(tmp_path / "p" / "data")  # the graph still gets the absolute path
    assert values["out"] == str(tmp_path / "p" / "out" / ".." / "out")


def test_identity_leaves_paths_outside_the_folder_and_other_inputs_alone(tmp_path):
    base = tmp_path / "p"
    graph = Graph("g", inputs=[WHERE, OUT, N])
    inputs = {
        "where": PathInput(str(base / "sub" / "d")),  # absolute, but under the folder
        "out": PathInput("../elsewhere"),  # outside the folder
        "n": PathInput("."),  # the folder itself (the key's type does not matter here)
    }
    identity = {k.name: v for k, v in input_identity(inputs, graph, base).items()}
    assert identity == {"where": pathlib.Path("sub/d"), "n": "."}
    name, source = parse_input_override(f"where={base / 'x'}", graph, tmp_path)
    assert input_identity({name: source}, graph, base) == {WHERE: pathlib.Path("x")}


def test_runtime_accepts_the_fingerprint_with_or_without_the_stand_ins(tmp_path):
    # covers: R-REC-3
    config_store = load_config(make_project(tmp_path)).open_store()
    runtime = Runtime(config_store, Codecs.default())
    try:
        inputs = {DATA: str(tmp_path / "data"), OUT: str(tmp_path / "out"), N: 2}
        stand_ins = {DATA: "data", OUT: "out"}
        with_ids = runtime.input_fingerprints(GRAPH, inputs, stand_ins)
        moved = {DATA: str(tmp_path / "x" / "data"), OUT: str(tmp_path / "x" / "out"), N: 2}
        assert len(with_ids) == 2
        assert with_ids[0] == runtime.input_fingerprints(GRAPH, moved, stand_ins)[0]
        assert with_ids[1] == runtime.input_fingerprints(GRAPH, inputs)[0]
        assert with_ids[0] != with_ids[1]
        other = {**stand_ins, N: 3}
        assert runtime.input_fingerprints(GRAPH, inputs, other)[0] != with_ids[0]
    finally:
        config_store.close()


def test_a_copied_project_resumes_without_running_confirmed_nodes_again(tmp_path):
    # covers: R-REC-3
    first = tmp_path / "first"
    start(make_project(first), GRAPH, identity=True)
    assert calls(first) == ["load", "report"]
    second = tmp_path / "clone" / "second"
    shutil.copytree(first, second)
    shutil.rmtree(first)  # the old absolute paths exist no more
    result = resume(second / "run.toml", GRAPH)
    assert result.status == "completed", result.error
    assert calls(second) == ["load", "report", "report"]  # load restored, not run
    assert result.result[REPORT] == str(second / "out" / ".." / "out" / "report.txt")
    assert (second / "out" / "report.txt").read_text() == "abab"


def test_a_run_fingerprinted_with_absolute_paths_resumes_in_its_own_folder(tmp_path):
    # A run started without input_identity, as every run was before path inputs were
    # fingerprinted relative to the config's folder. covers: R-REC-3
    first = tmp_path / "first"
    start(make_project(first), GRAPH, identity=False)
    result = resume(first / "run.toml", GRAPH)
    assert result.status == "completed", result.error
    assert calls(first) == ["load", "report", "report"]


def test_a_moved_run_fingerprinted_with_absolute_paths_is_refused_and_can_be_forked(tmp_path):
    # covers: R-REC-3
    first = tmp_path / "first"
    config = make_project(first)
    start(config, GRAPH, identity=False)
    second = tmp_path / "second"
    shutil.copytree(first, second)
    with pytest.raises(InputsMismatchError, match="resume such a run from its original folder"):
        resume(second / "run.toml", GRAPH)
    # forked in its own folder, the new run gets the relative fingerprint and moves freely
    loaded = load_config(config)
    store = loaded.open_store()
    token = CancelToken()
    graph_cancel.append(token)
    try:
        forked = fork_run(
            Runtime(store, Codecs.default()),
            GRAPH,
            run_id="r1",
            new_run_id="r1-fork",
            version="1",
            inputs=loaded.resolve_inputs(GRAPH),
            input_identity=loaded.input_identity(GRAPH),
            cancel=token,
        )
    finally:
        store.close()
    assert forked.status == "canceled"
    third = tmp_path / "third"
    shutil.copytree(first, third)
    result = resume(third / "run.toml", GRAPH, run_id="r1-fork")
    assert result.status == "completed", result.error
    assert calls(third) == ["load", "report", "report", "report"]  # load copied, not run
