"""The run log: each run's recovery events, with times, in the run's history (X-HIST).

The run record holds no time and no error text (the data model forbids captured business error
text in it). The run log keeps them beside it, for operators: when a run started and resumed,
each attempt and how long it took, the exception type and message of each failed try (shortened
and with secrets scrubbed), where it failed and its bounded traceback, each confirmed node's
duration, and how the run ended.

It is written by the plugin ``runlog`` of ``durable-core`` on the ``durable_recovery_event``
hook, and read back on the ``durable_saved_definition`` and ``durable_saved_inputs`` hooks, so
it can be replaced or turned off (``DURABLE_BLOCK_PLUGINS=runlog``). ``durable log``
prints it; ``durable inspect`` shows each node's last failure and the run's times from it,
``durable list`` when it started, and a refused ``resume`` what changed in the definition.

Where: in the run's history (:mod:`durable_core.history`): in the run's store beside its record
when the store has the capability :class:`~durable_core.maintenance.RunHistory` (every built-in
store has it; with PostgreSQL every host sharing the store sees the same log), else in a local
file keyed by the store's identity and the run's root scope (in :func:`log_directory`). Either
way the log belongs to that run in that store: a run of the same id in another store, or a run
deleted and started again under the same id, has a log of its own.

The hook only queues the event (:data:`~durable_core.history.WRITER`); its entries are made and
appended by the writer's thread, so the log never delays or fails a save.

Each entry is one JSON object::

    {"time": "2026-12-01T09:00:00.123456+00:00", "event": "attempt_failed", "run_id": "r",
     "revision": 4, "node": "report/render", "attempt": "2/3", "attempt_id": "…",
     "error": "ValueError: …", "where": "jobs/etl.py:42 in load", "traceback": "…",
     "seconds": 0.51}

``status`` is set on ``run_finished``; ``sequence`` on ``message_failed`` (the message's input
sequence); ``boundary`` on the events of a Retry try (its boundary in the record). A
``node_running`` entry says when the node's body started, its inputs having arrived (once per
node per process); its ``waiting`` is the time since its root attempt started or was adopted.
``attempt_failed`` and ``node_confirmed``, for an attempt that started in this process, have
``seconds``, the attempt's time running (since its node's body started, or since it started
when that was later: a later Retry try), and ``waiting``, its time before that (waiting for
inputs and a slot); the two add up to the attempt's duration.

A ``definition`` entry keeps the fingerprints of the parts of the graph's definition (each node,
key, graph input and graph; see :mod:`durable_core.durable.definition_diff`), so that when
``resume`` is refused because the definition changed, the error can name what changed. It is
written after ``run_started``, and after ``run_resumed`` when the log holds none for that
definition yet (a fork, a run started where the log was not kept)::

    {"time": "…", "event": "definition", "run_id": "r", "revision": 1,
     "definition": "<SHA-256 hex of the whole definition>",
     "parts": {"graph:": "…", "node:load": "…", "key:rows": "…", "input:rows": "…"}}

An ``inputs`` entry keeps the fingerprint of each root input (its name, codec id, version and
digest: never its value), so that when ``resume`` is refused because the inputs differ, the
error can name the input that changed. It is written after ``definition`` on the same terms::

    {"time": "…", "event": "inputs", "run_id": "r", "revision": 1,
     "inputs": "<the record's Inputs fingerprint>", "keys": {"rows": "…", "limit": "…"}}
"""

from __future__ import annotations

import datetime
import json
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from durable_core.history import (
    LOG_DIR_ENV,
    WRITER,
    HistoryTarget,
    history_of,
    log_directory,
    root_scope_of,
)
from durable_core.plugins.hookspecs import hookimpl

__all__ = [
    "LOG_DIR_ENV",
    "MAX_ERROR_CHARS",
    "RunLogWriter",
    "durable_recovery_event",
    "durable_saved_definition",
    "durable_saved_inputs",
    "last_failures",
    "log_directory",
    "log_times",
    "read_log",
    "saved_definition",
    "saved_inputs",
    "scrub",
]

MAX_ERROR_CHARS = 1000
"""Error texts longer than this are cut (with ``…``)."""

