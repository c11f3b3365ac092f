"""What ``durable run`` and ``durable resume`` share: loading the config, executing the graph
through the durable runtime, Ctrl-C/SIGTERM handling, progress, and the result's report."""

from __future__ import annotations

import json
import shlex
import signal
import sys
import threading
from typing import Any

import click

from durable_core.cli.exitcodes import ExitCode
from durable_core.cli.targets import busy
from durable_core.errors import (
    BusyError,
    CheckpointError,
    CodecError,
    ConfigError,
    ConflictError,
    DurableError,
    NotFoundError,
)

__all__ = ["launch"]

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Interrupt:
    """SIGINT (Ctrl-C) or SIGTERM (what deploy tools and service managers send) while a run
    executes: the first signal cancels the run cleanly (the record stays resumable), a second
    one stops waiting for running bodies."""

    def __init__(self, token: Any, quiet: bool) -> None:
        self.token = token
        self.quiet = quiet
        self.requested = False
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.signal = signum
        if not self.quiet:
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            click.echo(
                f"\nstopping ({name}): waiting for running nodes to end (Ctrl-C again to stop "
                "at once)",
                err=True,
            )
        self.token.cancel()

    @property
    def exit_code(self) -> int:
        """130 after SIGINT (or a second signal), 143 after SIGTERM: 128 + the signal."""
        if self.signal == signal.SIGTERM:
            return ExitCode.TERMINATED
        return ExitCode.INTERRUPTED

    def __enter__(self) -> _Interrupt:
        if threading.current_thread() is threading.main_thread():
            for signum in _STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


def _resume_hint(config_arg: str, run_id_option: str | None) -> str:
    return _command_hint("resume", config_arg, run_id_option)


def _run_hint(config_arg: str, run_id_option: str | None) -> str:
    return _command_hint("run", config_arg, run_id_option)


def _command_hint(verb: str, config_arg: str, run_id_option: str | None) -> str:
    command = f"durable {verb} {shlex.quote(config_arg)}"
    if run_id_option is not None:
        command += f" --run-id {shlex.quote(run_id_option)}"
    return command


_SKIPPED = object()
"""Stands for a skipped result in :func:`_leaf_outputs`."""


def _leaf_outputs(graph: Any, result: Any) -> list[tuple[str, Any]]:
    """The root graph's results nobody in the graph consumes (what the run was for)."""
    required = {key.name for node in graph.nodes.values() for key in node.requires}
    leaves = []
    for node in graph.nodes.values():
        for key in node.provides:
            if key.name in required or getattr(key, "stream", False):
                continue
            if result.skipped(key):
                leaves.append((key.name, _SKIPPED))
            else:
                leaves.append((key.name, result.get(key)))
    return sorted(leaves, key=lambda kv: kv[0])


def _json_outputs(graph: Any, result: Any) -> dict[str, Any]:
    """The root graph's results for ``--json``: JSON values as they are, anything else as its
    ``repr``; skipped results as ``{"skipped": true}``."""
    out: dict[str, Any] = {}
    for name, value in _leaf_outputs(graph, result):
        if value is _SKIPPED:
            out[name] = {"skipped": True}
            continue
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            value = repr(value)
        out[name] = value
    return out


