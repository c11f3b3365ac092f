"""The durable layer: run and resume graphs with every change saved to a store."""

from durable_core.durable.events import EventKind, RecoveryEvent
from durable_core.durable.fork import ForkPlan, create_fork, fork_run
from durable_core.durable.runtime import DurableResult, Runtime

__all__ = [
    "DurableResult",
    "EventKind",
    "ForkPlan",
    "RecoveryEvent",
    "Runtime",
    "create_fork",
    "fork_run",
]