_SECRETS = [
    re.compile(
        r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key)(\s*[=:]\s*)(\S+)"
    ),
    re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/@\s]*):([^@\s]+)@"),
    re.compile(r"(?i)\b(bearer)(\s+)([A-Za-z0-9._~+/=-]+)"),
]


def scrub(text: str, limit: int | None = MAX_ERROR_CHARS) -> str:
    """Shorten an error text to ``limit`` characters (``None``: keep its length, for a
    traceback already bounded) and hide what looks like a secret (``password=…``, a URL's
    password, a bearer token)."""
    text = _SECRETS[0].sub(r"\1\2***", text)
    text = _SECRETS[1].sub(r"\1:***@", text)
    text = _SECRETS[2].sub(r"\1\2***", text)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


_MAX_STARTED = 100_000
"""Attempt start times kept at most (attempts under way in this process)."""


def _text(entry: dict[str, Any]) -> str:
    """One entry as one line of valid Unicode JSON."""
    return json.dumps(entry, ensure_ascii=False).encode("utf-8", "replace").decode("utf-8")


class RunLogWriter:
    """Makes the entries of events; one instance per process (the plugin's), called on the
    history writer's thread only (:meth:`entries`), in the order the events came."""

    def __init__(self) -> None:
        self._started: dict[str, float] = {}
        # When the body of a node began, by (store, run, root scope, scope id, node id).
        self._running: dict[tuple[Any, ...], float] = {}
        # The definitions known to be in a run's history: (store, run, root scope, fingerprint).
        self._definitions: set[tuple[int, str, str, str]] = set()

    def entries(self, target: HistoryTarget, event: Any, now: float) -> list[str]:
        """The entries for ``event`` (a :class:`~durable_core.durable.RecoveryEvent`) saved at
        ``now`` (seconds since the epoch): its own, and a ``definition`` entry after a start or
        a resume whose definition the history does not hold yet."""
        kind = str(event.kind)
        line: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(now, datetime.UTC).isoformat(),
            "event": kind,
            "run_id": event.run_id,
            "revision": event.revision,
        }
        if event.node_id:
            line["node"] = (
                f"{event.scope_path}/{event.node_id}" if event.scope_path else event.node_id
            )
        if event.attempt_index:
            line["attempt"] = f"{event.attempt_index}/{event.attempt_limit}"
        if event.attempt_id:
            line["attempt_id"] = event.attempt_id
        if event.status:
            line["status"] = event.status
        if event.error:
            line["error"] = scrub(event.error)
        if getattr(event, "boundary", ""):
            line["boundary"] = event.boundary
        if getattr(event, "sequence", 0):
            line["sequence"] = event.sequence
        if getattr(event, "where", ""):
            line["where"] = event.where
        if getattr(event, "traceback", ""):
            line["traceback"] = scrub(event.traceback, limit=None)
        if event.attempt_id:
            self._times(line, kind, (*target.key, event.scope_id, event.node_id), event, now)
        out = [_text(line)]
        if kind in ("run_started", "run_resumed"):
            held: list[str] | None = None  # the history, read at most once

            def history() -> list[str]:
                nonlocal held
                if held is None:
                    held = history_of(target.store).read_history(target.run_id, target.root_scope)
                return held

            definition = getattr(event, "definition", None)
            if definition is not None:
                entry = self._definition_entry(target, line, kind, definition, history)
                if entry is not None:
                    out.append(_text(entry))
            inputs = getattr(event, "inputs", None)
            if inputs is not None:
                entry = self._inputs_entry(target, line, kind, inputs, history)
                if entry is not None:
                    out.append(_text(entry))
        return out

    def _inputs_entry(
        self,
        target: HistoryTarget,
        line: dict[str, Any],
        kind: str,
        inputs: Any,
        history: Callable[[], list[str]],
    ) -> dict[str, Any] | None:
        """The ``inputs`` entry to append after a run's start or resume (None when the
        history already holds one for these inputs)."""
        known = (*target.key, "inputs:" + inputs.fingerprint)
        if known in self._definitions:
            return None
        self._definitions.add(known)
        marker = _inputs_marker(inputs.fingerprint)
        if kind != "run_started" and any(marker in entry for entry in history()):
            return None
        return {
            "time": line["time"],
            "event": "inputs",
            "run_id": line["run_id"],
            "revision": line["revision"],
            "inputs": inputs.fingerprint,
            "keys": dict(inputs.keys),
        }

    def _times(
        self, line: dict[str, Any], kind: str, node: tuple[Any, ...], event: Any, now: float
    ) -> None:
        """Keep the start of an attempt and of its node's body; give an ended attempt its time
        running (``seconds``) and its time waiting (``waiting``, before the body started), and
        a body that starts the time its node waited (``waiting``)."""
        attempt_id = event.attempt_id
        if kind in ("attempt_started", "attempt_adopted"):
            if len(self._started) >= _MAX_STARTED:
                self._started.pop(next(iter(self._started)))
            self._started[attempt_id] = now
            if _is_root(event):
                self._running.pop(node, None)  # a root attempt: its body has not started
        elif kind == "node_running":
            if len(self._running) >= _MAX_STARTED:
                self._running.pop(next(iter(self._running)))
            self._running[node] = now
            started = self._started.get(attempt_id)
            if started is not None:
                line["waiting"] = round(now - started, 6)
        elif kind in ("attempt_failed", "node_confirmed"):
            started = self._started.pop(attempt_id, None)
            if started is None:
                return
            running = self._running.get(node)
            body = now if running is None else min(max(started, running), now)
            line["seconds"] = round(now - body, 6)
            line["waiting"] = round(body - started, 6)
            if kind == "node_confirmed" or _is_root(event):
                self._running.pop(node, None)

    def _definition_entry(
        self,
        target: HistoryTarget,
        line: dict[str, Any],
        kind: str,
        definition: Any,
        history: Callable[[], list[str]],
    ) -> dict[str, Any] | None:
        """The ``definition`` entry to append after a run's start or resume (None when the
        history already holds this definition's parts)."""
        fingerprint = definition.fingerprint
        known = (*target.key, fingerprint)
        if known in self._definitions:
            return None
        self._definitions.add(known)
        if kind != "run_started" and _holds_definition(history(), fingerprint):
            return None
        return {
            "time": line["time"],
            "event": "definition",
            "run_id": line["run_id"],
            "revision": line["revision"],
            "definition": fingerprint,
            "parts": definition.parts(),
        }


