"""Exit codes of the ``durable`` command: each kind of outcome has its own."""

from __future__ import annotations

import enum

from durable_core.errors import (
    BusyError,
    CheckpointError,
    ConfigError,
    ConflictError,
    CorruptRecordError,
    GraphError,
    MismatchError,
    NotFoundError,
    PluginError,
)

__all__ = ["ExitCode", "exit_code_for"]


class ExitCode(enum.IntEnum):
    """Exit codes of the ``durable`` command; each kind of outcome has its own."""

    OK = 0
    """The command succeeded (for ``run``/``resume``: the run completed)."""
    RUN_FAILED = 1
    """The run ended ``failed`` or ``canceled``; the record says which node failed."""
    USAGE = 2
    """Wrong command-line usage (click's own code)."""
    BUSY = 3
    """The run is owned by another session (BusyError): find the owner, never delete locks."""
    NOT_FOUND = 4
    """No record of the run (NotFoundError): check the store location and the run id."""
    CONFLICT = 5
    """The stored run does not match: it already exists, or its definition, version or inputs
    differ (ConflictError, DefinitionMismatchError, VersionMismatchError, InputsMismatchError)."""
    CONFIG = 6
    """Bad configuration: ConfigError, PluginError (unknown backend or codec plugin), GraphError."""
    CHECKPOINT = 7
    """A save failed at the runtime's save boundary (CheckpointError): resume loads again."""
    CORRUPT = 8
    """The stored record is corrupt (CorruptRecordError): keep it, fix the cause."""
    ERROR = 9
    """Any other error: the store's medium (StoreError: I/O, the database), permissions, schema,
    codec, a timeout deciding ownership, a bug in Durable (InvariantError: report it)."""
    INTERRUPTED = 130
    """Interrupted (Ctrl-C / SIGINT); the run stays resumable."""
    TERMINATED = 143
    """Stopped by SIGTERM (a deploy, a service manager); the run stays resumable."""


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit code for an error that ended a command."""
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if isinstance(exc, BusyError):
        return ExitCode.BUSY
    if isinstance(exc, NotFoundError):
        return ExitCode.NOT_FOUND
    if isinstance(exc, CheckpointError):
        return ExitCode.CHECKPOINT
    if isinstance(exc, (ConflictError, MismatchError)):
        return ExitCode.CONFLICT
    if isinstance(exc, (ConfigError, PluginError, GraphError)):
        return ExitCode.CONFIG
    if isinstance(exc, CorruptRecordError):
        return ExitCode.CORRUPT
    return ExitCode.ERROR
