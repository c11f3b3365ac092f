"""A failing body's file and line in ``durable run``, ``log`` and ``inspect``; its traceback
with ``--debug`` and ``log --traceback``."""

from __future__ import annotations

import itertools
import json
import sys
import textwrap

import pytest
from click.testing import CliRunner

from durable_core.cli import ExitCode, cli

_counter = itertools.count()

GRAPH = """
from durable_core import Graph, Key, Retry

PRICE = Key("price", int)
graph = Graph("prices")


def lookup(table, sku):
    return table[sku]


@graph.node("price", provides=[PRICE], aspects=[Retry(2)])
def price(rc):
    rc.set(PRICE, lookup({}, "missing-sku"))
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    module = f"prices_{next(_counter)}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(GRAPH))
    (tmp_path / "prices.toml").write_text(
        f'graph = "{module}:graph"\nrun_id = "prices-1"\nversion = "1"\n\n'
        '[store]\nbackend = "sqlite"\npath = "runs.sqlite"\n'
    )
    monkeypatch.chdir(tmp_path)
    yield tmp_path, f"{tmp_path / module}.py"
    sys.modules.pop(module, None)


LINE = 9  # 'return table[sku]' in GRAPH (its first line is empty)


def test_a_failing_body_is_shown_with_its_file_and_line(project):
    _, source = project
    runner = CliRunner()
    failed = runner.invoke(cli, ["run", "prices.toml"])
    assert failed.exit_code == ExitCode.RUN_FAILED, failed.output
    assert "KeyError: 'missing-sku'" in failed.stderr
    assert f"  at {source}:{LINE} in lookup" in failed.stderr
    assert "Traceback" not in failed.stderr  # only with --debug

    log = runner.invoke(cli, ["log", "prices.toml"])
    assert log.exit_code == 0, log.output
    tries = [line for line in log.stdout.splitlines() if line.strip().startswith("at ")]
    assert len(tries) == 3  # two Retry tries and the root attempt
    assert all(line.strip() == f"at {source}:{LINE} in lookup" for line in tries)
    assert "Traceback" not in log.stdout
    full = runner.invoke(cli, ["log", "prices.toml", "--traceback"])
    assert f'    |   File "{source}", line {LINE}, in lookup' in full.stdout
    assert "    | KeyError: 'missing-sku'" in full.stdout
    entries = [
        json.loads(line)
        for line in runner.invoke(cli, ["log", "prices.toml", "--json"]).stdout.splitlines()
    ]
    failed_tries = [e for e in entries if e["event"] == "attempt_failed"]
    assert all(e["where"] == f"{source}:{LINE} in lookup" for e in failed_tries)
    assert all("KeyError: 'missing-sku'" in e["traceback"] for e in failed_tries)

    shown = runner.invoke(cli, ["inspect", "prices.toml"])
    assert f"    at {source}:{LINE} in lookup" in shown.stdout
    data = json.loads(runner.invoke(cli, ["inspect", "prices.toml", "--json"]).stdout)
    assert data["last_failures"]["price"]["where"] == f"{source}:{LINE} in lookup"


def test_debug_prints_the_traceback_of_the_failing_body(project):
    _, source = project
    runner = CliRunner()
    failed = runner.invoke(cli, ["--debug", "run", "prices.toml"])
    assert failed.exit_code == ExitCode.RUN_FAILED, failed.output
    assert "Traceback (most recent call last):" in failed.stderr
    assert f'File "{source}", line {LINE}, in lookup' in failed.stderr
    assert f'File "{source}", line {LINE + 5}, in price' in failed.stderr
    # a resume of the failed run runs nothing: the traceback comes from the run log
    again = runner.invoke(cli, ["--debug", "resume", "prices.toml"])
    assert again.exit_code == ExitCode.RUN_FAILED, again.output
    assert f"at {source}:{LINE} in lookup (try 1/1, from the run log)" in again.stderr
    assert f'File "{source}", line {LINE}, in lookup' in again.stderr
