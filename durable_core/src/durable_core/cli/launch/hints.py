"""The commands a launch prints for what to do next, naming the CONFIG, the run id and the
``--store`` exactly as the command line gave them (a store URL's password hidden)."""

from __future__ import annotations

import shlex

from durable_core.cli.launch.request import LaunchRequest
from durable_core.config._text import redact

__all__ = ["fork_hint", "inspect_hint", "resume_hint", "run_hint"]


def _store_option(request: LaunchRequest) -> str:
    if request.store_url is None:
        return ""
    return f" --store {shlex.quote(redact(request.store_url))}"


def _command(verb: str, request: LaunchRequest, run_id: str | None) -> str:
    command = f"durable {verb} {shlex.quote(request.config_arg)}"
    if run_id is not None:
        command += f" --run-id {shlex.quote(run_id)}"
    # a resume needs the inputs the run started with: the --input options come along
    inputs = "".join(f" --input {shlex.quote(option)}" for option in request.input_options)
    return command + inputs + _store_option(request)


def resume_hint(request: LaunchRequest) -> str:
    """``durable resume CONFIG [--run-id ID] [--input KEY=VALUE]... [--store URL]``: continue
    this run, with the ``--input`` options it was given."""
    return _command("resume", request, request.run_id_option)


def run_hint(request: LaunchRequest, run_id: str | None = None) -> str:
    """``durable run CONFIG [--run-id ID] [--input KEY=VALUE]... [--store URL]``: start this
    run (or ``run_id``)."""
    return _command("run", request, run_id if run_id is not None else request.run_id_option)


def inspect_hint(request: LaunchRequest, run_id: str) -> str:
    """``durable inspect CONFIG|--store URL [RUN_ID]``: look at the run's record; the run id
    is named when the config's own run id does not say it."""
    where = (
        shlex.quote(request.config_arg)
        if request.store_url is None
        else f"--store {shlex.quote(redact(request.store_url))}"
    )
    named = request.run_id_option is not None or request.store_url is not None
    return f"durable inspect {where}" + (f" {shlex.quote(run_id)}" if named else "")


def fork_hint(request: LaunchRequest, run_id: str) -> str:
    """``durable fork CONFIG RUN_ID --new-run-id NEW [--store URL]``: continue a failed run's
    confirmed work in a new run."""
    fork = f"durable fork {shlex.quote(request.config_arg)} {shlex.quote(run_id)}"
    return fork + " --new-run-id NEW" + _store_option(request)
