"""Runs that wait without a process: suspending, waiting notes, waking (X-WAIT).

A durable run given ``suspend=True`` (``--suspend`` on ``durable run``/``resume``) watches what
its running nodes do. When every running node has been waiting — for an inbox message (an
intake with nothing new, a reader of an inbox with nothing buffered) or for a timer
(:func:`~durable_core.graph.waits.sleep_until`, :func:`~durable_core.graph.waits.receive_before`)
— for :data:`SETTLE` seconds without any change, the run has nothing to do but wait. It then
stops as a canceled run does (everything confirmed stays saved; nothing is half-saved), saves a
**waiting note** in the store (:meth:`~durable_core.store.inbox.RunInbox.set_waiting`) saying
what it waits for and until when, and ends with status ``"waiting"``. Its process ends; it holds
no lock.

The note is JSON: ``{"run_id", "since", "until", "waits": [{"node", "for", "until"}],
"inboxes": {key: last sequence taken in}}``; ``until`` is the earliest timer deadline (null
when it waits only for messages).

Waking: a post to a waiting run (``durable send``), or its deadline passing
(:func:`due_waiting_runs`, which ``durable recover`` calls), makes it due; whoever resumes it
clears the note when the resumed run starts. The process that suspends looks once more after
it let the run go: a post that arrived while it was suspending (whose poster saw the run still
owned) makes it resume at once, so no post is left without a run to take it in.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import math
import time
from collections.abc import Callable
from typing import Any

import attrs

from durable_core.durable.inbox import has_inbox, inbox_cursors, pending_posts
from durable_core.graph import CancelToken
from durable_core.graph.inbox import RUN_INBOX
from durable_core.graph.observer import NodeEvent, Observer
from durable_core.graph.waits import RUN_WAITS, RunWaits

__all__ = [
    "SETTLE",
    "SUSPEND",
    "WAITING",
    "RunServices",
    "Waiting",
    "due_waiting_runs",
    "is_due",
    "read_waiting",
    "suspending",
    "waiting_of",
]

WAITING = "waiting"
"""The status of a run that ended its process to wait."""

SETTLE = 0.3
"""Seconds every running node must have waited, unchanged, before a run suspends."""

_CHECK = 0.05

SUSPEND: contextvars.ContextVar[bool] = contextvars.ContextVar("durable_suspend", default=False)
"""Whether the durable run started in this context may suspend (``suspend=True``)."""


@attrs.frozen
class Waiting:
    """What a waiting run waits for (from its waiting note).

    Attributes:
        run_id: the run.
        until: the earliest timer deadline (seconds since the epoch), or None.
        waits: ``(node path, what, until)`` for each wait: ``what`` is an inbox key's name or
            ``"timer"``.
        inboxes: the last inbox sequence taken in, by inbox key name.
        since: when the run suspended.
    """

    run_id: str
    until: float | None = None
    waits: tuple[tuple[str, str, float | None], ...] = ()
    inboxes: dict[str, int] = attrs.field(factory=dict)
    since: float = 0.0

    def to_json(self) -> str:
        """The waiting note's text."""
        return json.dumps(
            {
                "run_id": self.run_id,
                "since": self.since,
                "until": self.until,
                "waits": [{"node": n, "for": w, "until": u} for n, w, u in self.waits],
                "inboxes": self.inboxes,
            },
            sort_keys=True,
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> Waiting:
        """Read a waiting note (unknown fields are ignored)."""
        data = json.loads(text)
        return cls(
            run_id=str(data["run_id"]),
            until=data.get("until"),
            waits=tuple(
                (str(w.get("node", "")), str(w.get("for", "")), w.get("until"))
                for w in data.get("waits", ())
            ),
            inboxes={str(k): int(v) for k, v in dict(data.get("inboxes", {})).items()},
            since=float(data.get("since", 0.0)),
        )

    def describe(self) -> str:
        """One line: what the run waits for, and until when."""
        what = sorted({w for _, w, _ in self.waits if w != "timer"})
        parts = [f"messages on {', '.join(what)}"] if what else []
        if self.until is not None:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.until))
            parts.append(f"a timer until {stamp}")
        return " or ".join(parts) or "nothing known"


