"""What a durable run's streams and processors have done so far, counted as it happens.

Nodes are counted from recovery events (:mod:`durable_core.cli.progress`); a stream's elements and
a processor's messages produce no event each (that would cost a call per element), so the
durable layer adds them to a :class:`RunActivity` instead: one integer increment per element
sent and per message committed. The ``durable`` command's progress line reads it, so a long
stream job shows it is moving.
"""

from __future__ import annotations

__all__ = ["RunActivity"]


class RunActivity:
    """Counts of a :class:`~durable_core.durable.Runtime`'s stream work, over the runs it has
    executed (the ``durable`` command runs one).

    Attributes:
        elements: stream elements sent and queued for their save (elements of every stream,
            a processor's sends included).
        messages: processor messages whose transaction was saved (a batch counts each of its
            messages; the final transaction counts with the node's confirmation).

    Written on the run's event loop and read from any thread (an int read is atomic).
    """

    __slots__ = ("elements", "messages")

    def __init__(self) -> None:
        self.elements = 0
        self.messages = 0
