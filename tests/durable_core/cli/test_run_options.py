"""``durable run --resume-if-exists``, ``--input`` and ``--max-running``, on real file, SQLite
and PostgreSQL stores."""

from __future__ import annotations

import json

from durable_core.cli import ExitCode


def test_resume_if_exists_starts_then_continues(ops):
    first = ops.json("run", ops.config, "--resume-if-exists")
    assert (first["command"], first["status"]) == ("run", "completed")
    assert ops.calls() == ["double", "price", "total"]
    again = ops.json("run", ops.config, "--resume-if-exists")
    assert (again["command"], again["status"]) == ("resume", "completed")
    assert again["restored"] == 3 and again["confirmed"] == 0
    assert ops.calls() == ["double", "price", "total"]  # nothing ran again
    refused = ops.invoke("run", ops.config)
    assert refused.exit_code == ExitCode.CONFLICT
    assert "--resume-if-exists" not in refused.stderr or "resume" in refused.stderr


def test_resume_if_exists_continues_an_unfinished_run_and_keeps_a_failure(ops):
    (ops.folder / "broken").touch()
    failed = ops.invoke("run", ops.config, "--resume-if-exists")
    assert failed.exit_code == ExitCode.RUN_FAILED
    # a failure for good stays failed: nothing runs again
    again = ops.invoke("run", ops.config, "--resume-if-exists", "--json")
    assert again.exit_code == ExitCode.RUN_FAILED
    data = json.loads(again.stdout)
    assert (data["command"], data["status"]) == ("resume", "failed")
    assert ops.calls() == ["double", "price", "total"]


def test_input_overrides_are_typed_by_the_key_and_needed_again_on_resume(ops):
    (ops.folder / "n.json").write_text("5")
    done = ops.json("run", ops.config, "--input", "n=@n.json")
    assert done["outputs"] == {"note": "priced", "total": 1001}
    mismatch = ops.invoke("resume", ops.config)
    assert mismatch.exit_code == ExitCode.CONFLICT
    assert "differ from those it was started with" in mismatch.stderr
    same = ops.json("resume", ops.config, "--input", "n=5")
    assert same["status"] == "completed" and same["restored"] == 3
    other = ops.write_config("other.toml", run_id="ops-2")
    text = ops.json("run", other, "--input", "n=1", "--input", f"calls={ops.folder}/calls-2.txt")
    assert text["outputs"]["total"] == 201
    assert (ops.folder / "calls-2.txt").read_text().split() == ["double", "price", "total"]


def test_bad_input_overrides_name_the_option(ops):
    cases = {
        "n=abc": "--input n: the key has type int; give a JSON value",
        'n="3"': "--input n: the graph's input key has type int, found a string ('3')",
        "nope=1": "--input nope: not an input of graph 'ops'",
        "n": "--input 'n': expected KEY=VALUE or KEY=@FILE",
        "n=@missing.json": "--input n: cannot read the input file",
    }
    for option, message in cases.items():
        result = ops.invoke("run", ops.config, "--input", option)
        assert result.exit_code == ExitCode.CONFIG, (option, result.output)
        assert message in result.stderr, (option, result.stderr)
    assert ops.calls() == []


def test_max_running_overrides_the_config(ops):
    zero = ops.invoke("run", ops.config, "--max-running", "0")
    assert zero.exit_code == ExitCode.USAGE
    done = ops.json("run", ops.config, "--max-running", "1")
    assert done["status"] == "completed"
