"""``durable resume``: continue a run of a configuration's graph from its record."""

from __future__ import annotations

import click

from durable_core.cli.options import launch_options, one_run_id

__all__ = ["resume_command"]


@click.command("resume")
@click.argument("config_arg", metavar="CONFIG")
@click.argument("run_id_arg", metavar="[RUN_ID]", required=False)
@click.option(
    "--run-id", "run_id", metavar="ID", help="Run id instead of the config's run_id (or RUN_ID)."
)
@click.option(
    "--suspend",
    is_flag=True,
    help="When the run has nothing to do but wait (inbox messages, a timer), end with status "
    "waiting instead of holding the process ('durable send' or 'durable recover' wakes it).",
)
@launch_options
def resume_command(
    config_arg: str,
    run_id_arg: str | None,
    run_id: str | None,
    suspend: bool,
    input_options: tuple[str, ...],
    max_running: int | None,
    store_url: str | None,
    as_json: bool,
) -> None:
    """Continue a run of the CONFIG's graph from its record.

    Confirmed nodes are restored without running again, spent Retry budgets stay spent. The
    graph, version and inputs must be the ones the run started with (else exit 5); a run with
    no record is not started (exit 4).
    """
    from durable_core.cli.launch import launch

    launch(
        config_arg,
        one_run_id(run_id_arg, run_id),
        as_json,
        resume=True,
        input_options=input_options,
        max_running=max_running,
        store_url=store_url,
        suspend=suspend,
    )
