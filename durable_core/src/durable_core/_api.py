# ruff: noqa: F401  (re-exported by durable_core.__getattr__)
"""The public API's imports, in one place: ``durable_core`` loads this module the first time one
of its names is used (so that ``durable --help`` does not import the whole library)."""

from durable_core.codecs import Codec, Codecs, EncodedValue, JSONCodec, digest_of
from durable_core.durable import DurableResult, EventKind, RecoveryEvent, Runtime
from durable_core.errors import (
    AcquireTimeoutError,
    BusyError,
    CheckpointError,
    CodecError,
    ConfigError,
    ConflictError,
    CorruptRecordError,
    DefinitionMismatchError,
    DurableError,
    ExecutorError,
    GraphError,
    InputsMismatchError,
    MismatchError,
    NodeFailedError,
    NotFoundError,
    NotPicklableError,
    PluginError,
    RemoteBodyError,
    RetryExhaustedError,
    SchemaError,
    SessionClosedError,
    SlotError,
    UndeclaredKeyError,
    VersionMismatchError,
    WorkerLostError,
)
from durable_core.executors import Executor, ProcessExecutor, ThreadExecutor
from durable_core.graph import (
    DEFAULT_MAX_RUNNING,
    DEFAULT_STREAM_CAPACITY,
    FINGERPRINT_FORMAT,
    SKIP,
    Aspect,
    AspectCall,
    Attempt,
    BlockingStreamReader,
    BlockingStreamWriter,
    CancelToken,
    Checkpointer,
    Graph,
    GraphEvent,
    In,
    Key,
    Node,
    NodeEvent,
    NodeOutputs,
    Observer,
    Out,
    Retry,
    RunContext,
    RunResult,
    RunStatus,
    Scope,
    SkipNode,
    Stream,
    StreamReader,
    StreamWriter,
    Timeout,
    Values,
    execute,
    execute_async,
)
from durable_core.hookspecs import hookimpl
from durable_core.integrity import GraphShapes, validate_record
from durable_core.plugins import make_plugin_manager
from durable_core.recordjson import record_from_json, record_to_json
from durable_core.records import (
    RECORD_FORMAT,
    AttemptRecord,
    AttemptState,
    ManagedRecord,
    MessageAttemptRecord,
    NodeReason,
    NodeRecord,
    PendingMessageRecord,
    RunRecord,
    ScopeRecord,
    StreamDescriptorRecord,
    StreamRecord,
    StreamTerminal,
    ValueRecord,
    ValueState,
    copy_record,
)
from durable_core.store import (
    MAX_REVISION,
    MemoryStore,
    RunLister,
    RunSummary,
    Session,
    Store,
)
