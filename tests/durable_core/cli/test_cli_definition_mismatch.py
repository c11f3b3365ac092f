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
    shown = ops.invoke("log", "ops-1")
    assert shown.exit_code == 0, shown.output
    line = next(text for text in shown.stdout.splitlines() if " definition " in text)
    assert "3 nodes" in line and "fingerprint " in line
