"""What ``durable run``, ``durable resume`` and ``durable fork`` share: a launch, in steps.

One frozen :class:`~.request.LaunchRequest` holds the command line. :func:`~.prepare.prepare`
loads the CONFIG and opens the executor and the store; :func:`~.execute.execute` runs (forks,
resumes) the graph through the durable runtime with Ctrl-C/SIGTERM handling
(:mod:`~.interrupt`), ``durable cancel`` requests and the progress line, and tells its
refusals in the command line's words (:mod:`~.refusals`); :func:`~.report.report` prints the
result with what to do next (:mod:`~.hints`) and exits with its code.
"""

from __future__ import annotations

from durable_core.cli.launch.execute import execute
from durable_core.cli.launch.prepare import prepare
from durable_core.cli.launch.report import report
from durable_core.cli.launch.request import LaunchRequest

__all__ = ["LaunchRequest", "launch"]


def launch(
    config_arg: str,
    run_id_option: str | None,
    as_json: bool,
    *,
    resume: bool,
    resume_if_exists: bool = False,
    input_options: tuple[str, ...] = (),
    max_running: int | None = None,
    fork_from: str | None = None,
    rerun: tuple[str, ...] = (),
    store_url: str | None = None,
    suspend: bool = False,
) -> None:
    """Run (or resume, or fork) the CONFIG's graph and report the result; exits 1 unless
    completed (or, with ``suspend``, waiting; 130/143 when interrupted). The arguments are
    :class:`LaunchRequest`'s."""
    request = LaunchRequest(
        config_arg,
        run_id_option,
        as_json,
        resume,
        resume_if_exists=resume_if_exists,
        input_options=tuple(input_options),
        max_running=max_running,
        fork_from=fork_from,
        rerun=tuple(rerun),
        store_url=store_url,
        suspend=suspend,
    )
    prepared = prepare(request)
    try:
        outcome = execute(request, prepared)
    finally:
        prepared.close()
    report(request, prepared, outcome)
