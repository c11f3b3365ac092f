"""``durable fork``: a new run from an existing one's confirmed work, after a fix."""

from __future__ import annotations

import click

from durable_core.cli.options import json_option, one_run_id

__all__ = ["fork_command"]


@click.command("fork")
@click.argument("config_arg", metavar="CONFIG")
@click.argument("run_id_arg", metavar="RUN_ID", required=False)
@click.option("--run-id", "run_id_option", metavar="ID", help="The run to fork (same as RUN_ID).")
@click.option("--new-run-id", required=True, metavar="NEW", help="The new run's id.")
@click.option(
    "--rerun",
    multiple=True,
    metavar="NODE",
    help="Run this node again, with everything downstream of it (repeatable).",
)
@click.option(
    "--input",
    "input_options",
    multiple=True,
    metavar="KEY=VALUE|KEY=@FILE",
    help="Override an input of the config (the fork needs the old run's inputs).",
)
@click.option("--max-running", type=click.IntRange(min=1), metavar="N", help="Node bodies at once.")
@click.option(
    "--store",
    "store_url",
    metavar="URL",
    help="The store holding RUN_ID (NEW is saved there too), instead of the config's [store].",
)
@json_option("Print the result as JSON.")
def fork_command(
    config_arg: str,
    run_id_arg: str | None,
    run_id_option: str | None,
    new_run_id: str,
    rerun: tuple[str, ...],
    input_options: tuple[str, ...],
    max_running: int | None,
    store_url: str | None,
    as_json: bool,
) -> None:
    """Start run NEW from run RUN_ID's confirmed work, with the CONFIG's (fixed) graph.

    Every confirmed node of RUN_ID that is still valid under the current graph, is not named
    with --rerun and is not downstream of one, is copied; the new run executes the rest. This
    is how a run that failed for good, or that resume refuses after a definition change,
    continues after a fix without running its finished nodes again. RUN_ID is never changed.
    """
    from durable_core.cli.launch import launch

    run_id = one_run_id(run_id_arg, run_id_option)
    if run_id is None:
        raise click.UsageError("give the RUN_ID of the run to fork (or --run-id ID)")
    launch(
        config_arg,
        new_run_id,
        as_json,
        resume=False,
        input_options=input_options,
        max_running=max_running,
        fork_from=run_id,
        rerun=rerun,
        store_url=store_url,
    )
