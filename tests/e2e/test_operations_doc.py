"""docs/operations.md, followed step by step on a copy of examples/operations."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from durable_core.cli import ExitCode, cli

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def example(tmp_path, monkeypatch):
    folder = tmp_path / "operations"
    # only the example as shipped: a reader who followed the guide in the checkout left runs
    # in .durable/ and maybe the files broken and hold, which would change every step here
    left_by_a_reader = shutil.ignore_patterns(".durable", "broken", "hold", "__pycache__")
    shutil.copytree(ROOT / "examples" / "operations", folder, ignore=left_by_a_reader)
    monkeypatch.chdir(folder)
    sys.modules.pop("pricing", None)
    yield folder
    sys.modules.pop("pricing", None)


def test_the_operations_guide_works_as_written(example):
    runner = CliRunner()

    def durable(*args: str, code: int = 0) -> str:
        result = runner.invoke(cli, list(args))
        assert result.exit_code == code, (args, result.output)
        return result.stdout

    assert "invoice = '3 items: 45.00'" in durable("run", "pricing.toml")
    table = durable("list", "pricing.toml").splitlines()
    row = table[1].split()
    assert (row[:2], row[3:6]) == (["order-1", "completed"], ["2", "3/3", "matches"])
    durable("inspect", "pricing.toml", "order-1")
    assert (
        durable("show", "pricing.toml", "order-1", "subtotal") == "subtotal = Money(cents=3750)\n"
    )
    assert durable("show", "pricing.toml", "order-1", "invoice", "invoice") == "'3 items: 45.00'\n"
    durable("show", "pricing.toml", "order-1", "subtotal", "--json")
    durable(
        "show", "--store", "sqlite:.durable/runs.sqlite", "order-1", "subtotal", code=ExitCode.ERROR
    )
    assert (
        json.loads(durable("run", "pricing.toml", "--resume-if-exists", "--json"))["command"]
        == "resume"
    )
    durable(
        "run",
        "pricing.toml",
        "--run-id",
        "big-order",
        "--input",
        "quantity=1000",
        "--max-running",
        "2",
    )
    (example / "broken").touch()
    durable("run", "pricing.toml", "--run-id", "order-2", code=ExitCode.RUN_FAILED)
    (example / "broken").unlink()
    durable("resume", "pricing.toml", "--run-id", "order-2", code=ExitCode.RUN_FAILED)
    assert "invoice = '3 items: 45.00'" in durable(
        "fork", "pricing.toml", "order-2", "--new-run-id", "order-2b"
    )
    log = durable("log", "pricing.toml", "order-2")
    assert "attempt_failed" in log and "the invoice printer is broken" in log
    assert "last failure of each node" in durable("inspect", "pricing.toml", "order-2")
    durable("log", "pricing.toml", "order-2b", "--follow")
    assert "revision" in durable("inspect", "pricing.toml", "order-1", "--peek")
    assert "nothing to cancel" in durable("cancel", "pricing.toml", "order-1")
    # section 6: a running run, watched and canceled from another process
    (example / "hold").touch()
    owner = subprocess.Popen(
        [sys.executable, "-m", "durable_core", "run", "pricing.toml", "--run-id", "order-3"],
        cwd=example,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while runner.invoke(cli, ["inspect", "pricing.toml", "order-3", "--peek"]).exit_code:
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.1)
        durable("inspect", "pricing.toml", "order-3", code=ExitCode.BUSY)
        peeked = durable("inspect", "pricing.toml", "order-3", "--peek")
        assert "incomplete (0 of 3 root nodes confirmed)" in peeked
        assert "asked the owner of run 'order-3' to stop" in durable(
            "cancel", "pricing.toml", "order-3"
        )
        # the owner polls for the request (a marker file next to the run locks) and removes it
        # once seen; only then may the held node return, as in the guide (a person is slower)
        while list((example / ".durable" / ".runlocks").glob("*.cancel")):
            assert time.monotonic() < deadline + 60, "the owner did not see the request"
            time.sleep(0.05)
    finally:
        (example / "hold").unlink()
        out, err = owner.communicate(timeout=120)
    assert owner.returncode == ExitCode.RUN_FAILED, err
    assert "run 'order-3' canceled after" in out
    assert "canceled on request ('durable cancel')" in err
    assert "durable resume pricing.toml --run-id order-3" in err
    assert "completed" in durable("resume", "pricing.toml", "--run-id", "order-3")
    assert "deleted run 'big-order'" in durable("delete", "pricing.toml", "big-order", "--yes")
    assert "would delete" in durable("prune", "pricing.toml", "--finished", "--dry-run")
    durable("prune", "pricing.toml", "--finished", "--yes")
    assert durable("list", "pricing.toml").startswith("no runs")
    durable(
        "prune",
        "--store",
        f"file://{example}/nowhere",
        "--finished",
        "--older-than",
        "7d",
        "--yes",
        code=ExitCode.NOT_FOUND,
    )
    durable("run", "pricing.toml")
    assert "copied run 'order-1'" in durable(
        "migrate", "--from", "sqlite:.durable/runs.sqlite", "--to", "file:.durable/runs"
    )
    migrated = durable("list", "--store", "file:.durable/runs").splitlines()
    assert migrated[1].split()[:5] == ["order-1", "settled", "4", "2", "3"]
    error = json.loads(durable("inspect", "pricing.toml", "nope", "--json", code=4))
    assert error["type"] == "NotFoundError" and error["exit"] == 4
