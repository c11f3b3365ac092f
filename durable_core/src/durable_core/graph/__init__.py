"""The graph engine (SPEC section G): keys, graphs, aspects, Sub nodes, streams, the scheduler,
observers and the checkpoint seam (G-12).

The engine never imports the durable layer or any store; the durable layer plugs in through
:class:`Checkpointer`.
"""

from durable_core.graph.aspects import Aspect, AspectCall, Retry, Timeout
from durable_core.graph.cancel import CancelToken
from durable_core.graph.checkpoint import (
    Attempt,
    Checkpointer,
    CopyOnRead,
    NodeOutputs,
    Scope,
    Values,
)
from durable_core.graph.context import RunContext
from durable_core.graph.definition import FINGERPRINT_FORMAT, Graph, In, Node, Out
from durable_core.graph.engine import DEFAULT_MAX_RUNNING, execute, execute_async
from durable_core.graph.function import SKIP
from durable_core.graph.keys import DEFAULT_STREAM_CAPACITY, Key, type_name
from durable_core.graph.observer import GraphEvent, NodeEvent, Observer
from durable_core.graph.processor import (
    Managed,
    MessageAttempt,
    MessageCommit,
    MessageContext,
    MessageWriter,
    Processor,
)
from durable_core.graph.results import RunResult, RunStatus
from durable_core.graph.streams import (
    BlockingDelivery,
    BlockingStreamReader,
    BlockingStreamWriter,
    Delivery,
    Stream,
    StreamReader,
    StreamState,
    StreamWriter,
)
from durable_core.outcomes import SkipNode

__all__ = [
    "DEFAULT_MAX_RUNNING",
    "DEFAULT_STREAM_CAPACITY",
    "FINGERPRINT_FORMAT",
    "SKIP",
    "Aspect",
    "AspectCall",
    "Attempt",
    "BlockingDelivery",
    "BlockingStreamReader",
    "BlockingStreamWriter",
    "CancelToken",
    "Checkpointer",
    "CopyOnRead",
    "Delivery",
    "Graph",
    "GraphEvent",
    "In",
    "Key",
    "Managed",
    "MessageAttempt",
    "MessageCommit",
    "MessageContext",
    "MessageWriter",
    "Node",
    "NodeEvent",
    "NodeOutputs",
    "Observer",
    "Out",
    "Processor",
    "Retry",
    "RunContext",
    "RunResult",
    "RunStatus",
    "Scope",
    "SkipNode",
    "Stream",
    "StreamReader",
    "StreamState",
    "StreamWriter",
    "Timeout",
    "Values",
    "execute",
    "execute_async",
    "type_name",
]
