"""Every command that names one run takes its id the same way: RUN_ID after CONFIG, or
``--run-id ID``; ``log`` also takes CONFIG or ``--store URL`` like the rest."""

from __future__ import annotations

import pytest

from durable_core.cli import ExitCode


@pytest.mark.parametrize("form", ["positional", "option"])
def test_run_resume_inspect_cancel_and_log_take_the_run_id_either_way(ops, form):
    def named(run_id: str) -> list[str]:
        return [run_id] if form == "positional" else ["--run-id", run_id]

    started = ops.invoke("run", ops.config, *named("other-1"))
    assert started.exit_code == 0, started.output
    assert "run 'other-1' completed" in started.stdout
    resumed = ops.invoke("resume", ops.config, *named("other-1"))
    assert resumed.exit_code == 0, resumed.output
    assert "run 'other-1' completed" in resumed.stdout and "restored" in resumed.stdout
    assert ops.json("inspect", ops.config, *named("other-1"))["run_id"] == "other-1"
    idle = ops.invoke("cancel", ops.config, *named("other-1"))
    assert idle.exit_code == 0, idle.output
    assert "nothing to cancel" in idle.stdout
    log = ops.invoke("log", ops.config, *named("other-1"))
    assert log.exit_code == 0, log.output
    assert "run_finished" in log.stdout
    by_store = ops.invoke("log", "--store", ops.store_url, *named("other-1"))
    assert by_store.stdout == log.stdout
    assert ops.calls() == ["double", "price", "total"]  # the config's own run never ran
    assert ops.invoke("inspect", ops.config).exit_code == ExitCode.NOT_FOUND


def test_log_of_a_config_reads_its_run_id(ops):
    assert ops.invoke("run", ops.config).exit_code == 0
    assert ops.invoke("log", ops.config).stdout == ops.invoke("log", ops.config).stdout
    assert "run_finished" in ops.invoke("log", ops.config).stdout


@pytest.mark.parametrize("command", ["run", "resume"])
def test_two_different_run_ids_are_a_usage_error(ops, command):
    result = ops.invoke(command, ops.config, "a-1", "--run-id", "b-1")
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "either as RUN_ID or as --run-id, not both" in result.output
    assert ops.calls() == []


def test_show_delete_and_fork_take_the_run_id_as_an_option_too(ops):
    (ops.folder / "broken").touch()
    assert ops.invoke("run", ops.config).exit_code == ExitCode.RUN_FAILED
    (ops.folder / "broken").unlink()
    by_option = ops.invoke("show", ops.config, "--run-id", "ops-1", "double")
    assert by_option.exit_code == 0, by_option.output
    assert by_option.stdout == ops.invoke("show", ops.config, "ops-1", "double").stdout
    forked = ops.invoke("fork", ops.config, "--run-id", "ops-1", "--new-run-id", "ops-2")
    assert forked.exit_code == 0, forked.output
    both = ops.invoke("fork", ops.config, "ops-1", "--run-id", "ops-9", "--new-run-id", "ops-3")
    assert both.exit_code == ExitCode.USAGE, both.output
    deleted = ops.invoke("delete", ops.config, "--run-id", "ops-1", "--run-id", "ops-2", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert ops.invoke("inspect", ops.config, "ops-1").exit_code == ExitCode.NOT_FOUND
    assert ops.invoke("inspect", ops.config, "ops-2").exit_code == ExitCode.NOT_FOUND
