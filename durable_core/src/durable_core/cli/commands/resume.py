"""``durable resume``: continue a run of a configuration's graph from its record."""

from __future__ import annotations

import click

__all__ = ["resume_command"]


@click.command("resume")
@click.argument("config_arg", metavar="CONFIG")
@click.option("--run-id", "run_id", metavar="ID", help="Run id instead of the config's run_id.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def resume_command(config_arg: str, run_id: str | None, as_json: bool) -> None:
    """Continue a run of the CONFIG's graph from its record.

    Confirmed nodes are restored without running again, spent Retry budgets stay spent. The
    graph, version and inputs must be the ones the run started with (else exit 5); a run with
    no record is not started (exit 4).
    """
    from durable_core.cli.launch import launch

    launch(config_arg, run_id, as_json, resume=True)
