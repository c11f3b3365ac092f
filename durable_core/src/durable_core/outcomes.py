"""Control flow raised through user code: the ground floor, importing nothing of Durable.

An outcome is not an error. A body raises one to say how its node ends, and Durable's own
layers (the scheduler, a worker running a function-form body, the CLI) catch it by name. Each
derives from ``BaseException``, like ``asyncio.CancelledError``, so that ``except Exception`` in
a body does not swallow it. Every layer may import this module; it imports only the standard
library.
"""

from __future__ import annotations

__all__ = ["SkipNode"]


class SkipNode(BaseException):
    """Raise in a body to skip the whole node: every provided key becomes skipped (G-4).

    A skip is never a failure: Retry does not retry it, and the run can complete. Also
    importable as ``durable_core.SkipNode`` and ``durable_core.graph.SkipNode``.
    """
