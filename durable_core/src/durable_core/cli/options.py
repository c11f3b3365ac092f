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
