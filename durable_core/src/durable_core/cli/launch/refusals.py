"""A launch's refusals, told in the command line's words: the run exists already, the run or
the run to fork has no record, a record is corrupt, another session owns the run, the graph
changed. Each error keeps its type (and so its exit code); only its message is completed."""

from __future__ import annotations

import shlex
from typing import Any

from durable_core.cli.launch.hints import resume_hint, run_hint
from durable_core.cli.launch.request import LaunchRequest
from durable_core.cli.targets import busy, store_words
from durable_core.errors import (
    BusyError,
    CheckpointError,
    CodecError,
    ConfigError,
    ConflictError,
    CorruptRecordError,
    DefinitionMismatchError,
    DurableError,
    NotFoundError,
)

__all__ = ["REFUSALS", "explain"]

REFUSALS = (
    CheckpointError,
    NotFoundError,
    CorruptRecordError,
    BusyError,
    DefinitionMismatchError,
)
"""The errors :func:`explain` tells again; anything else passes as it is."""


def explain(
    exc: DurableError, request: LaunchRequest, config: Any, *, started: bool, forked: bool
) -> DurableError:
    """The error to report for ``exc``, one of :data:`REFUSALS`, raised by run, resume or fork.

    Args:
        exc: what the runtime (or the fork) raised.
        request: the command line.
        config: the run configuration (its run id and store).
        started: a node of this process's run started (then a checkpoint error is the run's).
        forked: the fork's first record was created (``fork`` only; a missing or corrupt
            record is then the new run's, not the run to fork's).

    Returns:
        ``exc`` itself when its message says everything already, else a new error of the same
        type (of ``ConflictError``/``ConfigError`` for what a checkpoint error before the start
        really was), to be raised ``from exc``.
    """
    if isinstance(exc, CheckpointError):
        return exc if started else _before_start(exc, request, config)
    if isinstance(exc, NotFoundError):
        if request.fork_from is not None and not forked:
            return exc  # the run to fork is missing: the fork's message names it
        return NotFoundError(
            f"no record of run {config.run_id!r} in the {config.store.describe()}: check the "
            f"store and the run id, or start it with '{run_hint(request)}' (a missing record "
            "does not mean the run finished)"
        )
    if isinstance(exc, CorruptRecordError):
        source = request.fork_from is not None and not forked
        loaded = request.fork_from if source else config.run_id
        if f"run {loaded!r}" in str(exc):  # the store's message names it already
            return exc
        return CorruptRecordError(
            f"run {loaded!r} in the {config.store.describe()} is corrupt: {exc} (what to do: "
            "docs/operations.md, 'A corrupt record')",
            path=exc.path,
            rule=exc.rule,
        )
    if isinstance(exc, BusyError):
        named = store_words(request.config_arg, request.store_url)
        return busy(exc.run_id or config.run_id, config.store, exc, named)
    if isinstance(exc, DefinitionMismatchError):
        return _with_config(exc, request.config_arg)
    return exc


def _with_config(exc: DefinitionMismatchError, config_arg: str) -> DefinitionMismatchError:
    """The same refusal, its fork command naming the configuration file given."""
    message = str(exc).replace("durable fork CONFIG ", f"durable fork {shlex.quote(config_arg)} ")
    return DefinitionMismatchError(
        message,
        added=exc.added,
        removed=exc.removed,
        changed=exc.changed,
        keys=exc.keys,
        inputs=exc.inputs,
        graphs=exc.graphs,
        complete=exc.complete,
    )


def _before_start(exc: CheckpointError, request: LaunchRequest, config: Any) -> DurableError:
    """Name a refusal that came before anything was saved by what it really is."""
    cause = exc.__cause__
    if isinstance(cause, ConflictError):
        return ConflictError(
            f"run {config.run_id!r} already exists in the {config.store.describe()}: continue "
            f"it with '{resume_hint(request)}', or start another run with "
            f"'{run_hint(request, 'NEW-ID')}'. Nothing was saved"
        )
    if isinstance(cause, CodecError):
        # The codec layer's message already says what to do (and, for a missing codec, how
        # to register one); repeating advice here would be wrong for NaN or a lock.
        return ConfigError(f"{config.path}: [inputs]: {cause}. Nothing was saved")
    return exc
