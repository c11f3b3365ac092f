"""``durable fork``: a run that failed for good (or that resume refuses after a definition
change) continues under a new run id after a fix, without running its copied nodes again."""

from __future__ import annotations

import json

from durable_core.cli import ExitCode


def fail_first_run(ops) -> int:
    (ops.folder / "broken").touch()
    failed = ops.invoke("run", ops.config)
    assert failed.exit_code == ExitCode.RUN_FAILED, failed.output
    assert ops.calls() == ["double", "price", "total"]
    return ops.json("inspect", ops.config)["revision"]


def test_fork_of_a_run_failed_for_good_completes_after_the_fix(ops):
    revision = fail_first_run(ops)
    stuck = ops.invoke("resume", ops.config)
    assert stuck.exit_code == ExitCode.RUN_FAILED  # failed for good: resume cannot help
    (ops.folder / "broken").unlink()  # the fix
    forked = ops.invoke("fork", ops.config, "ops-1", "--new-run-id", "ops-2", "--json")
    assert forked.exit_code == 0, forked.output
    data = json.loads(forked.stdout)
    assert (data["command"], data["status"], data["run_id"]) == ("fork", "completed", "ops-2")
    assert data["copied"] == ["double", "price"] and data["rerun"] == ["total"]
    assert data["restored"] == 2 and data["confirmed"] == 1
    assert data["outputs"] == {"note": "priced", "total": 4201}
    assert ops.calls() == ["double", "price", "total", "total"]  # only total ran again
    # the old run is untouched evidence
    old = ops.json("inspect", ops.config)
    assert (old["status"], old["revision"]) == ("failed", revision)
    new = ops.json("inspect", ops.config, "ops-2")
    assert new["status"] == "completed"
    assert new["definition"] == old["definition"]
    old_ids = {a["id"] for a in old["open_attempts"]}
    assert not old_ids & {a["id"] for a in new["open_attempts"]}


def test_rerun_runs_a_node_and_everything_downstream_again(ops):
    fail_first_run(ops)
    (ops.folder / "broken").unlink()
    forked = ops.invoke("fork", ops.config, "ops-1", "--new-run-id", "ops-2", "--rerun", "price")
    assert forked.exit_code == 0, forked.output
    assert "copied double; running again: price, total" in forked.stderr
    assert ops.calls() == ["double", "price", "total", "price", "total"]


def test_fork_after_a_definition_change_that_resume_refuses(ops):
    fail_first_run(ops)
    (ops.folder / "broken").unlink()
    module = ops.folder / f"{ops.module}.py"
    # the fix adds a node: the definition changes, so resume refuses the old run
    module.write_text(
        module.read_text()
        + '\nEXTRA = Key("extra", int)\n\n\n@graph.node("extra", requires=[TOTAL, CALLS], '
        'provides=[EXTRA])\ndef extra(rc):\n    called(rc, "extra")\n'
        "    rc.set(EXTRA, rc.get(TOTAL) * 10)\n"
    )
    import sys

    sys.modules.pop(ops.module, None)
    refused = ops.invoke("resume", ops.config)
    assert refused.exit_code == ExitCode.CONFLICT
    assert "another definition" in refused.stderr
    forked = ops.json("fork", ops.config, "ops-1", "--new-run-id", "ops-2")
    assert forked["status"] == "completed"
    assert forked["outputs"] == {"extra": 42010, "note": "priced"}
    assert ops.calls() == ["double", "price", "total", "total", "extra"]
    new = ops.json("inspect", ops.config, "ops-2")
    assert new["definition_matches"] is True


def test_a_copied_value_that_no_longer_decodes_refuses_the_fork(ops):
    fail_first_run(ops)
    (ops.folder / "broken").unlink()
    module = ops.folder / f"{ops.module}.py"
    module.write_text(
        module.read_text().replace(
            "codecs.register_json(Money)", 'codecs.register_json(Money, version="2")'
        )
    )
    import sys

    sys.modules.pop(ops.module, None)
    refused = ops.invoke("fork", ops.config, "ops-1", "--new-run-id", "ops-2")
    assert refused.exit_code == ExitCode.ERROR, refused.output
    assert "error (CodecError): fork of run 'ops-1' refused" in refused.stderr
    assert "--rerun" in refused.stderr
    assert ops.invoke("inspect", ops.config, "ops-2").exit_code == ExitCode.NOT_FOUND
    ok = ops.json("fork", ops.config, "ops-1", "--new-run-id", "ops-2", "--rerun", "price")
    assert ok["status"] == "completed" and ok["copied"] == ["double"]


