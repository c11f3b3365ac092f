"""Options several commands share."""

from __future__ import annotations

from typing import Any

import click

__all__ = ["JSON_META", "json_option", "one_run_id", "run_id_option", "with_run_id"]

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


def run_id_option() -> Any:
    """``--run-id ID`` (parameter ``run_id_option``): the run id, the same as a positional
    RUN_ID; every command that names one run takes either form."""
    return click.option(
        "--run-id", "run_id_option", metavar="ID", help="The run id (same as RUN_ID)."
    )


def with_run_id(args: tuple[str, ...], run_id_option: str | None) -> tuple[str, ...]:
    """``[CONFIG] [RUN_ID]`` with ``--run-id`` folded in as the RUN_ID.

    Raises:
        click.UsageError: both a positional RUN_ID and ``--run-id`` were given.
    """
    from durable_core.cli.targets import looks_like_config

    if run_id_option is None:
        return args
    if len(args) > 1 or (args and not looks_like_config(args[0])):
        raise click.UsageError("give the run id either as RUN_ID or as --run-id, not both")
    return (*args, run_id_option)


def one_run_id(positional: str | None, option: str | None) -> str | None:
    """The run id given as ``RUN_ID`` after CONFIG or as ``--run-id`` (``run``, ``resume``).

    Raises:
        click.UsageError: both were given, with different ids.
    """
    if positional is not None and option is not None and positional != option:
        raise click.UsageError(
            f"give the run id either as RUN_ID or as --run-id, not both ({positional!r} and "
            f"{option!r})"
        )
    return positional if positional is not None else option


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
