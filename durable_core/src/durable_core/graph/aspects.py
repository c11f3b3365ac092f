"""Aspects: wrappers around "wait for input + run body" of a node (G-8).

A node's aspects form a chain: the graph-wide aspects (``Graph(..., aspects=[...])``) in their
order, then the node's own aspects in their order; the first is outermost. The innermost step
waits for the node's inputs and runs its body (for a Sub node: the child graph).

Each aspect has a fixed position in the chain, a string that does not depend on the order in
which nodes were declared or on anything computed at run time: ``"graph:<i>"`` for the i-th
graph-wide aspect and ``"node:<i>"`` for the i-th aspect of the node (from 0). The position is
the Retry "boundary" stored in attempt records (R-ATT-1, R-ATT-3).

Built-ins: :class:`Retry` and :class:`Timeout`. A custom aspect subclasses :class:`Aspect`,
overrides :meth:`Aspect.around` (calling ``await call.proceed()`` exactly where the inner chain
must run, and returning its result) and :meth:`Aspect.describe` (its parameters, part of the
graph's fingerprint).
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from durable_core.errors import GraphError, RetryExhaustedError

if TYPE_CHECKING:
    from durable_core.graph.checkpoint import Attempt, NodeOutputs

__all__ = ["Aspect", "AspectCall", "Retry", "Timeout"]


class AspectCall(Protocol):
    """What an aspect sees of the node it wraps; handed to :meth:`Aspect.around`.

    Attributes:
        node_id: the node's id.
        path: the node's path from the root graph.
        boundary: this aspect's fixed position (``"graph:0"``, ``"node:1"``).
        attempt: the node's deepest current attempt (the root attempt, or the current Retry
            try of an outer Retry).
    """

    node_id: str
    path: str
    boundary: str
    attempt: Attempt

    async def proceed(self, attempt: Attempt | None = None) -> NodeOutputs:
        """Run the inner chain (the next aspects, then wait for input and run the body).

        Args:
            attempt: run the inner chain under this attempt (a try from :meth:`begin_try`);
                default: the current attempt.

        Returns:
            The node's outputs of this run of the inner chain.

        Raises:
            Exception: the inner chain failed (a failure of this try).
            SkipNode: the node was skipped (not a failure; let it pass).
            asyncio.CancelledError: the node was canceled (not a failure; let it pass).
        """
        ...

    async def begin_try(self, index: int, limit: int) -> Attempt:
        """Begin a Retry try at this boundary through the checkpointer (R-ATT-3).

        Args:
            index: the try the aspect means to run (1-based).
            limit: the budget (the Retry's ``attempts``).

        Returns:
            The try; its ``index`` is authoritative and may be higher than asked when tries
            were already spent before a restart; ``index > limit`` means the budget is spent.
        """
        ...

    async def fail_try(self, attempt: Attempt, error: BaseException) -> None:
        """Report through the checkpointer that a try from :meth:`begin_try` failed."""
        ...


class Aspect:
    """Base class of aspects. The default wraps nothing."""

    async def around(self, call: AspectCall) -> NodeOutputs:
        """Run the inner chain through ``call.proceed()`` and return its result.

        Args:
            call: the node being wrapped.

        Returns:
            What ``call.proceed()`` returned.
        """
        return await call.proceed()

    def describe(self) -> dict[str, Any]:
        """The canonical JSON-ready description of the aspect and its parameters.

        It is part of the graph's fingerprint: include every parameter that changes behaviour.
        The default names the class only.
        """
        return {"kind": f"{type(self).__module__}.{type(self).__qualname__}"}


def _positive_int(name: str):
    def check(instance: Any, attribute: Any, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise GraphError(f"{name}: expected a positive integer, got {value!r}")

    return check


def _seconds(name: str, *, allow_zero: bool):
    def check(instance: Any, attribute: Any, value: Any) -> None:
        ok = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and (value >= 0 if allow_zero else value > 0)
        )
        if not ok:
            bound = "a finite number >= 0" if allow_zero else "a finite number > 0"
            raise GraphError(f"{name}: expected {bound} of seconds, got {value!r}")

    return check


@attrs.frozen
class Retry(Aspect):
    """Run the inner chain again when it fails, up to ``attempts`` tries in all (G-8).

    Only failures (exceptions) are retried: a skipped node and a canceled node are not. Each try
    is an attempt begun through the checkpointer at this aspect's boundary; a restart never
    refills the budget (R-ATT-4): when the checkpoint says tries were already spent, counting
    continues from there, and when all were spent the node fails with
    :class:`~durable_core.errors.RetryExhaustedError` without running.

    Args:
        attempts: tries in all, >= 1 (``Retry(1)`` never retries).
        delay: seconds to wait after a failed try before the next one (>= 0).

    Raises:
        GraphError: a parameter is out of range.
    """

    attempts: int = attrs.field(validator=_positive_int("Retry attempts"))
    delay: float = attrs.field(
        default=0.0, validator=_seconds("Retry delay", allow_zero=True), kw_only=True
    )

    async def around(self, call: AspectCall) -> NodeOutputs:
        index = 1
        while True:
            attempt = await call.begin_try(index, self.attempts)
            if attempt.index > attempt.limit:
                raise RetryExhaustedError(
                    f"node {call.path!r}: every try of its Retry at {call.boundary} "
                    f"({attempt.limit} in all) was already spent before this run; a restart "
                    "never refills a Retry budget. Start a new run to try again."
                )
            try:
                return await call.proceed(attempt)
            except Exception as error:
                await call.fail_try(attempt, error)
                if attempt.index >= attempt.limit:
                    raise
            index = attempt.index + 1
            if self.delay:
                await asyncio.sleep(self.delay)

    def describe(self) -> dict[str, Any]:
        return {"kind": "retry", "attempts": self.attempts, "delay": float(self.delay)}


@attrs.frozen
class Timeout(Aspect):
    """Fail the inner chain with ``TimeoutError`` when it takes longer than ``seconds`` (G-8).

    The time counts from entering the aspect: waiting for inputs included. The inner chain is
    canceled; a plain (``def``) body cannot be interrupted in its worker thread, so it keeps its
    ``max_running`` slot until it returns (its run context reports ``canceled``) and its late
    results are ignored. Inside a :class:`Retry`, a timeout is a failure and is retried.

    Args:
        seconds: the time limit in seconds (> 0).

    Raises:
        GraphError: ``seconds`` is not a positive finite number.
    """

    seconds: float = attrs.field(validator=_seconds("Timeout seconds", allow_zero=False))

    async def around(self, call: AspectCall) -> NodeOutputs:
        try:
            async with asyncio.timeout(self.seconds) as scope:
                return await call.proceed()
        except TimeoutError:
            if scope.expired():
                raise TimeoutError(
                    f"node {call.path!r} timed out after {self.seconds} s ({call.boundary})"
                ) from None
            raise

    def describe(self) -> dict[str, Any]:
        return {"kind": "timeout", "seconds": float(self.seconds)}
