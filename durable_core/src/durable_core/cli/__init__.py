"""The ``durable`` command (click): run, resume, inspect and list runs, list plugins.

Layout: :mod:`~durable_core.cli.app` holds the root group, error reporting and ``main``;
:mod:`~durable_core.cli.commands` one module per command; :mod:`~durable_core.cli.launch` what
``run`` and ``resume`` share; :mod:`~durable_core.cli.targets` how a reading command finds its
store and run; :mod:`~durable_core.cli.exitcodes` the exit codes. The user reference is
``docs/cli.md``.
"""

from durable_core.cli.app import DEBUG_ENV, cli, main
from durable_core.cli.exitcodes import ExitCode, exit_code_for

__all__ = ["DEBUG_ENV", "ExitCode", "cli", "exit_code_for", "main"]
