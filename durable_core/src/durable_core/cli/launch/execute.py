"""The run step of a launch: the durable runtime over the prepared store, the fork (for
``fork``), the run or resume itself with Ctrl-C/SIGTERM, ``durable cancel`` requests and the
progress line, and its refusals told in the command line's words."""

from __future__ import annotations

import sys
from typing import Any

import attrs

from durable_core.cli.launch.fork import start_fork
from durable_core.cli.launch.interrupt import Interrupt
from durable_core.cli.launch.prepare import Prepared
from durable_core.cli.launch.refusals import REFUSALS, explain
from durable_core.cli.launch.report import logged_failure
from durable_core.cli.launch.request import LaunchRequest
from durable_core.errors import CheckpointError, ConflictError

__all__ = ["Outcome", "execute"]


@attrs.frozen
class Outcome:
    """How a launched run ended, for the report.

    Attributes:
        verb: the command as it ran: ``run``, ``resume`` (also a ``run --resume-if-exists``
            that found the run) or ``fork``.
        result: the run's :class:`~durable_core.durable.DurableResult`; ``None`` when a
            second signal stopped waiting for it.
        plan: the :class:`~durable_core.durable.ForkPlan` of a fork, else ``None``.
        progress: the progress counter's last snapshot.
        interrupted: a signal stopped the run (or waiting for it).
        exit_code: the exit code of the signal that interrupted the run.
        cancel_requested: ``durable cancel`` asked the run to stop.
        logged: the run log's last failure of the node the result's error names, when the
            error does not say where it failed (see :func:`~.report.logged_failure`).
    """

    verb: str
    result: Any
    plan: Any
    progress: Any
    interrupted: bool
    exit_code: int
    cancel_requested: bool
    logged: dict[str, Any] | None


@attrs.define
class _Run:
    """What the run step learns on its way: the verb it ran as, the fork, the result."""

    verb: str
    plan: Any = None
    result: Any = None


def execute(request: LaunchRequest, prepared: Prepared) -> Outcome:
    """Run, resume or fork the prepared run; the store stays open (the caller closes it).

    Raises:
        DurableError: the run was refused before or while it ran (see
            :func:`~.refusals.explain`); nothing is reported then.
    """
    from durable_core.cli.progress import ProgressCounter, StatusLine
    from durable_core.durable import Runtime
    from durable_core.graph import CancelToken
    from durable_core.store import Capability, capabilities

    config, store = prepared.config, prepared.store
    counter = ProgressCounter()
    token = CancelToken()
    interactive = not request.as_json and sys.stdout.isatty() and sys.stderr.isatty()
    run = _Run(request.verb)
    status_line = None
    stop_watching = None
    cancel_requested: list[bool] = []
    logged = None

    def on_cancel_request() -> None:  # 'durable cancel' from another process or host
        cancel_requested.append(True)
        token.cancel()

    try:
        if Capability.CANCEL_REQUESTS in capabilities(store):
            stop_watching = store.watch_cancel(config.run_id, on_cancel_request)
        runtime = Runtime(
            store,
            prepared.codecs,
            observers=[counter],
            plugins=prepared.pm,
            executor=prepared.executor,
        )
        counter.watch(runtime.activity)  # stream elements and messages on the progress line
        if interactive:
            status_line = StatusLine(counter, sys.stderr, label=config.run_id).start()
        with Interrupt(token, quiet=request.as_json) as interrupt:
            options: dict[str, Any] = {
                "run_id": config.run_id,
                "version": config.version,
                "inputs": prepared.inputs,
                "max_running": config.runtime.max_running,
                "cancel": token,
                "input_identity": config.input_identity(prepared.graph),
            }
            if request.suspend:
                options["suspend"] = True
            try:
                _start(run, runtime, request, prepared, options, counter)
            except KeyboardInterrupt:
                run.result = None
            except REFUSALS as exc:
                started = counter.snapshot().started
                told = explain(exc, request, config, started=started, forked=run.plan is not None)
                if told is exc:
                    raise
                raise told from exc
    finally:
        if stop_watching is not None:
            stop_watching()
        if status_line is not None:
            status_line.stop()
        logged = logged_failure(store, config.run_id, run.result)
    return Outcome(
        verb=run.verb,
        result=run.result,
        plan=run.plan,
        progress=counter.snapshot(),
        interrupted=interrupt.requested or run.result is None,
        exit_code=interrupt.exit_code,
        cancel_requested=bool(cancel_requested),
        logged=logged,
    )


def _start(
    run: _Run,
    runtime: Any,
    request: LaunchRequest,
    prepared: Prepared,
    options: dict[str, Any],
    counter: Any,
) -> None:
    """Fork (for ``fork``), then run or resume; ``run --resume-if-exists`` resumes a run that
    already has a record, when nothing started yet."""
    graph = prepared.graph
    try:
        if request.fork_from is not None:
            run.plan = start_fork(runtime, graph, request, options)
        call = runtime.resume if request.resume or run.plan is not None else runtime.run
        run.result = call(graph, **options)
    except CheckpointError as exc:
        exists = isinstance(exc.__cause__, ConflictError)
        if not (request.resume_if_exists and exists and not counter.snapshot().started):
            raise
        run.verb = "resume"
        run.result = runtime.resume(graph, **options)
