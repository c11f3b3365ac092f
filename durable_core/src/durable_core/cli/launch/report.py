"""The last step of a launch: the result reported as JSON or as text with what to do next
(resume, inspect, fork), the failing body's place and traceback, and the exit code."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

from durable_core.cli.exitcodes import ExitCode
from durable_core.cli.launch.hints import fork_hint, inspect_hint, resume_hint
from durable_core.cli.launch.request import LaunchRequest

if TYPE_CHECKING:
    from durable_core.cli.launch.execute import Outcome
    from durable_core.cli.launch.prepare import Prepared

__all__ = ["logged_failure", "report"]

_SKIPPED = object()
"""Stands for a skipped result in :func:`_leaf_outputs`."""


def report(request: LaunchRequest, prepared: Prepared, outcome: Outcome) -> None:
    """Print the outcome (JSON on stdout with ``--json``; else a summary on stdout and what to
    do next on stderr); exit 130/143 when interrupted, 1 unless the run completed."""
    if request.as_json:
        click.echo(json.dumps(_json_report(prepared, outcome), indent=2))
    if outcome.interrupted:
        _interrupted(request, prepared, outcome)
    result = outcome.result
    assert result is not None
    status = str(result.status)
    if not request.as_json:
        _text_report(request, prepared, outcome, status)
    if status not in ("completed", "waiting"):
        sys.exit(ExitCode.RUN_FAILED)


def _json_report(prepared: Prepared, outcome: Outcome) -> dict[str, Any]:
    config, result, snap, plan = prepared.config, outcome.result, outcome.progress, outcome.plan
    status = "canceled" if result is None else str(result.status)
    return {
        "run_id": config.run_id,
        "command": outcome.verb,
        "status": status,
        "interrupted": outcome.interrupted,
        "cancel_requested": outcome.cancel_requested,
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
            _json_outputs(prepared.graph, result)
            if result is not None and status == "completed"
            else None
        ),
    }


def _interrupted(request: LaunchRequest, prepared: Prepared, outcome: Outcome) -> NoReturn:
    snap = outcome.progress
    if not request.as_json:
        click.echo(
            f"interrupted: run {prepared.run_id!r} stopped at revision {snap.revision} with "
            f"{snap.confirmed + snap.restored} of {snap.total_nodes} nodes done; the record "
            f"stays resumable. Continue it with: {resume_hint(request)}",
            err=True,
        )
    sys.exit(outcome.exit_code)


def _text_report(request: LaunchRequest, prepared: Prepared, outcome: Outcome, status: str) -> None:
    config, result, snap = prepared.config, outcome.result, outcome.progress
    summary = (
        f"{_count(snap.confirmed, 'node')} confirmed, {snap.restored} restored from "
        f"checkpoint, "
        f"{snap.retries} {'retry' if snap.retries == 1 else 'retries'}; revision "
        f"{result.revision} in the {config.store.describe()}"
    )
    if status == "completed":
        click.echo(f"run {config.run_id!r} completed in {snap.elapsed:.1f} s: {summary}")
        for name, value in _leaf_outputs(prepared.graph, result):
            click.echo(f"  {name} = {_short(value)}")
        return
    if status == "waiting":
        from durable_core.durable.waiting import report_waiting

        report_waiting(
            request.config_arg, config.run_id, result.waiting, summary, resume_hint(request)
        )
        return
    click.echo(f"run {config.run_id!r} {status} after {snap.elapsed:.1f} s: {summary}")
    if result.error is not None:
        click.echo(f"error: {result.error}", err=True)
        _explain_failure(result.error, outcome.logged)
    if status == "canceled":
        why = " on request ('durable cancel')" if outcome.cancel_requested else ""
        click.echo(
            f"canceled{why}: the record stays resumable. Continue it with: {resume_hint(request)}",
            err=True,
        )
    click.echo(f"inspect it with: {inspect_hint(request, config.run_id)}", err=True)
    if status == "failed":  # failed for good: resume would fail again, a fork goes on
        click.echo(
            f"after a fix, continue its confirmed work with: {fork_hint(request, config.run_id)}",
            err=True,
        )


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


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def logged_failure(store: Any, run_id: str, result: Any) -> dict[str, Any] | None:
    """The run log's last failure of the node a failed result names, when the error itself
    does not say where it failed (a node that failed in an earlier process); read before the
    store is closed (the history writer is flushed when a run ends)."""
    from durable_core import history
    from durable_core.durable.failures import failure_of

    history.flush()  # what the run wrote is in its history before the store closes
    error = getattr(result, "error", None)
    if error is None or failure_of(error).where:
        return None
    from durable_core.plugins.runlog import last_failures

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
