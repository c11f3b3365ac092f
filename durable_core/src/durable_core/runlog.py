"""The run log: an append-only JSON-lines file of each run's recovery events, with times.

The run record holds no time and no error text (the data model forbids captured business error
text in it). The run log keeps them beside it, for operators: when a run started and resumed,
each attempt and how long it took, the exception type and message of each failed try (shortened
and with secrets scrubbed), each confirmed node's duration, and how the run ended.

It is written by the plugin ``runlog`` of ``durable-core`` on the ``durable_recovery_event``
hook, so it can be replaced or turned off (``DURABLE_BLOCK_PLUGINS=runlog``). ``durable log``
prints it; ``durable inspect`` shows each node's last failure from it.

Where: one file per run id in :func:`log_directory`: ``$DURABLE_HOME/logs`` when
``DURABLE_HOME`` is set, else ``platformdirs.user_log_dir("durable")``. The file is chosen by
the run id alone: two stores on one machine holding the same run id share its log.

Each line is one JSON object::

    {"time": "2026-12-01T09:00:00.123456+00:00", "event": "attempt_failed", "run_id": "r",
     "revision": 4, "node": "report/render", "attempt": "2/3", "attempt_id": "…",
     "error": "ValueError: …", "seconds": 0.51}

``status`` is set on ``run_finished``; ``seconds`` (the attempt's duration in this process) on
``attempt_failed`` and ``node_confirmed`` when the attempt started in this process.

A ``definition`` line keeps the fingerprints of the parts of the graph's definition (each node,
key, graph input and graph; see :mod:`durable_core.durable.definition_diff`), so that when
``resume`` is refused because the definition changed, the error can name what changed. It is
written after ``run_started``, and after ``run_resumed`` when the log holds none for that
definition yet (a fork, a log removed, a run started on another host)::

    {"time": "…", "event": "definition", "run_id": "r", "revision": 1,
     "definition": "<SHA-256 hex of the whole definition>",
     "parts": {"graph:": "…", "node:load": "…", "key:rows": "…", "input:rows": "…"}}
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import pathlib
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

from durable_core.hookspecs import hookimpl

__all__ = [
    "LOG_DIR_ENV",
    "MAX_ERROR_CHARS",
    "RunLogWriter",
    "durable_recovery_event",
    "last_failures",
    "log_directory",
    "log_path",
    "log_times",
    "read_log",
    "saved_definition",
    "scrub",
]

LOG_DIR_ENV = "DURABLE_LOG_DIR"
"""Environment variable: the folder of the run logs (overrides the default)."""

MAX_ERROR_CHARS = 1000
"""Error texts longer than this are cut (with ``…``)."""

_SECRETS = [
    re.compile(
        r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key)(\s*[=:]\s*)(\S+)"
    ),
    re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/@\s]*):([^@\s]+)@"),
    re.compile(r"(?i)\b(bearer)(\s+)([A-Za-z0-9._~+/=-]+)"),
]


def log_directory() -> pathlib.Path:
    """``$DURABLE_LOG_DIR``, else ``$DURABLE_HOME/logs``, else
    ``platformdirs.user_log_dir("durable")``."""
    explicit = os.environ.get(LOG_DIR_ENV)
    if explicit:
        return pathlib.Path(explicit).expanduser().absolute()
    home = os.environ.get("DURABLE_HOME")
    if home:
        return pathlib.Path(home).expanduser().absolute() / "logs"
    import platformdirs

    return pathlib.Path(platformdirs.user_log_dir("durable"))


def log_path(run_id: str, directory: pathlib.Path | None = None) -> pathlib.Path:
    """The log file of ``run_id``: a readable prefix of the id plus a digest of all of it."""
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)[:40]
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return (directory or log_directory()) / f"{readable}-{digest}.jsonl"


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


_MAX_OPEN = 32
"""Run logs a process keeps open at once (runs under way in one process)."""


class RunLogWriter:
    """Appends events to run logs; one instance per process (the plugin's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: dict[str, float] = {}
        self._folders: set[pathlib.Path] = set()
        self._definitions: set[tuple[pathlib.Path, str]] = set()
        # Open append descriptors of the logs of runs under way, by path: a node's events cost
        # one write each, not an open and a close. A run's descriptor is opened again when
        # the run starts or resumes (its log may have been removed meanwhile) and closed
        # when it finishes; at most _MAX_OPEN stay open, the oldest is closed first.
        self._files: dict[pathlib.Path, int] = {}

    def write(self, event: Any) -> None:
        """Append one line for ``event`` (a :class:`~durable_core.durable.RecoveryEvent`)."""
        now = time.time()
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
        if getattr(event, "sequence", 0):
            line["sequence"] = event.sequence
        if getattr(event, "where", ""):
            line["where"] = event.where
        if getattr(event, "traceback", ""):
            line["traceback"] = scrub(event.traceback, limit=None)
        with self._lock:
            if kind in ("attempt_started", "attempt_adopted") and event.attempt_id:
                self._started[event.attempt_id] = now
            elif kind in ("attempt_failed", "node_confirmed") and event.attempt_id:
                started = self._started.pop(event.attempt_id, None)
                if started is not None:
                    line["seconds"] = round(now - started, 6)
            path = log_path(event.run_id)
            if path.parent not in self._folders:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._folders.add(path.parent)
            data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8", "replace")
            definition = getattr(event, "definition", None)
            if definition is not None and kind in ("run_started", "run_resumed"):
                data += self._definition_line(path, line, kind, definition)
            if kind in ("run_started", "run_resumed"):
                self._close(path)
            fd = self._files.get(path)
            if fd is None:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                if len(self._files) >= _MAX_OPEN:
                    self._close(next(iter(self._files)))
                self._files[path] = fd
            try:
                os.write(fd, data)
            finally:
                if kind == "run_finished":
                    self._close(path)

    def _close(self, path: pathlib.Path) -> None:
        fd = self._files.pop(path, None)
        if fd is not None:
            os.close(fd)

    def _definition_line(
        self, path: pathlib.Path, line: dict[str, Any], kind: str, definition: Any
    ) -> bytes:
        """The ``definition`` line to append after a run's start or resume (empty when the
        log already holds this definition's parts)."""
        fingerprint = definition.fingerprint
        if (path, fingerprint) in self._definitions:
            return b""
        if kind != "run_started" and _holds_definition(path, fingerprint):
            self._definitions.add((path, fingerprint))
            return b""
        self._definitions.add((path, fingerprint))
        entry = {
            "time": line["time"],
            "event": "definition",
            "run_id": line["run_id"],
            "revision": line["revision"],
            "definition": fingerprint,
            "parts": definition.parts(),
        }
        return (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8", "replace")


def _definition_marker(fingerprint: str) -> bytes:
    return f'"definition": "{fingerprint}"'.encode("ascii", "replace")


def _holds_definition(path: pathlib.Path, fingerprint: str) -> bool:
    """Whether the log at ``path`` has a ``definition`` line for ``fingerprint`` (a byte
    search: no line is parsed)."""
    try:
        with open(path, "rb") as f:
            return _definition_marker(fingerprint) in f.read()
    except OSError:
        return False


_WRITER = RunLogWriter()


@hookimpl
def durable_recovery_event(event: Any) -> None:
    """Append ``event`` to its run's log (see the module documentation)."""
    _WRITER.write(event)


def read_log(run_id: str, directory: pathlib.Path | None = None) -> Iterator[dict[str, Any]]:
    """The log's events, oldest first; a line that is not JSON (a torn last line) is skipped.

    Raises:
        FileNotFoundError: the run has no log on this machine.
    """
    with open(log_path(run_id, directory), encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(entry, dict):
                yield entry


def saved_definition(
    run_id: str, fingerprint: str, directory: pathlib.Path | None = None
) -> dict[str, str] | None:
    """The parts' fingerprints of the definition ``fingerprint`` of ``run_id``, from the last
    ``definition`` line of its log that has that whole fingerprint; None when the log has none
    (or the run has no log on this machine)."""
    marker = _definition_marker(fingerprint)
    found: dict[str, str] | None = None
    try:
        with open(log_path(run_id, directory), "rb") as f:
            for raw in f:
                if marker not in raw:
                    continue
                try:
                    entry = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                parts = entry.get("parts") if isinstance(entry, dict) else None
                if (
                    entry.get("event") == "definition"
                    and entry.get("definition") == fingerprint
                    and isinstance(parts, dict)
                    and all(isinstance(v, str) for v in parts.values())
                ):
                    found = parts
    except OSError:
        return None
    return found


def last_failures(run_id: str) -> dict[str, dict[str, Any]]:
    """Each node's last failed attempt in the log (by node path) since the run's last
    ``run_started`` (an earlier run of the same id, deleted since, does not count); empty
    without a log."""
    failures: dict[str, dict[str, Any]] = {}
    try:
        for entry in read_log(run_id):
            if entry.get("event") == "run_started":
                failures.clear()
            elif entry.get("event") == "attempt_failed" and "node" in entry:
                failures[entry["node"]] = entry
            elif entry.get("event") == "node_confirmed" and "node" in entry:
                failures.pop(entry["node"], None)
    except FileNotFoundError:
        return {}
    return failures


def log_times(run_id: str) -> dict[str, Any]:
    """When the run started (its last ``run_started``: an earlier run of the same id, deleted
    since, does not count), its last event, and the time between, from the run log:
    ``{"started": ISO time, "last_event": ISO time, "duration_seconds": …}``; empty without a
    log."""
    first = last = None
    try:
        for entry in read_log(run_id):
            when = entry.get("time")
            if not isinstance(when, str):
                continue
            if entry.get("event") == "run_started":
                first = when
            last = when
    except FileNotFoundError:
        return {}
    out: dict[str, Any] = {}
    if first is not None:
        out["started"] = first
    if last is not None:
        out["last_event"] = last
    if first is not None and last is not None:
        span = datetime.datetime.fromisoformat(last) - datetime.datetime.fromisoformat(first)
        out["duration_seconds"] = round(span.total_seconds(), 3)
    return out
