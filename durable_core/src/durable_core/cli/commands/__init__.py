"""The built-in commands of ``durable``, one module each.

Each module defines one click command and imports what it needs inside the command's body, so
that ``durable --help`` loads only click.
"""

from durable_core.cli.commands.cancel import cancel_command
from durable_core.cli.commands.delete import delete_command
from durable_core.cli.commands.fork import fork_command
from durable_core.cli.commands.inspect import inspect_command
from durable_core.cli.commands.list import list_command
from durable_core.cli.commands.log import log_command
from durable_core.cli.commands.migrate import migrate_command
from durable_core.cli.commands.plugins import plugins_command
from durable_core.cli.commands.prune import prune_command
from durable_core.cli.commands.recover import recover_command
from durable_core.cli.commands.resume import resume_command
from durable_core.cli.commands.run import run_command
from durable_core.cli.commands.send import send_command
from durable_core.cli.commands.show import show_command
from durable_core.cli.commands.submit import submit_command

BUILTIN_COMMANDS = (
    run_command,
    resume_command,
    send_command,
    fork_command,
    submit_command,
    recover_command,
    cancel_command,
    inspect_command,
    list_command,
    log_command,
    show_command,
    delete_command,
    prune_command,
    migrate_command,
    plugins_command,
)
"""Every built-in command, in the order ``durable --help`` lists them."""

__all__ = ["BUILTIN_COMMANDS"]