def _short(value: Any, limit: int = 200) -> str:
    text = "(skipped)" if value is _SKIPPED else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def launch(config_arg: str, run_id_option: str | None, as_json: bool, *, resume: bool) -> None:
    """Run (or resume) the CONFIG's graph and report the result; exits 1 unless completed."""
    from durable_core.config import load_config
    from durable_core.durable import Runtime
    from durable_core.graph import CancelToken
    from durable_core.plugins import make_plugin_manager
    from durable_core.progress import ProgressCounter, StatusLine

    config = load_config(config_arg).with_run_id(run_id_option)
    pm = make_plugin_manager()
    graph = config.load_graph()
    config.register_graph_module(pm)
    codecs = config.make_codecs(pm)
    inputs = config.resolve_inputs(graph)
    counter = ProgressCounter()
    interactive = not as_json and sys.stdout.isatty() and sys.stderr.isatty()
    token = CancelToken()
    verb = "resume" if resume else "run"
    store = config.open_store(pm)
    status_line = None
    try:
        runtime = Runtime(store, codecs, observers=[counter], plugins=pm)
        if interactive:
            status_line = StatusLine(counter, sys.stderr, label=config.run_id).start()
        with _Interrupt(token, quiet=as_json) as interrupt:
            try:
                call = runtime.resume if resume else runtime.run
                result = call(
                    graph,
                    run_id=config.run_id,
                    version=config.version,
                    inputs=inputs,
                    max_running=config.runtime.max_running,
                    cancel=token,
                )
            except KeyboardInterrupt:
                result = None
            except CheckpointError as exc:
                if not counter.snapshot().started:
                    raise _before_start(exc, config, config_arg, run_id_option) from exc
                raise
            except NotFoundError as exc:
                raise NotFoundError(
                    f"no record of run {config.run_id!r} in the {config.store.describe()}: "
                    f"check the store and the run id, or start it with "
                    f"'{_run_hint(config_arg, run_id_option)}' (a missing record does not mean "
                    f"the run finished)"
                ) from exc
            except BusyError as exc:
                raise busy(config.run_id, config.store, exc) from exc
    finally:
        if status_line is not None:
            status_line.stop()
        store.close()
    snap = counter.snapshot()
    interrupted = interrupt.requested or result is None
    status = "canceled" if result is None else str(result.status)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "run_id": config.run_id,
                    "command": verb,
                    "status": status,
                    "interrupted": interrupted,
                    "revision": result.revision if result is not None else snap.revision,
                    "saves": result.saves if result is not None else None,
                    "total_nodes": snap.total_nodes,
                    "confirmed": snap.confirmed,
                    "restored": snap.restored,
                    "retries": snap.retries,
                    "failed_attempts": snap.failed_attempts,
                    "elapsed_seconds": round(snap.elapsed, 3),
                    "error": (
                        f"{type(result.error).__name__}: {result.error}"
                        if result is not None and result.error is not None
                        else None
                    ),
                    "store": config.store.describe(),
                    "outputs": (
                        _json_outputs(graph, result)
                        if result is not None and status == "completed"
                        else None
                    ),
                },
                indent=2,
            )
        )
    hint = _resume_hint(config_arg, run_id_option)
    if interrupted:
        if not as_json:
            click.echo(
                f"interrupted: run {config.run_id!r} stopped at revision {snap.revision} with "
                f"{snap.confirmed + snap.restored} of {snap.total_nodes} nodes done; the record "
                f"stays resumable. Continue it with: {hint}",
                err=True,
            )
        sys.exit(interrupt.exit_code)
    assert result is not None
    if not as_json:
        summary = (
            f"{_count(snap.confirmed, 'node')} confirmed, {snap.restored} restored from "
            f"checkpoint, "
            f"{snap.retries} {'retry' if snap.retries == 1 else 'retries'}; revision "
            f"{result.revision} in the {config.store.describe()}"
        )
        if status == "completed":
            click.echo(f"run {config.run_id!r} completed in {snap.elapsed:.1f} s: {summary}")
            for name, value in _leaf_outputs(graph, result):
                click.echo(f"  {name} = {_short(value)}")
        else:
            click.echo(f"run {config.run_id!r} {status} after {snap.elapsed:.1f} s: {summary}")
            if result.error is not None:
                click.echo(f"error: {result.error}", err=True)
            click.echo(
                f"inspect it with: durable inspect {shlex.quote(config_arg)}"
                + (f" {shlex.quote(config.run_id)}" if run_id_option is not None else ""),
                err=True,
            )
    if status != "completed":
        sys.exit(ExitCode.RUN_FAILED)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _before_start(
    exc: CheckpointError, config: Any, config_arg: str, run_id_option: str | None
) -> DurableError:
    """Name a refusal that came before anything was saved by what it really is."""
    cause = exc.__cause__
    if isinstance(cause, ConflictError):
        again = f"durable run {shlex.quote(config_arg)} --run-id NEW-ID"
        return ConflictError(
            f"run {config.run_id!r} already exists in the {config.store.describe()}: continue "
            f"it with '{_resume_hint(config_arg, run_id_option)}', or start another run with "
            f"'{again}'. Nothing was saved"
        )
    if isinstance(cause, CodecError):
        # The codec layer's message already says what to do (and, for a missing codec, how
        # to register one); repeating advice here would be wrong for NaN or a lock.
        return ConfigError(f"{config.path}: [inputs]: {cause}. Nothing was saved")
    return exc
