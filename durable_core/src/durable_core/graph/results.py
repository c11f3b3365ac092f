"""What a run returns: its status and the root graph's slots (G-3, G-6)."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, TypeVar

from durable_core.errors import SlotError, UndeclaredKeyError
from durable_core.graph.checkpoint import read_slot
from durable_core.graph.keys import Key

if TYPE_CHECKING:
    from durable_core.graph.definition import Graph

__all__ = ["RunResult", "RunStatus"]

T = TypeVar("T")


class RunStatus(enum.StrEnum):
    """How a run ended (G-6); compares equal to its string value."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"


class RunResult:
    """The outcome of a run: its status, its error, and the root graph's slots (G-3, G-6).

    Attributes:
        graph: the graph that ran.
        status: ``"completed"``, ``"failed"`` or ``"canceled"`` (a :class:`RunStatus`).
        error: None when completed. When failed: a
            :class:`~durable_core.errors.NodeFailedError` for the first node that failed (its
            ``__cause__`` is the body's exception), or the exception a checkpointer raised
            (the durable layer's ``CheckpointError``). None when canceled from outside.
    """

    __slots__ = ("_ready", "_skipped", "error", "graph", "status")

    def __init__(
        self,
        graph: Graph,
        status: RunStatus,
        error: BaseException | None,
        ready: dict[str, Any],
        skipped: set[str],
    ) -> None:
        self.graph = graph
        self.status = status
        self.error = error
        self._ready = ready
        self._skipped = skipped

    def __repr__(self) -> str:
        return f"<RunResult {self.graph.name!r} {self.status}>"

    def _name(self, key: Key[Any]) -> str:
        known = self.graph.keys.get(getattr(key, "name", None))  # type: ignore[arg-type]
        if known is None or known != key:
            raise UndeclaredKeyError(
                f"key {key!r} is not a key of graph {self.graph.name!r}; results hold the root "
                "graph's keys"
            )
        return key.name

    def __getitem__(self, key: Key[T]) -> T:
        """The ready value of ``key``.

        When the run's checkpointer gives every reader its own copy (a durable run does, for
        mutable values), each call returns a new copy.

        Raises:
            UndeclaredKeyError: the key is not a key of the root graph.
            SlotError: the key is skipped, or pending (not produced: the run failed or was
                canceled first).
        """
        name = self._name(key)
        if name in self._ready:
            return read_slot(self._ready[name])
        if name in self._skipped:
            raise SlotError(f"key {name!r} was skipped; check result.skipped(key)")
        raise SlotError(f"key {name!r} is pending: the run ended {self.status} before it arrived")

    def get(self, key: Key[T], default: Any = None) -> Any:
        """The ready value of ``key``, or ``default`` when it is skipped or pending."""
        name = self._name(key)
        if name in self._ready:
            return read_slot(self._ready[name])
        return default

    def __contains__(self, key: Key[Any]) -> bool:
        """True when ``key`` is ready."""
        return self._name(key) in self._ready

    def skipped(self, key: Key[Any]) -> bool:
        """True when ``key`` was skipped."""
        return self._name(key) in self._skipped

    def pending(self, key: Key[Any]) -> bool:
        """True when ``key`` never arrived (the run failed or was canceled first)."""
        name = self._name(key)
        return name not in self._ready and name not in self._skipped

    @property
    def values(self) -> dict[str, Any]:
        """Every ready value of the root graph, by key name (a new dict; see ``__getitem__``)."""
        return {name: read_slot(value) for name, value in self._ready.items()}