def test_fork_refusals(ops):
    fail_first_run(ops)
    same = ops.invoke("fork", ops.config, "ops-1", "--new-run-id", "ops-1")
    assert same.exit_code == ExitCode.CONFIG
    unknown = ops.invoke("fork", ops.config, "ops-1", "--new-run-id", "x", "--rerun", "nope")
    assert unknown.exit_code == ExitCode.CONFIG and "has no such node" in unknown.stderr
    missing = ops.invoke("fork", ops.config, "nope", "--new-run-id", "x")
    assert missing.exit_code == ExitCode.NOT_FOUND
    inputs = ops.invoke("fork", ops.config, "ops-1", "--new-run-id", "x", "--input", "n=3")
    assert inputs.exit_code == ExitCode.CONFLICT and "a fork keeps the inputs" in inputs.stderr
    assert ops.invoke("run", ops.config, "--run-id", "taken").exit_code == ExitCode.RUN_FAILED
    taken = ops.invoke("fork", ops.config, "ops-1", "--new-run-id", "taken")
    assert taken.exit_code == ExitCode.CONFLICT and "already exists" in taken.stderr
    assert ops.calls().count("double") == 2  # no refusal ran anything


def test_fork_reads_and_saves_in_the_store_given_with_store(ops):
    elsewhere = f"file://{ops.folder / 'elsewhere'}"
    (ops.folder / "broken").touch()
    failed = ops.invoke("run", ops.config, "--store", elsewhere)
    assert failed.exit_code == ExitCode.RUN_FAILED, failed.output
    (ops.folder / "broken").unlink()
    # the config's own store has no ops-1: without --store the fork finds nothing to fork
    missing = ops.invoke("fork", ops.config, "ops-1", "--new-run-id", "ops-2")
    assert missing.exit_code == ExitCode.NOT_FOUND, missing.output
    forked = ops.invoke(
        "fork", ops.config, "ops-1", "--new-run-id", "ops-2", "--store", elsewhere, "--json"
    )
    assert forked.exit_code == 0, forked.output
    data = json.loads(forked.stdout)
    assert (data["status"], data["copied"]) == ("completed", ["double", "price"])
    assert ops.calls() == ["double", "price", "total", "total"]
    # without its CONFIG, inspect cannot tell a completed run from one stopped between nodes
    assert ops.json("inspect", "--store", elsewhere, "ops-2")["status"] == "settled"
    assert ops.invoke("inspect", ops.config, "ops-2").exit_code == ExitCode.NOT_FOUND


def test_a_missing_run_to_fork_is_named_not_the_new_run_id(ops):
    missing = ops.invoke("fork", ops.config, "nope", "--new-run-id", "brand-new")
    assert missing.exit_code == ExitCode.NOT_FOUND, missing.output
    assert "no record of run 'nope' to fork" in missing.stderr
    assert "brand-new" not in missing.stderr  # NEW does not exist yet: that is not the problem
    as_json = ops.invoke("fork", ops.config, "nope", "--new-run-id", "brand-new", "--json")
    error = json.loads(as_json.stdout)
    assert error["exit"] == ExitCode.NOT_FOUND and "run 'nope' to fork" in error["error"]


def test_a_failed_run_prints_the_fork_command_that_continues_it(ops):
    (ops.folder / "broken").touch()
    failed = ops.invoke("run", ops.config, "--run-id", "ops-9")
    assert failed.exit_code == ExitCode.RUN_FAILED, failed.output
    hint = f"after a fix, continue its confirmed work with: durable fork {ops.config} ops-9"
    assert f"{hint} --new-run-id NEW\n" in failed.stderr
    # the hint is a command that works once NEW is named
    (ops.folder / "broken").unlink()
    forked = ops.invoke("fork", ops.config, "ops-9", "--new-run-id", "ops-9b")
    assert forked.exit_code == 0, forked.output
    # a store given with --store is named again
    (ops.folder / "broken").touch()
    elsewhere = f"file://{ops.folder / 'elsewhere'}"
    again = ops.invoke("run", ops.config, "--run-id", "ops-10", "--store", elsewhere)
    assert again.exit_code == ExitCode.RUN_FAILED
    assert f"ops-10 --new-run-id NEW --store {elsewhere}\n" in again.stderr


# covers: E-1
def test_fork_of_a_running_run_names_the_run_that_is_busy(ops):
    from durable_core.config import parse_store_url

    fail_first_run(ops)
    (ops.folder / "broken").unlink()
    holder = parse_store_url(ops.store_url).open()
    try:
        with holder.acquire("ops-1"):  # as a 'durable resume ops-1' still running would
            forked = ops.invoke("fork", ops.config, "ops-1", "--new-run-id", "ops-2")
        assert forked.exit_code == ExitCode.BUSY, forked.output
        assert "run 'ops-1' in the" in forked.stderr and "is busy" in forked.stderr
        assert "durable cancel" in forked.stderr and "ops-1'" in forked.stderr
        assert "'ops-2'" not in forked.stderr  # the new run is not the one in use
        assert ops.invoke("inspect", ops.config, "ops-2").exit_code == ExitCode.NOT_FOUND
        with holder.acquire("ops-2"):  # now the new id is the one in use
            taken = ops.invoke("fork", ops.config, "ops-1", "--new-run-id", "ops-2")
        assert taken.exit_code == ExitCode.BUSY, taken.output
        assert "run 'ops-2' in the" in taken.stderr and "is busy" in taken.stderr
    finally:
        holder.close()
