"""Waiting in a graph: durable timers, and what a run waits for (X-TIMER, X-WAIT).

A **timer** is a node that arms a deadline: ``g.timer("expires", seconds=3600,
provides=[DEADLINE])`` adds a node that sets ``DEADLINE`` (a ``float`` key: seconds since the
epoch) to *now + seconds* when it runs. In a durable run that value is confirmed with the node,
so after a restart the timer is never armed again: the nodes that wait for it wait only the
time left. A node waits with :func:`sleep_until` (the deadline alone) or
:func:`receive_before` (the next element of a stream, or the deadline, whichever comes
first). Both are ordinary awaits: a ``Timeout`` still bounds them, a cancel still stops them,
and a Retry ``delay`` is not a timer (it is not saved).

While a node awaits one of these, or reads an inbox stream that has nothing for it, it tells
the run's **wait registry** (:class:`RunWaits`, installed by the durable runtime through
:data:`RUN_WAITS`): a run whose running nodes all wait this way has nothing to do but wait,
and a ``suspend`` run may then end its process (see :mod:`durable_core.durable.waiting`).
Outside a durable run there is no registry and waiting is just waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from durable_core.errors import GraphError

if TYPE_CHECKING:
    from durable_core.graph.context import RunContext
    from durable_core.graph.definition import Graph, Node
    from durable_core.graph.keys import Key

__all__ = [
    "RUN_WAITS",
    "RunWaits",
    "add_timer",
    "receive_before",
    "remaining",
    "sleep_until",
    "waiting",
]


class RunWaits:
    """What the running nodes of one run wait for (X-WAIT).

    ``enter``/``leave`` are called on the event loop thread by the waits of this module and
    by readers of inbox streams. :meth:`snapshot` tells the durable runtime which node paths
    wait, for what, and until when.
    """

    def __init__(self) -> None:
        self._waits: dict[int, tuple[str, str, float | None]] = {}
        self._next = 0
        self.changed = 0  # raised on every enter and leave: a run that moved is not idle

    def enter(self, path: str, what: str, until: float | None = None) -> int:
        """Node ``path`` starts waiting for ``what`` (an inbox key name, or ``"timer"``),
        until ``until`` (seconds since the epoch) at most; returns a token for :meth:`leave`."""
        self._next += 1
        self._waits[self._next] = (path, what, until)
        self.changed += 1
        return self._next

    def leave(self, token: int) -> None:
        """The wait of ``token`` ended."""
        if self._waits.pop(token, None) is not None:
            self.changed += 1

    def snapshot(self) -> list[tuple[str, str, float | None]]:
        """Every current wait: ``(node path, what, until)``."""
        return list(self._waits.values())


RUN_WAITS: contextvars.ContextVar[RunWaits | None] = contextvars.ContextVar(
    "durable_run_waits", default=None
)
"""The wait registry of the run the current task belongs to (None outside a durable run)."""


@contextlib.contextmanager
def waiting(path: str, what: str, until: float | None = None) -> Iterator[None]:
    """Tell the run's wait registry (if any) that node ``path`` waits for ``what``."""
    waits = RUN_WAITS.get()
    if waits is None:
        yield
        return
    token = waits.enter(path, what, until)
    try:
        yield
    finally:
        waits.leave(token)


def remaining(deadline: float, now: float | None = None) -> float:
    """Seconds left until ``deadline`` (seconds since the epoch); 0 once it passed."""
    return max(0.0, deadline - (time.time() if now is None else now))


def _check_deadline(deadline: object) -> float:
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)):
        raise GraphError(f"a deadline is seconds since the epoch (a float), got {deadline!r}")
    if math.isnan(deadline):
        raise GraphError("a deadline cannot be NaN")
    return float(deadline)


async def sleep_until(rc: RunContext, deadline: float) -> None:
    """Wait until ``deadline`` (seconds since the epoch, as a timer sets it) (X-TIMER).

    After a restart the same deadline comes back from the record, so the wait is only the time
    left. An ``async def`` body gives its ``max_running`` slot back meanwhile.

    Raises:
        GraphError: ``deadline`` is not a number.
    """
    at = _check_deadline(deadline)
    with waiting(rc.path, "timer", at):
        while True:
            left = remaining(at)
            if left <= 0:
                return
            await rc._idle(asyncio.sleep(min(left, 3600.0)))


async def receive_before(rc: RunContext, reader: Any, deadline: float) -> Any:
    """The next delivery of ``reader`` (a stream reader of an ``async def`` body), or None once
    ``deadline`` (seconds since the epoch) passed first (X-TIMER).

    The delivery is a :class:`~durable_core.graph.streams.Delivery`: ack it like any other.
    At the deadline the pending read is canceled; an element that arrives later stays for the
    group's next read.

    Raises:
        StopAsyncIteration: the stream ended before anything arrived.
        GraphError: ``deadline`` is not a number.
    """
    at = _check_deadline(deadline)
    with waiting(rc.path, "timer", at):
        if remaining(at) <= 0:
            return None
        task = asyncio.ensure_future(reader.receive_delivery())
        try:
            done, _ = await asyncio.wait({task}, timeout=remaining(at))
        except BaseException:
            task.cancel()
            raise
        if task in done:
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None


def add_timer(
    graph: Graph,
    id: str,
    *,
    provides: Key[Any],
    seconds: float | None = None,
    seconds_from: Key[Any] | None = None,
    requires: tuple[Key[Any], ...] = (),
) -> Node:
    """Add a timer node to ``graph``: it sets ``provides`` (a ``float`` key) to the deadline
    *now + seconds*, once; confirmed with the node, it is never armed again (X-TIMER).

    Args:
        graph: the graph.
        id: the node's id.
        provides: the deadline key (type ``float``: seconds since the epoch).
        seconds: the wait, in seconds (a constant, part of the graph's fingerprint through the
            node's id and keys only: change the id when you change the wait of a live run).
        seconds_from: instead of ``seconds``, a required ``float``/``int`` key holding it.
        requires: more keys the timer waits for before it is armed (it is armed when they
            are all ready).

    Raises:
        GraphError: neither or both of ``seconds`` and ``seconds_from``; a negative or
            non-finite wait; ``provides`` is not a ``float`` value key.
    """
    if (seconds is None) == (seconds_from is None):
        raise GraphError(f"timer {id!r}: give seconds= or seconds_from=, exactly one")
    if provides.stream or provides.type is not float:
        raise GraphError(
            f"timer {id!r}: provides must be a float value key (the deadline, seconds since "
            f"the epoch), got {provides!r}"
        )
    if seconds is not None and not (
        isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds >= 0
    ):
        raise GraphError(f"timer {id!r}: seconds must be a finite number >= 0, got {seconds!r}")
    needs = (*requires, *((seconds_from,) if seconds_from is not None else ()))

    def arm(rc: RunContext) -> None:
        wait = seconds if seconds_from is None else rc.get(seconds_from)
        if not isinstance(wait, (int, float)) or not math.isfinite(wait) or wait < 0:
            raise GraphError(f"timer {rc.path!r}: the wait must be a number >= 0, got {wait!r}")
        rc.set(provides, time.time() + float(wait))

    arm.__qualname__ = arm.__name__ = f"timer_{id}"
    arm.durable_timer = provides.name  # type: ignore[attr-defined]  # what inspect shows
    return graph.add_node(id, arm, requires=needs, provides=(provides,))