def _is_root(event: Any) -> bool:
    """Whether ``event`` is about a node's root attempt (not a Retry try)."""
    return not getattr(event, "boundary", "") and event.kind != "message_failed"


def _inputs_marker(fingerprint: str) -> str:
    return f'"inputs": "{fingerprint}"'


def _definition_marker(fingerprint: str) -> str:
    return f'"definition": "{fingerprint}"'


def _holds_definition(entries: Iterable[str], fingerprint: str) -> bool:
    """Whether ``entries`` hold a ``definition`` entry for ``fingerprint`` (a text search: no
    entry is parsed)."""
    marker = _definition_marker(fingerprint)
    return any(marker in entry for entry in entries)


_WRITER = RunLogWriter()


@hookimpl
def durable_recovery_event(event: Any, history: HistoryTarget | None) -> None:
    """Queue ``event`` for its run's history (see the module documentation); the entries are
    made and appended on the history writer's thread."""
    if history is not None:
        WRITER.submit(history, _WRITER.entries, event, time.time())


def read_log(store: Any, run_id: str, root_scope: str | None = None) -> list[dict[str, Any]]:
    """The run log of ``run_id`` in ``store``, oldest first: the history of the run whose
    record has ``root_scope`` (None: the run's current record, read without its session where
    the store can). An entry that is not a JSON object is left out.

    Raises:
        NotFoundError: ``root_scope`` is None and the run has no record.
        BusyError: ``root_scope`` is None, the run is owned and the store cannot be read
            without its session.
    """
    if root_scope is None:
        root_scope = root_scope_of(store, run_id)
    out = []
    for text in history_of(store).read_history(run_id, root_scope):
        try:
            entry = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def _safely(store: Any, run_id: str, root_scope: str | None) -> list[dict[str, Any]]:
    """:func:`read_log`, or nothing when the log cannot be read (it is extra information)."""
    try:
        return read_log(store, run_id, root_scope)
    except Exception:
        return []


