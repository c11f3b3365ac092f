"""Options several commands share."""

from __future__ import annotations

from typing import Any

import click

__all__ = ["JSON_META", "json_option"]

JSON_META = "durable.json"
"""Key of ``ctx.meta``: set when the command was given ``--json``, so that an error that ends
it is printed as a JSON object on stdout as well."""


def _remember_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta[JSON_META] = True
    return value


def json_option(help: str = "Print machine-readable JSON.") -> Any:
    """``--json`` (parameter ``as_json``): JSON output, and errors as a JSON object on stdout
    (``{"error": …, "type": …, "exit": …}``) besides the line on stderr."""
    return click.option("--json", "as_json", is_flag=True, help=help, callback=_remember_json)


def launch_options(command: Any) -> Any:
    """The options ``run`` and ``resume`` share: ``--input``, ``--max-running``, ``--store``
    and ``--json``, in that order in ``--help``."""
    decorators = [
        click.option(
            "--input",
            "input_options",
            multiple=True,
            metavar="KEY=VALUE|KEY=@FILE",
            help="Override an input of the config (repeatable); resume needs the same again.",
        ),
        click.option(
            "--max-running",
            type=click.IntRange(min=1),
            metavar="N",
            help="At most N node bodies at once (overrides [runtime] max_running).",
        ),
        click.option(
            "--store",
            "store_url",
            metavar="URL",
            help="The store, instead of the config's [store] (see 'Store URLs' in docs/cli.md).",
        ),
        json_option("Print the result as JSON."),
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command
