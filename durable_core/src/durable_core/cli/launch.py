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
from durable_core.cli.targets import busy, store_words
from durable_core.config._text import redact
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
            if signum == signal.SIGINT:
                name, again = "Ctrl-C", "Ctrl-C again"
            else:
                name = signal.Signals(signum).name
                again = f"send {name} again (or press Ctrl-C)"
            click.echo(
                f"\nstopping ({name}): waiting for running nodes to end ({again} to stop at once)",
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


def _resume_hint(config_arg: str, run_id_option: str | None, store_url: str | None = None) -> str:
    return _command_hint("resume", config_arg, run_id_option, store_url)


def _run_hint(config_arg: str, run_id_option: str | None, store_url: str | None = None) -> str:
    return _command_hint("run", config_arg, run_id_option, store_url)


def _command_hint(
    verb: str, config_arg: str, run_id_option: str | None, store_url: str | None = None
) -> str:
    command = f"durable {verb} {shlex.quote(config_arg)}"
    if run_id_option is not None:
        command += f" --run-id {shlex.quote(run_id_option)}"
    if store_url is not None:
        command += f" --store {shlex.quote(redact(store_url))}"
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


def launch(
    config_arg: str,
    run_id_option: str | None,
    as_json: bool,
    *,
    resume: bool,
    resume_if_exists: bool = False,
    input_options: tuple[str, ...] = (),
    max_running: int | None = None,
    fork_from: str | None = None,
    rerun: tuple[str, ...] = (),
    store_url: str | None = None,
    suspend: bool = False,
) -> None:
    """Run (or resume) the CONFIG's graph and report the result; exits 1 unless completed
    (or, with ``suspend``, waiting).

    Args:
        config_arg: the configuration file, as given.
        run_id_option: ``--run-id``, or ``None`` for the config's.
        as_json: print the result as JSON.
        resume: continue an existing run instead of starting one.
        resume_if_exists: (``run`` only) continue the run when it already has a record.
        input_options: ``--input KEY=VALUE`` / ``KEY=@FILE`` overrides of ``[inputs]``.
        max_running: ``--max-running``, overriding ``[runtime] max_running``.
        fork_from: (``fork``) the run to fork into the run id; ``rerun``: nodes to run again.
        store_url: ``--store URL``, replacing the config's ``[store]``.
        suspend: ``--suspend``: a run with nothing to do but wait ends ``waiting`` (exit 0).
    """
    import pathlib

    from durable_core.config import load_config, parse_store_url
    from durable_core.config.inputs import parse_input_override
    from durable_core.durable import Runtime
    from durable_core.graph import CancelToken
    from durable_core.plugins import make_plugin_manager
    from durable_core.progress import ProgressCounter, StatusLine

    config = load_config(config_arg).with_run_id(run_id_option)
    pm = make_plugin_manager()
    graph = config.load_graph()
    overrides = dict(
        parse_input_override(text, graph, pathlib.Path.cwd()) for text in input_options
    )
    store_override = None if store_url is None else parse_store_url(store_url, pm=pm)
    config = config.with_overrides(inputs=overrides, max_running=max_running, store=store_override)
    config.register_graph_module(pm)
    codecs = config.make_codecs(pm)
    inputs = config.resolve_inputs(graph)
    counter = ProgressCounter()
    interactive = not as_json and sys.stdout.isatty() and sys.stderr.isatty()
    token = CancelToken()
    verb = "fork" if fork_from is not None else "resume" if resume else "run"
    plan = None
    executor = config.open_executor(pm)
    store = config.open_store(pm)
    status_line = None
    stop_watching = None
    cancel_requested: list[bool] = []
    result: Any = None

    def on_cancel_request() -> None:  # 'durable cancel' from another process or host
        cancel_requested.append(True)
        token.cancel()

    try:
        from durable_core.maintenance import CancelRequests

        if isinstance(store, CancelRequests):
            stop_watching = store.watch_cancel(config.run_id, on_cancel_request)
        runtime = Runtime(store, codecs, observers=[counter], plugins=pm, executor=executor)
        counter.watch(runtime.activity)  # stream elements and messages on the progress line
        if interactive:
            status_line = StatusLine(counter, sys.stderr, label=config.run_id).start()
        with _Interrupt(token, quiet=as_json) as interrupt:
            options: dict[str, Any] = {
                "run_id": config.run_id,
                "version": config.version,
                "inputs": inputs,
                "max_running": config.runtime.max_running,
                "cancel": token,
                "input_identity": config.input_identity(graph),
            }
            if suspend:
                options["suspend"] = True
            try:
                try:
                    if fork_from is not None:
                        plan = _fork(runtime, graph, fork_from, rerun, options, as_json)
                    call = runtime.resume if resume or plan is not None else runtime.run
                    result = call(graph, **options)
                except CheckpointError as exc:
                    exists = isinstance(exc.__cause__, ConflictError)
                    if not (resume_if_exists and exists and not counter.snapshot().started):
                        raise
                    verb = "resume"
                    result = runtime.resume(graph, **options)
            except KeyboardInterrupt:
                result = None
            except CheckpointError as exc:
                if not counter.snapshot().started:
                    raise _before_start(exc, config, config_arg, run_id_option) from exc
                raise
            except NotFoundError as exc:
                if fork_from is not None and plan is None:
                    raise  # the run to fork is missing: _fork's message names it
                raise NotFoundError(
                    f"no record of run {config.run_id!r} in the {config.store.describe()}: "
                    f"check the store and the run id, or start it with "
                    f"'{_run_hint(config_arg, run_id_option, store_url)}' (a missing record "
                    "does not mean the run finished)"
                ) from exc
            except CorruptRecordError as exc:
                loaded = fork_from if fork_from is not None and plan is None else config.run_id
                if f"run {loaded!r}" in str(exc):  # the store's message names it already
                    raise
                raise CorruptRecordError(
                    f"run {loaded!r} in the {config.store.describe()} is corrupt: {exc} (what "
                    "to do: docs/operations.md, 'A corrupt record')",
                    path=exc.path,
                    rule=exc.rule,
                ) from exc
            except BusyError as exc:
                named = store_words(config_arg, store_url)
                raise busy(exc.run_id or config.run_id, config.store, exc, named) from exc
            except DefinitionMismatchError as exc:
                raise _with_config(exc, config_arg) from exc
    finally:
        if stop_watching is not None:
            stop_watching()
        if status_line is not None:
            status_line.stop()
        logged = _logged_failure(store, config.run_id, result)
        store.close()
        if executor is not None:
            executor.close()
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
                    "cancel_requested": bool(cancel_requested),
                    "revision": result.revision if result is not None else snap.revision,
                    "saves": result.saves if result is not None else None,
                    "total_nodes": snap.total_nodes,
                    "confirmed": snap.confirmed,
                    "restored": snap.restored,
                    "retries": snap.retries,
                    "stream_elements": snap.elements,
                    "messages": snap.messages,
                    "failed_attempts": snap.failed_attempts,
                    "elapsed_seconds": round(snap.elapsed, 3),
                    "error": (
                        f"{type(result.error).__name__}: {result.error}"
                        if result is not None and result.error is not None
                        else None
                    ),
                    "store": config.store.describe(),
                    **(
                        {"forked_from": plan.run_id, "copied": plan.copied, "rerun": plan.rerun}
                        if plan is not None
                        else {}
                    ),
                    "outputs": (
                        _json_outputs(graph, result)
                        if result is not None and status == "completed"
                        else None
                    ),
                },
                indent=2,
            )
        )
    hint = _resume_hint(config_arg, run_id_option, store_url)
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
        elif status == "waiting":
            from durable_core.durable.waiting import report_waiting

            report_waiting(config_arg, config.run_id, result.waiting, summary)
        else:
            click.echo(f"run {config.run_id!r} {status} after {snap.elapsed:.1f} s: {summary}")
            if result.error is not None:
                click.echo(f"error: {result.error}", err=True)
                _explain_failure(result.error, logged)
            if status == "canceled":
                why = " on request ('durable cancel')" if cancel_requested else ""
                click.echo(
                    f"canceled{why}: the record stays resumable. Continue it with: "
                    f"{_resume_hint(config_arg, run_id_option, store_url)}",
                    err=True,
                )
            where = (
                shlex.quote(config_arg)
                if store_url is None
                else f"--store {shlex.quote(redact(store_url))}"
            )
            click.echo(
                f"inspect it with: durable inspect {where}"
                + (
                    f" {shlex.quote(config.run_id)}"
                    if run_id_option is not None or store_url is not None
                    else ""
                ),
                err=True,
            )
            if status == "failed":  # failed for good: resume would fail again, a fork goes on
                fork = f"durable fork {shlex.quote(config_arg)} {shlex.quote(config.run_id)}"
                fork += " --new-run-id NEW"
                if store_url is not None:
                    fork += f" --store {shlex.quote(redact(store_url))}"
                click.echo(f"after a fix, continue its confirmed work with: {fork}", err=True)
    if status not in ("completed", "waiting"):
        sys.exit(ExitCode.RUN_FAILED)


