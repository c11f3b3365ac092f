"""The root ``durable`` group: error reporting, ``--version``, and plugin commands loaded only
when asked for.

Every error Durable raises on purpose is printed as one line on stderr (``--debug`` adds the
traceback) and ends the command with the exit code of its kind
(:class:`~durable_core.cli.exitcodes.ExitCode`).

Startup is kept light: this module and the command modules import only click; each command
imports the library when it runs, and plugins (which may import numpy or a database driver)
are loaded only when a command name is not a built-in one. So ``durable --help`` and
``durable --version`` never load a plugin.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

import click

from durable_core.cli.commands import BUILTIN_COMMANDS
from durable_core.cli.exitcodes import ExitCode, exit_code_for
from durable_core.cli.options import JSON_META

__all__ = ["DEBUG_ENV", "cli", "main"]

DEBUG_ENV = "DURABLE_DEBUG"
"""Environment variable: when set to a non-empty value other than ``0``, errors show tracebacks."""


def debug_enabled(ctx: click.Context) -> bool:
    """Whether the command was given ``--debug`` or runs with ``DURABLE_DEBUG`` set."""
    root = ctx.find_root()
    if root.params.get("debug"):
        return True
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


class DurableGroup(click.Group):
    """A click group that turns errors into one line on stderr and a distinct exit code, and
    finds plugin commands (``durable_register_commands``) when a name is not a built-in."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            add_plugin_commands(self, ctx)
            command = super().get_command(ctx, cmd_name)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(ExitCode.INTERRUPTED)
        except BrokenPipeError:
            # The reader went away (``durable inspect | head``): stop quietly. Point stdout at
            # devnull so that flushing it at exit does not raise again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(ExitCode.OK)
        except Exception as exc:
            from durable_core.errors import DurableError, InvariantError

            if debug_enabled(ctx):
                traceback.print_exception(exc, file=sys.stderr)
            kind = type(exc).__name__
            if not isinstance(exc, (DurableError, OSError)):
                kind = f"unexpected {kind}; rerun with --debug for the traceback"
            elif isinstance(exc, InvariantError) and not debug_enabled(ctx):
                kind = f"{kind}; rerun with --debug for the traceback"
            click.echo(f"error ({kind}): {exc}", err=True)
            code = exit_code_for(exc)
            if ctx.meta.get(JSON_META):
                error = {"error": str(exc), "type": type(exc).__name__, "exit": int(code)}
                details = getattr(exc, "details", None)
                if isinstance(details, dict):  # what an error knows beyond its message
                    error["details"] = details
                click.echo(json.dumps(error))
            ctx.exit(code)


@click.group(
    cls=DurableGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Plugins may add commands: 'durable plugins' lists them.",
)
@click.version_option(
    package_name="durable-core", prog_name="durable", message="%(prog)s %(version)s"
)
@click.option("--debug", is_flag=True, help="Show tracebacks of errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Durable: run, resume and inspect durable dataflow graphs.

    Exit codes: 0 ok, 1 run failed, 2 usage, 3 busy, 4 not found, 5 conflict or mismatch,
    6 bad config, 7 checkpoint error, 8 corrupt record, 9 other error, 130 interrupted
    (Ctrl-C), 143 stopped by SIGTERM.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


for _command in BUILTIN_COMMANDS:
    cli.add_command(_command)


def add_plugin_commands(group: click.Group, ctx: click.Context | None = None) -> None:
    """Load the plugins and let each add its commands (``durable_register_commands``).

    A plugin manager that cannot be built (a broken plugin) adds nothing: the command is then
    reported unknown, and ``durable plugins`` shows the plugin's error.
    """
    from durable_core.cli.context import plugin_manager
    from durable_core.errors import DurableError

    try:
        pm = plugin_manager(ctx)
    except DurableError:
        return
    pm.add_commands(group)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``durable`` console script."""
    try:
        cli.main(args=argv, prog_name="durable", standalone_mode=True)
    finally:
        try:
            sys.stdout.flush()
        except BrokenPipeError:  # the reader went away after the command wrote its output
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