def waiting_of(store: Any, run_id: str) -> Waiting | None:
    """The waiting note of ``run_id`` (None: not waiting, or a store without inboxes)."""
    if not has_inbox(store):
        return None
    text = store.waiting_note(run_id)
    if text is None:
        return None
    try:
        return Waiting.from_json(text)
    except (ValueError, KeyError, TypeError):
        return None  # a note Durable did not write: not a waiting run it can wake


def read_waiting(store: Any) -> dict[str, Waiting]:
    """Every waiting note of ``store`` (empty for a store without inboxes), by run id."""
    if not has_inbox(store):
        return {}
    found = {}
    for run_id, text in store.waiting_notes().items():
        try:
            found[run_id] = Waiting.from_json(text)
        except (ValueError, KeyError, TypeError):
            continue  # a note Durable did not write: not a waiting run it can wake
    return found


def is_due(store: Any, waiting: Waiting, now: float | None = None) -> bool:
    """Whether the waiting run should be resumed: its deadline passed by ``now`` (seconds
    since the epoch; default: the current time), or a message was posted to one of its
    inboxes after the last one it took in."""
    moment = time.time() if now is None else now
    if waiting.until is not None and waiting.until <= moment:
        return True
    keys = {w for _, w, _ in waiting.waits if w != "timer"} | set(waiting.inboxes)
    return bool(keys) and pending_posts(store, waiting.run_id, waiting.inboxes, keys)


def waiting_row(store: Any, run_id: str, row: dict[str, Any]) -> None:
    """Mark a ``durable list`` row of a run at rest as ``waiting`` when it has a waiting note:
    ``row["waiting"]`` gets ``until`` (seconds since the epoch, or None) and ``for`` (what it
    waits for, in words)."""
    try:
        note = waiting_of(store, run_id)
    except Exception:  # extra information: never fail the listing on it
        return
    if note is not None:
        row["status"] = WAITING
        row["waiting"] = {"until": note.until, "for": note.describe()}


def report_waiting(
    config_arg: str, run_id: str, waiting: Waiting | None, summary: str, resume_command: str
) -> None:
    """The lines ``durable run --suspend`` prints for a run that ended waiting;
    ``resume_command`` is the ``durable resume …`` that continues it."""
    import shlex

    import click

    what = waiting.describe() if waiting is not None else "messages or a timer"
    click.echo(f"run {run_id!r} is waiting for {what}: {summary}")
    inboxes = sorted({w for _, w, _ in waiting.waits if w != "timer"}) if waiting else []
    if inboxes:
        click.echo(
            f"send it a message with: durable send {shlex.quote(config_arg)} "
            f"{shlex.quote(run_id)} {shlex.quote(inboxes[0])} VALUE_JSON",
            err=True,
        )
    if waiting is not None and waiting.until is not None:
        click.echo(
            f"once its deadline has passed, resume it with: {resume_command} "
            "('durable recover --on local' resumes every waiting run that is due)",
            err=True,
        )


def due_waiting_runs(store: Any, now: float | None = None) -> list[Waiting]:
    """The waiting runs of ``store`` that should be resumed (:func:`is_due`), sorted by run
    id; ``durable recover`` resumes them."""
    return [w for _, w in sorted(read_waiting(store).items()) if is_due(store, w, now)]


def suspending(suspend: bool, store: Any, call: Callable[[bool], Any]) -> Any:
    """Run ``call(again=False)`` (a run or resume) with suspending allowed when ``suspend``;
    while it ends ``"waiting"`` and is already due again (a post arrived while it suspended,
    or its deadline passed), resume it with ``call(again=True)``. A resume that finds the run
    owned (whoever woke it is running it) ends here with the waiting result."""
    if not suspend:
        return call(False)
    token = SUSPEND.set(True)
    try:
        result = call(False)
        while result.status == WAITING and result.waiting is not None:
            if not is_due(store, result.waiting):
                break
            from durable_core.errors import BusyError

            try:
                result = call(True)
            except BusyError:
                break
        return result
    finally:
        SUSPEND.reset(token)


def can_wait(graph: Any) -> bool:
    """Whether ``graph`` (or one of its Sub graphs) has an inbox key or a timer node."""
    for sub in graph.graphs().values():
        # Every key a node requires or provides is a key of its graph (one pass over them).
        if any(key.inbox for key in sub.keys.values()):
            return True
        for node in sub.nodes.values():
            if getattr(node.body, "durable_timer", None) is not None:
                return True
    return False


