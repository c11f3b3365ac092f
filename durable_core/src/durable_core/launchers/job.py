"""The worker's side of a launch: :func:`run_job` starts or resumes one run through the durable
runtime, exactly as ``durable run --resume-if-exists`` does, and reports how it ended (X-LAUNCH).

It never raises: a run that another process owns is :attr:`~LaunchStatus.BUSY` (after a short
grace, so that a probe holding the run for an instant is not mistaken for an owner), a refusal
is :attr:`~LaunchStatus.ERROR`; what the worker cannot survive (its process killed) is the
launcher's to notice.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from durable_core.launchers.base import LaunchStatus, RunJob, RunOutcome

__all__ = ["json_outputs", "run_job"]

_FIRST_PAUSE = 0.05
_LONGEST_PAUSE = 0.5


def run_job(job: RunJob) -> RunOutcome:
    """``run_or_resume`` of ``job``'s run in this process; the outcome, never an exception.

    The configuration is loaded, its graph imported (once per process: imports are cached),
    ``job.inputs`` and ``job.store`` replace the config's, and the run is watched for
    ``durable cancel`` while it runs, as ``durable run`` does. The worker's process-wide plugin
    manager (``default_plugins()``) serves every run it gets; each graph's module joins it as a
    plugin once.

    Returns:
        A :class:`RunOutcome`: ``completed``, ``failed`` or ``canceled`` when it ran here,
        ``busy`` when another process owned it for longer than ``job.busy_grace`` seconds,
        ``error`` when it was refused before it started.
    """
    from durable_core.errors import BusyError

    started = time.monotonic()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    pause = _FIRST_PAUSE
    first_busy: float | None = None
    while True:
        try:
            return _run(job, started, worker)
        except BusyError as exc:
            now = time.monotonic()
            first_busy = now if first_busy is None else first_busy
            if now - first_busy + pause > job.busy_grace:
                return RunOutcome(
                    job.run_id,
                    LaunchStatus.BUSY,
                    error=f"{type(exc).__name__}: {exc}",
                    worker=worker,
                    busy=True,
                )
        except Exception as exc:  # a refusal, or a bug: reported, never raised to the pool
            return RunOutcome(
                job.run_id,
                LaunchStatus.ERROR,
                error=f"{type(exc).__name__}: {exc}",
                elapsed=time.monotonic() - started,
                worker=worker,
            )
        time.sleep(pause)
        pause = min(pause * 2, _LONGEST_PAUSE)


def _run(job: RunJob, started: float, worker: str) -> RunOutcome:
    """One try of :func:`run_job`; raises ``BusyError`` when the run is owned."""
    from durable_core import history
    from durable_core.config import load_config
    from durable_core.durable import Runtime
    from durable_core.graph import CancelToken
    from durable_core.plugins import default_plugins
    from durable_core.store.capabilities import Capability, capabilities

    config = load_config(job.config).with_run_id(job.run_id)
    config = config.with_overrides(
        inputs=dict(job.inputs), max_running=job.max_running, store=job.store
    )
    pm = default_plugins()
    graph = config.load_graph()
    config.register_graph_module(pm)
    codecs = config.make_codecs(pm)
    inputs = config.resolve_inputs(graph)
    executor = config.open_executor(pm)
    try:
        store = config.open_store(pm)
    except BaseException:
        if executor is not None:
            executor.close()
        raise
    token = CancelToken()
    stop_watching = None
    try:
        if Capability.CANCEL_REQUESTS in capabilities(store):
            stop_watching = store.watch_cancel(config.run_id, token.cancel)
        runtime = Runtime(store, codecs, plugins=pm, executor=executor)
        result = runtime.run_or_resume(
            graph,
            run_id=config.run_id,
            version=config.version,
            inputs=inputs,
            max_running=config.runtime.max_running,
            cancel=token,
            input_identity=config.input_identity(graph),
            suspend=job.suspend,
        )
    finally:
        if stop_watching is not None:
            stop_watching()
        history.flush()
        store.close()
        if executor is not None:
            executor.close()
    status = LaunchStatus(str(result.status))
    error = result.error
    return RunOutcome(
        job.run_id,
        status,
        error=None if error is None else f"{type(error).__name__}: {error}",
        outputs=json_outputs(graph, result) if status is LaunchStatus.COMPLETED else None,
        revision=result.revision,
        elapsed=time.monotonic() - started,
        worker=worker,
    )


def json_outputs(graph: Any, result: Any) -> dict[str, Any]:
    """The root graph's results nobody in the graph consumes (what the run was for): JSON
    values as they are, anything else as its ``repr``, a skipped one as ``{"skipped": true}``."""
    import json

    required = {key.name for node in graph.nodes.values() for key in node.requires}
    out: dict[str, Any] = {}
    for node in graph.nodes.values():
        for key in node.provides:
            if key.name in required or getattr(key, "stream", False):
                continue
            if result.skipped(key):
                out[key.name] = {"skipped": True}
                continue
            value = result.get(key)
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError):
                value = repr(value)
            out[key.name] = value
    return dict(sorted(out.items()))
