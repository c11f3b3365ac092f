"""``durable resume`` refused after a definition change names what changed (real file, SQLite
and PostgreSQL stores): in the message on stderr, and under ``details`` with ``--json``."""

from __future__ import annotations

import json
import sys

import pytest

from durable_core.cli import ExitCode

TOTAL_NODE = """@graph.node("total", requires=[PRICE, BROKEN, CALLS], provides=[TOTAL])
def total(rc):"""


@pytest.fixture(autouse=True)
def logs(tmp_path, monkeypatch):
    folder = tmp_path / "logs"
    monkeypatch.setenv("DURABLE_LOG_DIR", str(folder))
    return folder


def failed_run(ops) -> None:
    (ops.folder / "broken").touch()
    assert ops.invoke("run", ops.config).exit_code == ExitCode.RUN_FAILED


def edit(ops, old: str, new: str) -> None:
    module = ops.folder / f"{ops.module}.py"
    text = module.read_text()
    assert old in text
    module.write_text(text.replace(old, new))
    sys.modules.pop(ops.module, None)


def refusal(ops) -> dict:
    result = ops.invoke("resume", ops.config, "--json")
    assert result.exit_code == ExitCode.CONFLICT, result.output
    assert "error (DefinitionMismatchError)" in result.stderr
    assert f"durable fork {ops.config} ops-1 --new-run-id NEW" in result.stderr
    error = json.loads(result.stdout)
    assert error["type"] == "DefinitionMismatchError" and error["exit"] == ExitCode.CONFLICT
    return error


def test_a_changed_node_is_named(ops):
    failed_run(ops)
    edit(ops, TOTAL_NODE, TOTAL_NODE.replace("requires=[PRICE,", "requires=[N, PRICE,"))
    error = refusal(ops)
    assert error["details"]["changed"] == ["total"]
    assert error["details"]["added"] == [] and error["details"]["removed"] == []
    assert error["details"]["complete"] is True
    assert "nodes changed (requires, provides, aspects or bindings): 'total'" in error["error"]


def test_an_added_node_is_named(ops):
    failed_run(ops)
    module = ops.folder / f"{ops.module}.py"
    module.write_text(
        module.read_text()
        + '\nEXTRA = Key("extra", int)\n\n\n@graph.node("extra", requires=[TOTAL], '
        "provides=[EXTRA])\ndef extra(rc):\n    rc.set(EXTRA, rc.get(TOTAL) * 10)\n"
    )
    sys.modules.pop(ops.module, None)
    details = refusal(ops)["details"]
    assert (details["added"], details["removed"], details["changed"]) == (["extra"], [], [])
    assert details["keys"] == ["extra"]


def test_a_removed_node_is_named(ops):
    failed_run(ops)
    edit(ops, TOTAL_NODE, TOTAL_NODE.replace("@graph.node(", "@_unused_graph.node("))
    edit(ops, 'graph = Graph("ops"', '_unused_graph = Graph("unused")\ngraph = Graph("ops"')
    details = refusal(ops)["details"]
    assert (details["added"], details["removed"], details["changed"]) == ([], ["total"], [])


def test_without_a_run_log_the_record_is_what_is_known(ops, monkeypatch, logs):
    monkeypatch.setenv("DURABLE_BLOCK_PLUGINS", "runlog")
    failed_run(ops)
    assert not logs.exists()
    edit(ops, TOTAL_NODE, TOTAL_NODE.replace("@graph.node(", "@_unused_graph.node("))
    edit(ops, 'graph = Graph("ops"', '_unused_graph = Graph("unused")\ngraph = Graph("ops"')
    error = refusal(ops)
    assert error["details"]["complete"] is False
    assert error["details"]["removed"] == ["total"]  # its failed attempt is in the record
    assert "Other changes are not known" in error["error"]


def test_durable_log_shows_the_definition_line(ops):
    failed_run(ops)
    shown = ops.invoke("log", ops.config)
    assert shown.exit_code == 0, shown.output
    line = next(text for text in shown.stdout.splitlines() if " definition " in text)
    assert "3 nodes" in line and "fingerprint " in line


# covers: E-2, R-REC-2
def test_inspect_names_what_changed_since_the_run_started(ops):
    failed_run(ops)
    edit(ops, TOTAL_NODE, TOTAL_NODE.replace("requires=[PRICE,", "requires=[N, PRICE,"))
    shown = ops.invoke("inspect", ops.config)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    at = next(i for i, text in enumerate(lines) if text.startswith("definition "))
    assert lines[at].endswith("(differs from the graph)")
    assert lines[at + 1] == (
        "changes    nodes changed (requires, provides, aspects or bindings): 'total'"
    )
    changes = ops.json("inspect", ops.config)["definition_changes"]
    assert changes["changed"] == ["total"] and changes["added"] == changes["removed"] == []
    assert changes["complete"] is True
    # a run of the graph as it is now has nothing to explain
    assert ops.invoke("run", ops.config, "--run-id", "ops-2").exit_code == ExitCode.RUN_FAILED
    assert ops.json("inspect", ops.config, "ops-2")["definition_changes"] is None
    # without a CONFIG there is no graph to compare with
    assert ops.json("inspect", "ops-1", "--store", ops.store_url)["definition_changes"] is None


# covers: E-2, R-REC-2
def test_inspect_without_a_run_log_says_what_the_record_shows(ops, monkeypatch):
    monkeypatch.setenv("DURABLE_BLOCK_PLUGINS", "runlog")
    failed_run(ops)
    edit(ops, TOTAL_NODE, TOTAL_NODE.replace("@graph.node(", "@_unused_graph.node("))
    edit(ops, 'graph = Graph("ops"', '_unused_graph = Graph("unused")\ngraph = Graph("ops"')
    shown = ops.invoke("inspect", ops.config)
    assert shown.exit_code == 0, shown.output
    assert "changes    nodes it holds that the graph no longer has: 'total'" in shown.stdout
    assert "other changes are not known" in shown.stdout
    changes = ops.json("inspect", ops.config)["definition_changes"]
    assert (changes["removed"], changes["complete"]) == (["total"], False)
