"""A ``resume`` refused because the inputs differ names the input that changed, from the
per-input fingerprints the run's history keeps (real file, SQLite and PostgreSQL stores), and
says what it said before when the history has none."""

from __future__ import annotations

import json
import re

from durable_core.cli import ExitCode


def refused(ops, *args: str) -> str:
    result = ops.invoke("resume", ops.config, *args)
    assert result.exit_code == ExitCode.CONFLICT, result.output
    assert result.stderr.startswith("error (InputsMismatchError): ")
    return result.stderr


# covers: R-REC-3, X-HIST
def test_resume_with_another_input_names_it(ops):
    assert ops.invoke("run", ops.config).exit_code == 0
    message = refused(ops, "--input", "n=22")
    assert "differ from those it was started with: input 'n' differs" in message
    assert "'calls'" not in message and "'broken'" not in message
    both = refused(ops, "--input", "n=22", "--input", "broken=elsewhere")
    assert "inputs 'broken', 'n' differ" in both
    # the history keeps fingerprints only, never the values
    entries = [
        json.loads(x) for x in ops.invoke("log", ops.config, "--json").stdout.split("\n") if x
    ]
    (inputs,) = [e for e in entries if e["event"] == "inputs"]
    assert sorted(inputs["keys"]) == ["broken", "calls", "n"]
    assert all(re.fullmatch("[0-9a-f]{64}", v) for v in inputs["keys"].values())
    text = ops.invoke("log", ops.config).stdout
    assert f"inputs           fingerprint {inputs['inputs'][:12]}…, 3 inputs" in text
    shown = ops.invoke("resume", ops.config, "--input", "n=22", "--json")
    assert shown.exit_code == ExitCode.CONFLICT
    assert json.loads(shown.stdout)["details"] == {"changed": ["n"]}
    assert ops.invoke("resume", ops.config).exit_code == 0  # the same inputs: resumes


# covers: R-REC-3, X-HIST
def test_without_the_history_the_refusal_says_what_it_said_then_learns_on_resume(ops, monkeypatch):
    monkeypatch.setenv("DURABLE_BLOCK_PLUGINS", "runlog")  # no run log: no fingerprints kept
    assert ops.invoke("run", ops.config).exit_code == 0
    monkeypatch.delenv("DURABLE_BLOCK_PLUGINS")
    message = refused(ops, "--input", "n=22")
    assert "(their fingerprints differ: a value, or the codec id/version" in message
    assert "input 'n'" not in message
    # a resume with the original inputs keeps their fingerprints in the history from then on
    assert ops.invoke("resume", ops.config).exit_code == 0
    assert "input 'n' differs" in refused(ops, "--input", "n=22")


# covers: R-REC-3, X-HIST
def test_fork_with_another_input_names_it(ops):
    (ops.folder / "broken").touch()
    assert ops.invoke("run", ops.config).exit_code == ExitCode.RUN_FAILED
    (ops.folder / "broken").unlink()
    forked = ops.invoke("fork", ops.config, "ops-1", "--new-run-id", "ops-2", "--input", "n=22")
    assert forked.exit_code == ExitCode.CONFLICT, forked.output
    assert "was started with (input 'n' differs): a fork keeps the inputs" in forked.stderr
    assert ops.invoke("inspect", ops.config, "ops-2").exit_code == ExitCode.NOT_FOUND
