"""``durable run``: start a new run of a configuration's graph."""

from __future__ import annotations

import click

from durable_core.cli.options import launch_options, one_run_id

__all__ = ["run_command"]


@click.command("run")
@click.argument("config_arg", metavar="CONFIG")
@click.argument("run_id_arg", metavar="[RUN_ID]", required=False)
@click.option(
    "--run-id", "run_id", metavar="ID", help="Run id instead of the config's run_id (or RUN_ID)."
)
@click.option(
    "--resume-if-exists",
    is_flag=True,
    help="Continue the run when it already has a record, instead of refusing it.",
)
@click.option(
    "--suspend",
    is_flag=True,
    help="When the run has nothing to do but wait (inbox messages, a timer), end with status "
    "waiting instead of holding the process ('durable send' or 'durable recover' wakes it).",
)
@launch_options
def run_command(
    config_arg: str,
    run_id_arg: str | None,
    run_id: str | None,
    resume_if_exists: bool,
    suspend: bool,
    input_options: tuple[str, ...],
    max_running: int | None,
    store_url: str | None,
    as_json: bool,
) -> None:
    """Start a new run of the CONFIG's graph and execute it.

    Every change is saved to the store as it happens. Ctrl-C stops the run cleanly and prints
    how to resume it; a crash (even kill -9) leaves it resumable too. A run id that already has
    a record is refused (exit 5): use 'durable resume', or --resume-if-exists to start the
    run or continue it with one command (for schedulers).
    """
    from durable_core.cli.launch import launch

    launch(
        config_arg,
        one_run_id(run_id_arg, run_id),
        as_json,
        resume=False,
        resume_if_exists=resume_if_exists,
        input_options=input_options,
        max_running=max_running,
        store_url=store_url,
        suspend=suspend,
    )
