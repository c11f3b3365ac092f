"""The examples: their configs are valid, and their graphs compute the right thing.

The graphs run here on the plain engine (``execute``); the durable runs through the ``durable``
command are in test_cli_runs.py.
"""

from __future__ import annotations

import ast
import json
import pathlib
import sysconfig

import pytest

from durable_core.config import load_config
from durable_core.graph import execute
from durable_core.plugins import make_plugin_manager

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
CONFIGS = sorted(EXAMPLES.glob("*/*.toml"))


def test_every_example_has_a_config():
    assert {c.parent.name for c in CONFIGS} >= {"stdlib_audit", "quickstart"}


@pytest.mark.parametrize("config_path", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_example_configs_load_and_match_their_graphs(config_path):
    config = load_config(config_path)
    graph = config.load_graph()
    pm = make_plugin_manager()
    config.register_graph_module(pm)
    codecs = config.make_codecs(pm)
    inputs = config.resolve_inputs(graph)
    assert set(inputs) == set(graph.inputs)
    for key, value in inputs.items():  # every input can be stored
        codecs.encode_value(key.type, value, name=key.name)
    options = config.store.resolved_options() if config.store.backend != "postgres" else {}
    for value in options.values():  # stores live next to the example, never in the cwd
        assert pathlib.Path(value).is_relative_to(config_path.parent)


def test_quickstart_greets():
    config = load_config(EXAMPLES / "quickstart" / "quickstart.toml")
    graph = config.load_graph()
    result = execute(graph, inputs=config.resolve_inputs(graph))
    assert result.status == "completed"
    greeting = next(k for k in graph.keys.values() if k.name == "greeting")
    assert result[greeting] == "Hello, world!"


def _independent_counts(root: pathlib.Path, paths: list[str]) -> dict[str, int]:
    counts = {"files": 0, "modules": 0, "classes": 0, "functions": 0}
    for path in paths:
        counts["files"] += 1
        try:
            tree = ast.parse((root / path).read_bytes())
        except (SyntaxError, ValueError):
            continue
        counts["modules"] += 1
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                counts["classes"] += 1
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                counts["functions"] += 1
    return counts


def test_audit_graph_reports_the_stdlib_subset(tmp_path):
    config = load_config(EXAMPLES / "stdlib_audit" / "audit.toml")
    graph = config.load_graph()
    inputs = {key: value for key, value in config.resolve_inputs(graph).items()}
    by_name = {key.name: key for key in inputs}
    inputs[by_name["max_files"]] = 120
    inputs[by_name["out_dir"]] = str(tmp_path / "out")
    result = execute(graph, inputs=inputs, max_running=4)
    assert result.status == "completed", result.error
    assert sorted(pathlib.Path(p).name for p in result[graph.keys["report_files"]]) == [
        "report.json",
        "report.md",
    ]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"]).resolve()
    assert report["source"] == str(stdlib)
    files = sorted(
        p.relative_to(stdlib).as_posix()
        for p in stdlib.rglob("*.py")
        if not {"site-packages", "dist-packages", "__pycache__"} & set(p.relative_to(stdlib).parts)
    )[:120]
    expected = _independent_counts(stdlib, files)
    assert {k: report[k] for k in expected} == expected
    assert len(report["longest"]) == 10
    sizes = [f["lines"] for f in report["longest"]]
    assert sizes == sorted(sizes, reverse=True)
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert f"| {expected['files']} | {expected['modules']} |" in markdown
