"""``durable run``: start a new run of a configuration's graph."""

from __future__ import annotations

import click

__all__ = ["run_command"]


@click.command("run")
@click.argument("config_arg", metavar="CONFIG")
@click.option("--run-id", "run_id", metavar="ID", help="Run id instead of the config's run_id.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def run_command(config_arg: str, run_id: str | None, as_json: bool) -> None:
    """Start a new run of the CONFIG's graph and execute it.

    Every change is saved to the store as it happens. Ctrl-C stops the run cleanly and prints
    how to resume it; a crash (even kill -9) leaves it resumable too. A run id that already has
    a record is refused (exit 5): use 'durable resume'.
    """
    from durable_core.cli.launch import launch

    launch(config_arg, run_id, as_json, resume=False)
