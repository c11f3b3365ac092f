# ruff: noqa: F405  (the names in __all__ load on first use, through __getattr__)
"""Durable: durable execution of dataflow graphs.

The public API is re-exported here; submodules are implementation detail unless documented.
The names load on first use (PEP 562): ``import durable_core`` alone imports nothing heavy, so
that the ``durable`` command starts fast. The imports themselves are in ``durable_core._api``.
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
    from durable_core._api import *  # noqa: F403

__all__ = [
    "DEFAULT_MAX_RUNNING",
    "DEFAULT_STREAM_CAPACITY",
    "FINGERPRINT_FORMAT",
    "MAX_REVISION",
    "RECORD_FORMAT",
    "SKIP",
    "AcquireTimeoutError",
    "Aspect",
    "AspectCall",
    "Attempt",
    "AttemptRecord",
    "AttemptState",
    "BlockingDelivery",
    "BlockingStreamReader",
    "BlockingStreamWriter",
    "BusyError",
    "CancelToken",
    "CheckpointError",
    "Checkpointer",
    "Codec",
    "CodecError",
    "Codecs",
    "ConfigError",
    "ConflictError",
    "CopyOnRead",
    "CorruptRecordError",
    "DefinitionMismatchError",
    "Delivery",
    "DurableError",
    "DurableResult",
    "EncodedRecord",
    "EncodedValue",
    "EventKind",
    "Executor",
    "ExecutorError",
    "Graph",
    "GraphError",
    "GraphEvent",
    "GraphShapes",
    "In",
    "InputsMismatchError",
    "InvariantError",
    "JSONCodec",
    "Key",
    "Managed",
    "ManagedRecord",
    "MemoryStore",
    "MessageAttempt",
    "MessageAttemptRecord",
    "MessageCommit",
    "MessageContext",
    "MessageFailedError",
    "MessageWriter",
    "MismatchError",
    "Node",
    "NodeEvent",
    "NodeFailedError",
    "NodeOutputs",
    "NodeReason",
    "NodeRecord",
    "NotFoundError",
    "NotPicklableError",
    "Observer",
    "Out",
    "PendingMessageRecord",
    "PluginError",
    "ProcessExecutor",
    "Processor",
    "RecoveryEvent",
    "RemoteBodyError",
    "Retry",
    "RetryExhaustedError",
    "RunContext",
    "RunLister",
    "RunRecord",
    "RunResult",
    "RunStatus",
    "RunSummary",
    "Runtime",
    "SchemaError",
    "Scope",
    "ScopeRecord",
    "Session",
    "SessionClosedError",
    "SkipNode",
    "SlotError",
    "StaleDeliveryError",
    "Store",
    "StoreError",
    "Stream",
    "StreamDescriptorRecord",
    "StreamError",
    "StreamFailedError",
    "StreamNotResumableError",
    "StreamReader",
    "StreamRecord",
    "StreamState",
    "StreamTerminal",
    "StreamWriter",
    "ThreadExecutor",
    "Timeout",
    "UndeclaredKeyError",
    "UnsharedStoreError",
    "ValueRecord",
    "ValueState",
    "Values",
    "VersionMismatchError",
    "WorkerLostError",
    "copy_record",
    "digest_of",
    "execute",
    "execute_async",
    "hookimpl",
    "make_plugin_manager",
    "record_from_json",
    "record_to_json",
    "validate_record",
]


_LIGHT = {"hookimpl": "durable_core.plugins.hookspecs"}
"""Names served by one small module instead of the whole API: every plugin module imports
``hookimpl``, and loading a plugin must not load the library (the hook specs need pluggy only)."""


def __getattr__(name: str) -> typing.Any:
    """Load the public API on first use of one of its names."""
    if name not in __all__:  # a submodule (``from durable_core import hookspecs``) or a typo
        raise AttributeError(f"module 'durable_core' has no attribute {name!r}")
    _api = importlib.import_module(_LIGHT.get(name, "durable_core._api"))

    try:
        value = getattr(_api, name)
    except AttributeError:
        raise AttributeError(f"module 'durable_core' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