class _Watcher(Observer):
    """Tracks the running nodes of a run (graph observer events)."""

    def __init__(self) -> None:
        self.running: set[str] = set()

    def node_running(self, event: NodeEvent) -> None:
        self.running.add(event.path)

    def node_finished(self, event: NodeEvent) -> None:
        self.running.discard(event.path)

    def leaves(self) -> set[str]:
        running = self.running
        return {p for p in running if not any(q.startswith(p + "/") for q in running)}


class RunServices:
    """What a durable run gives its nodes for inboxes and waiting, for one execution.

    Used by the runtime around the engine: ``async with services:`` installs the inbox feed
    and the wait registry for the run's tasks; :attr:`cancel` and :attr:`observer` (None unless
    the run may suspend) go to the engine; :meth:`status` turns a run stopped to wait into
    ``"waiting"`` and saves its note.
    """

    def __init__(
        self,
        store: Any,
        run_id: str,
        codecs: Any,
        graph: Any,
        suspend: bool,
        cancel: CancelToken | None,
    ) -> None:
        from durable_core.durable.inbox import StoreInboxFeed

        self.store = store
        self.run_id = run_id
        self.suspend = suspend and has_inbox(store)
        # only a graph with an inbox or a timer can have been waiting: no store call otherwise
        self.may_wait = has_inbox(store) and can_wait(graph)
        self.waits = RunWaits()
        self.feed = StoreInboxFeed(store, run_id, codecs)
        # Only a run that may suspend watches its running nodes: without a watcher the engine
        # builds no event per node, and a resume restores thousands of nodes at once.
        self.observer: _Watcher | None = _Watcher() if self.suspend else None
        self.cancel = cancel
        self._own: CancelToken | None = None
        self._unsubscribe: Callable[[], None] | None = None
        if self.suspend:
            self._own = own = CancelToken()
            if cancel is not None:
                self._unsubscribe = cancel._subscribe(own.cancel)
            self.cancel = own
        self.suspended: Waiting | None = None
        self._task: asyncio.Task[None] | None = None
        self._tokens: list[Any] = []

    async def __aenter__(self) -> RunServices:
        self._tokens = [RUN_WAITS.set(self.waits), RUN_INBOX.set(self.feed)]
        if self.may_wait:  # the run is not waiting any more
            await asyncio.to_thread(self.store.set_waiting, self.run_id, None)
        if self.suspend:
            self._task = asyncio.ensure_future(self._watch())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        RUN_INBOX.reset(self._tokens[1])
        RUN_WAITS.reset(self._tokens[0])
        await asyncio.to_thread(self.feed.close)
        if self._unsubscribe is not None:
            self._unsubscribe()

    async def _watch(self) -> None:
        watcher = self.observer
        assert watcher is not None  # made with the task (suspend)
        settled_since: float | None = None
        seen = -1
        while True:
            await asyncio.sleep(_CHECK)
            leaves = watcher.leaves()
            waits = self.waits.snapshot()
            waiting_paths = {path for path, _, _ in waits}
            idle = bool(leaves) and leaves <= waiting_paths
            if not idle:
                settled_since = None
                continue
            if settled_since is None or self.waits.changed != seen:
                seen = self.waits.changed  # idle from now on, unless something moves
                settled_since = time.monotonic()
                continue
            if time.monotonic() - settled_since >= SETTLE:
                deadlines = [u for _, _, u in waits if u is not None and math.isfinite(u)]
                self.suspended = Waiting(
                    run_id=self.run_id,
                    until=min(deadlines) if deadlines else None,
                    waits=tuple(sorted(waits, key=lambda w: (w[0], w[1]))),
                    since=time.time(),
                )
                assert self._own is not None
                self._own.cancel()
                return

    async def status(self, status: str, record: Any, user_canceled: bool) -> str:
        """The run's status: ``"waiting"`` (its note saved) when it stopped to wait."""
        if self.suspended is None or status != "canceled" or user_canceled:
            return status
        note = attrs.evolve(self.suspended, inboxes=inbox_cursors(record))
        self.suspended = note
        await asyncio.to_thread(self.store.set_waiting, self.run_id, note.to_json())
        return WAITING
