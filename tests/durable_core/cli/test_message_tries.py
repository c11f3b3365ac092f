"""A processor's failed message tries: in the run log with their sequence, counted as
retries, and a poison message's error naming its sequence and its tries."""

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
import pathlib

from durable_core import Graph, Key, Retry

LIMIT = Key("limit", int)
POISON = Key("poison", int)
NUMBERS = Key("numbers", int, stream=True)
TOTAL = Key("total", int)
graph = Graph("fold", inputs=[LIMIT, POISON])
SEEN = pathlib.Path(__file__).with_name("seen.txt")


@graph.node("produce", requires=[LIMIT], provides=[NUMBERS])
async def produce(rc):
    w = rc.writer(NUMBERS)
    for n in range((w.position or 0) + 1, rc.get(LIMIT) + 1):
        await w.send_at(n, n)


@graph.processor(
    "fold",
    input=NUMBERS,
    requires=[POISON],
    state=int,
    initial=0,
    provides=[TOTAL],
    retry=Retry(3),
    commit_every=4,
)
def fold(rc, state, n):
    with SEEN.open("a") as f:
        f.write(f"{n}\\n")
    tries = SEEN.read_text().split().count(str(n))
    if n == rc.get(POISON) or (n % 7 == 0 and tries == 1):
        raise ValueError(f"cannot fold {n}")
    return state + n


@fold.finish
def done(rc, state):
    rc.set(TOTAL, state)
"""


@pytest.fixture(params=["file", "sqlite"])
def project(request, tmp_path, monkeypatch):
    module = f"fold_{next(_counter)}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(GRAPH))
    store = (
        '[store]\nbackend = "file"\ndirectory = "runs"\n'
        if request.param == "file"
        else '[store]\nbackend = "sqlite"\npath = "runs.sqlite"\n'
    )
    (tmp_path / "fold.toml").write_text(
        # a run id of its own: the run log is kept by run id, for the whole test session
        f'graph = "{module}:graph"\nrun_id = "{module}"\nversion = "1"\n\n'
        f"[inputs]\nlimit = 30\npoison = 0\n\n{store}"
    )
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop(module, None)


def test_each_failed_message_try_is_logged_with_its_sequence_and_counted(project):
    runner = CliRunner()
    done = runner.invoke(cli, ["run", "fold.toml", "--json"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout)
    assert summary["outputs"]["total"] == sum(range(1, 31))
    assert summary["retries"] == 4  # messages 7, 14, 21 and 28 needed a second try
    entries = [
        json.loads(line)
        for line in runner.invoke(cli, ["log", "fold.toml", "--json"]).stdout.splitlines()
    ]
    failed = [e for e in entries if e["event"] == "message_failed"]
    assert [(e["sequence"], e["attempt"]) for e in failed] == [
        (7, "1/3"),
        (14, "1/3"),
        (21, "1/3"),
        (28, "1/3"),
    ]
    assert all(
        e["node"] == "fold" and e["error"] == f"ValueError: cannot fold {e['sequence']}"
        for e in failed
    )
    assert all(e["where"].endswith(" in fold") for e in failed)
    text = runner.invoke(cli, ["log", "fold.toml"]).stdout
    assert "message_failed   fold  message 7  try 1/3" in text
    # a completed processor keeps no message attempts in the record: the log holds its tries


def test_a_poison_message_names_its_sequence_and_its_tries(project):
    runner = CliRunner()
    failed = runner.invoke(cli, ["run", "fold.toml", "--input", "poison=12"])
    assert failed.exit_code == ExitCode.RUN_FAILED, failed.output
    assert (
        "node 'fold' failed on message 12 of 'numbers' after 3 tries: ValueError: cannot fold 12"
        in failed.stderr
    )
    entries = [
        json.loads(line)
        for line in runner.invoke(cli, ["log", "fold.toml", "--json"]).stdout.splitlines()
    ]
    poison = [e for e in entries if e["event"] == "message_failed" and e["sequence"] == 12]
    assert [e["attempt"] for e in poison] == ["1/3", "2/3", "3/3"]
    assert (project / "seen.txt").read_text().split().count("12") == 3
    shown = json.loads(runner.invoke(cli, ["inspect", "fold.toml", "--json"]).stdout)
    assert shown["retries"] >= 2  # message 12's second and third tries, kept in the record