@hookimpl
def durable_saved_definition(history: HistoryTarget, fingerprint: str) -> dict[str, str] | None:
    """The parts of the definition ``fingerprint`` of the run of ``history``, from its log
    (:func:`saved_definition`)."""
    return saved_definition(history.store, history.run_id, fingerprint, history.root_scope)


@hookimpl
def durable_saved_inputs(history: HistoryTarget, fingerprint: str) -> dict[str, str] | None:
    """The per-input fingerprints of the inputs ``fingerprint`` of the run of ``history``,
    from its log (:func:`saved_inputs`)."""
    return saved_inputs(history.store, history.run_id, fingerprint, history.root_scope)


def saved_definition(
    store: Any, run_id: str, fingerprint: str, root_scope: str | None = None
) -> dict[str, str] | None:
    """The parts' fingerprints of the definition ``fingerprint`` of ``run_id`` in ``store``,
    from the last ``definition`` entry of its log that has that whole fingerprint; None when
    the log has none."""
    return _last_parts(store, run_id, root_scope, "definition", "definition", fingerprint, "parts")


def saved_inputs(
    store: Any, run_id: str, fingerprint: str, root_scope: str | None = None
) -> dict[str, str] | None:
    """The fingerprint of each root input of ``run_id`` in ``store`` whose inputs have the
    whole fingerprint ``fingerprint``, from the last ``inputs`` entry of its log for it; None
    when the log has none."""
    return _last_parts(store, run_id, root_scope, "inputs", "inputs", fingerprint, "keys")


def _last_parts(
    store: Any,
    run_id: str,
    root_scope: str | None,
    event: str,
    whole_field: str,
    whole: str,
    parts_field: str,
) -> dict[str, str] | None:
    """The ``parts_field`` mapping (name → fingerprint) of the last ``event`` entry of the run's
    log whose ``whole_field`` is ``whole``; None when there is none."""
    found: dict[str, str] | None = None
    for entry in _safely(store, run_id, root_scope):
        parts = entry.get(parts_field)
        if (
            entry.get("event") == event
            and entry.get(whole_field) == whole
            and isinstance(parts, dict)
            and all(isinstance(v, str) for v in parts.values())
        ):
            found = parts
    return found


def last_failures(
    store: Any, run_id: str, root_scope: str | None = None, *, entries: Any = None
) -> dict[str, dict[str, Any]]:
    """Each node's last failed attempt in the run's log (by node path), unless the node was
    confirmed after it; empty without a log. ``entries``: the log already read."""
    failures: dict[str, dict[str, Any]] = {}
    for entry in entries if entries is not None else _safely(store, run_id, root_scope):
        if entry.get("event") == "run_started":
            failures.clear()
        elif entry.get("event") == "attempt_failed" and "node" in entry:
            failures[entry["node"]] = entry
        elif entry.get("event") == "node_confirmed" and "node" in entry:
            failures.pop(entry["node"], None)
    return failures


def log_times(
    store: Any, run_id: str, root_scope: str | None = None, *, entries: Any = None
) -> dict[str, Any]:
    """When the run started (its ``run_started``), its last event, and the time between, from
    its log: ``{"started": ISO time, "last_event": ISO time, "duration_seconds": …}``; empty
    without a log. ``entries``: the log already read."""
    first = last = None
    for entry in entries if entries is not None else _safely(store, run_id, root_scope):
        when = entry.get("time")
        if not isinstance(when, str):
            continue
        if entry.get("event") == "run_started":
            first = when
        last = when
    out: dict[str, Any] = {}
    if first is not None:
        out["started"] = first
    if last is not None:
        out["last_event"] = last
    if first is not None and last is not None:
        span = datetime.datetime.fromisoformat(last) - datetime.datetime.fromisoformat(first)
        out["duration_seconds"] = round(span.total_seconds(), 3)
    return out
