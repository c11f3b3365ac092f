"""Inbox keys: streams fed from outside the run, and the intake node that feeds them (X-INBOX-2).

A stream key declared ``Key("approvals", Approval, stream=True, inbox=True)`` is an **inbox**:
no node of the graph provides it. When the graph is validated, every inbox key that a node
requires and nothing provides gets a built-in **intake node**, ``inbox:<key name>``, which
provides it. Readers read the inbox like any stream (values, deliveries and acks, processors).

The intake node takes posted messages in, in inbox sequence order: each becomes the stream's
next element with ``send_at(value, inbox_sequence)``, so the element and the stream's position
(its ``Cursor``: the last inbox sequence taken in) are saved in one save (S-3). After a
restart it goes on from the saved position: a message is taken in exactly once. Messages up
to a saved position are dropped from the store's inbox. The intake ends when every reader of
the inbox has ended (the stream then completes); until then it polls the inbox (see
:class:`InboxFeed`) and, while there is nothing new, tells the run that it waits.

The feed comes from the durable runtime through :data:`RUN_INBOX`; outside a durable run
there is no feed, and an intake node fails with a :class:`~durable_core.errors.GraphError`
saying so.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any, Protocol

from durable_core.errors import GraphError
from durable_core.graph.waits import RUN_WAITS

if TYPE_CHECKING:
    from durable_core.graph.context import RunContext
    from durable_core.graph.definition import Graph
    from durable_core.graph.keys import Key

__all__ = ["INTAKE_PREFIX", "RUN_INBOX", "InboxFeed", "add_intakes", "intake_id"]

INTAKE_PREFIX = "inbox:"
"""Intake nodes are named ``inbox:<key name>``."""

_BATCH = 256


class InboxFeed(Protocol):
    """What an intake node reads the store's inbox through (the durable runtime's)."""

    async def take(self, key: Key[Any], after: int, limit: int) -> list[tuple[int, Any]]:
        """Posted messages after sequence ``after``, decoded: ``(sequence, value)``."""
        ...

    async def drop(self, key: Key[Any], through: int) -> None:
        """Forget the messages up to ``through`` (their intake is saved)."""
        ...

    async def pause(self, rc: RunContext) -> None:
        """Wait a little before polling again (or until a post is announced)."""
        ...


RUN_INBOX: contextvars.ContextVar[InboxFeed | None] = contextvars.ContextVar(
    "durable_run_inbox", default=None
)
"""The inbox feed of the run the current task belongs to (None outside a durable run)."""


def intake_id(key: Key[Any]) -> str:
    """The id of the intake node of inbox key ``key``."""
    return INTAKE_PREFIX + key.name


def _intake(key: Key[Any]) -> Any:
    async def intake(rc: RunContext) -> None:
        feed = RUN_INBOX.get()
        if feed is None:
            raise GraphError(
                f"inbox {key.name!r} is fed by messages posted to a stored run: run the graph "
                "with Runtime (durable run), not execute"
            )
        writer = rc.writer(key)
        position = writer.position
        taken = position if isinstance(position, int) and not isinstance(position, bool) else 0
        await writer.open()
        stream = rc._node_run.streams[key.name]
        dropped = 0
        if taken:
            await feed.drop(key, taken)  # their intake was saved before this process began
            dropped = taken
        waits = RUN_WAITS.get()
        token: int | None = None  # while nothing new comes: one wait, however many looks
        try:
            while stream.groups:
                messages = await feed.take(key, taken, _BATCH)
                if messages:
                    if token is not None and waits is not None:
                        waits.leave(token)
                        token = None
                    for sequence, value in messages:
                        await writer.send_at(value, sequence)
                        taken = sequence
                    continue
                if stream._unsaved:  # not idle before every element taken in is saved
                    await feed.pause(rc)
                    continue
                if taken > dropped:
                    await feed.drop(key, taken)  # every element sent so far is saved
                    dropped = taken
                if token is None and waits is not None:
                    token = waits.enter(rc.path, key.name)
                await feed.pause(rc)
        finally:
            if token is not None and waits is not None:
                waits.leave(token)

    intake.__qualname__ = intake.__name__ = f"intake_{key.name}"
    return intake


def add_intakes(graph: Graph) -> None:
    """Give ``graph`` an intake node for every inbox key a node requires and nothing
    provides (called when the graph is validated)."""
    needed: dict[str, Key[Any]] = {}
    for node in graph.nodes.values():
        for key in node.requires:
            if key.inbox and key.name not in graph._sources:
                needed.setdefault(key.name, key)
    for key in needed.values():
        graph.add_node(intake_id(key), _intake(key), provides=(key,))