def _fork(
    runtime: Any,
    graph: Any,
    fork_from: str,
    rerun: tuple[str, ...],
    options: dict[str, Any],
    as_json: bool,
) -> Any:
    """Create the fork's first record (see :func:`~durable_core.durable.fork.create_fork`)."""
    from durable_core.durable.fork import create_fork

    try:
        plan = create_fork(
            runtime,
            graph,
            run_id=fork_from,
            new_run_id=options["run_id"],
            version=options["version"],
            inputs=options["inputs"],
            rerun=rerun,
            input_identity=options["input_identity"],
        )
    except ConflictError as exc:
        raise ConflictError(
            f"run {options['run_id']!r} already exists: a fork needs a new run id ({exc})"
        ) from exc
    except NotFoundError as exc:
        raise NotFoundError(f"no record of run {fork_from!r} to fork: {exc}") from exc
    if not as_json:
        click.echo(
            f"forked run {fork_from!r} into {plan.new_run_id!r}: copied "
            f"{', '.join(plan.copied) or 'nothing'}; running again: "
            f"{', '.join(plan.rerun) or 'nothing'}",
            err=True,
        )
    return plan


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


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


def _logged_failure(store: Any, run_id: str, result: Any) -> dict[str, Any] | None:
    """The run log's last failure of the node a failed result names, when the error itself
    does not say where it failed (a node that failed in an earlier process); read before the
    store is closed (the history writer is flushed when a run ends)."""
    from durable_core import history
    from durable_core.durable.failures import failure_of

    history.flush()  # what the run wrote is in its history before the store closes
    error = getattr(result, "error", None)
    if error is None or failure_of(error).where:
        return None
    from durable_core.runlog import last_failures

    try:
        return last_failures(store, run_id).get(getattr(error, "path", "") or "")
    except Exception:  # extra information: never fail the command on it
        return None


def _explain_failure(error: BaseException, logged: dict[str, Any] | None) -> None:
    """Where the failing body failed (``at file:line in function``), and with ``--debug`` (or
    ``DURABLE_DEBUG``) its whole traceback, on stderr. A node that failed in an earlier
    process is explained from the run log (``logged``: its last failure there)."""
    from durable_core.cli.app import debug_enabled
    from durable_core.durable.failures import failure_of

    debug = debug_enabled(click.get_current_context())
    details = failure_of(error)
    if details.where:
        click.echo(f"  at {details.where}", err=True)
        if debug:
            click.echo(details.traceback.rstrip("\n"), err=True)
        return
    if logged is None or not logged.get("where"):
        return
    click.echo(
        f"  at {logged['where']} (try {logged.get('attempt', '?')}, from the run log)", err=True
    )
    if debug and logged.get("traceback"):
        click.echo(str(logged["traceback"]).rstrip("\n"), err=True)
