"""``durable plugins``: every plugin found, its distribution and what it registers."""

from __future__ import annotations

import json

import click

from durable_core.cli.options import json_option

__all__ = ["plugins_command"]


@click.command("plugins")
@json_option()
def plugins_command(as_json: bool) -> None:
    """List every plugin found, its distribution and what it registers."""
    from durable_core.cli.context import plugin_manager

    infos = plugin_manager().describe()
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "name": i.name,
                        "distribution": i.distribution,
                        "version": i.version,
                        "stores": list(i.stores),
                        "url_schemes": list(i.url_schemes),
                        "executors": list(i.executors),
                        "launchers": list(i.launchers),
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
        if i.url_schemes:
            click.echo(f"  --store URL schemes: {', '.join(s + ':' for s in i.url_schemes)}")
        if i.executors:
            click.echo(f"  executors: {', '.join(i.executors)}")
        if i.launchers:
            click.echo(f"  launchers: {', '.join(i.launchers)}")
        if i.codecs:
            click.echo(f"  codecs: {', '.join(i.codecs)}")
        if i.commands:
            click.echo(f"  commands: {', '.join(i.commands)}")
