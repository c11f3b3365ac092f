"""The ``durable`` command (click)."""

from __future__ import annotations

import json
import sys

import click

from durable_core.errors import DurableError
from durable_core.plugins import make_plugin_manager

EXIT_OK = 0
EXIT_PLUGIN = 9


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks of errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Durable: run, resume and inspect durable dataflow graphs."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def plugins_command(as_json: bool) -> None:
    """List every plugin found, its distribution and what it registers."""
    pm = make_plugin_manager()
    infos = pm.describe()
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "name": i.name,
                        "distribution": i.distribution,
                        "version": i.version,
                        "stores": list(i.stores),
                        "codecs": list(i.codecs),
                        "commands": list(i.commands),
                        "error": i.error,
                    }
                    for i in infos
                ],
                indent=2,
            )
        )
        return
    for i in infos:
        click.echo(f"{i.name}  ({i.distribution} {i.version})")
        if i.error:
            click.echo(f"  error: {i.error}")
            continue
        if i.stores:
            click.echo(f"  stores: {', '.join(i.stores)}")
        if i.codecs:
            click.echo(f"  codecs: {', '.join(i.codecs)}")
        if i.commands:
            click.echo(f"  commands: {', '.join(i.commands)}")


def _add_plugin_commands(group: click.Group) -> None:
    try:
        pm = make_plugin_manager()
    except DurableError:
        return
    pm.hook.durable_register_commands(cli=group)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``durable`` console script."""
    _add_plugin_commands(cli)
    try:
        cli.main(args=argv, prog_name="durable", standalone_mode=True)
    except DurableError as exc:  # pragma: no cover - commands handle their own errors
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_PLUGIN)
