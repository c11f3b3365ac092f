"""The error family of Durable.

Every error raised on purpose by Durable derives from :class:`DurableError`. Subclasses also
derive from the matching builtin where that helps callers who already catch it
(``NotFoundError`` is a ``LookupError``, ``AcquireTimeoutError`` is a ``TimeoutError``).

Messages say what was expected, what was found, and what to do next (seed 001, "错误如何处理";
SPEC E-1).

The hierarchy (builtin bases in brackets)::

    DurableError
    ├── BusyError
    ├── NotFoundError [LookupError]
    ├── ConflictError
    ├── CheckpointError
    ├── CorruptRecordError [ValueError]
    ├── SchemaError
    ├── CodecError [TypeError]
    ├── ConfigError [ValueError]
    │   └── UnsharedStoreError
    ├── PluginError
    ├── MismatchError
    │   ├── DefinitionMismatchError
    │   ├── VersionMismatchError
    │   └── InputsMismatchError
    ├── GraphError [ValueError]
    ├── UndeclaredKeyError [KeyError]
    ├── SlotError [RuntimeError]
    ├── NodeFailedError
    │   └── MessageFailedError
    ├── RetryExhaustedError
    ├── SessionClosedError
    ├── AcquireTimeoutError [TimeoutError]
    ├── StoreError
    │   └── (PostgresStoreError, in durable_postgresstore.errors)
    ├── StreamError
    │   ├── StaleDeliveryError
    │   ├── StreamFailedError
    │   └── StreamNotResumableError
    ├── ExecutorError
    │   ├── NotPicklableError [TypeError]
    │   ├── WorkerLostError
    │   └── RemoteBodyError
    └── InvariantError

Every error but :class:`InvariantError` tells the caller about its input, its environment or
its run, and may be caught. ``InvariantError`` is Durable's own bug: report it, do not catch it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durable_core.store.owner import RunOwner

__all__ = [
    "AcquireTimeoutError",
    "BusyError",
    "CheckpointError",
    "CodecError",
    "ConfigError",
    "ConflictError",
    "CorruptRecordError",
    "DefinitionMismatchError",
    "DurableError",
    "ExecutorError",
    "GraphError",
    "InputsMismatchError",
    "InvariantError",
    "MessageFailedError",
    "MismatchError",
    "NodeFailedError",
    "NotFoundError",
    "NotPicklableError",
    "PluginError",
    "RemoteBodyError",
    "RetryExhaustedError",
    "SchemaError",
    "SessionClosedError",
    "SlotError",
    "StaleDeliveryError",
    "StoreError",
    "StreamError",
    "StreamFailedError",
    "StreamNotResumableError",
    "UndeclaredKeyError",
    "UnsharedStoreError",
    "VersionMismatchError",
    "WorkerLostError",
]


class DurableError(Exception):
    """Base class of every error Durable raises on purpose."""


class BusyError(DurableError):
    """The run is owned by another session (R-STORE-1, E-1).

    Raised at once by ``Store.acquire``; Durable never waits for the owner to let go. Find the
    process or host that holds the run (the message names it where the store can know it);
    never delete lock files to get past it.

    Args:
        message: the full explanation.
        owner: who owns the run, where the store can know it.
        run_id: the run that is busy, where the raiser knows it (a command that reads two
            runs, such as ``fork``, names which one); ``None`` otherwise.

    Attributes:
        owner: a :class:`~durable_core.store.owner.RunOwner` (``pid``, ``host``, ``since`` as
            timezone-aware UTC, ``detail``), or ``None`` when the store could not name the
            owner. The file and SQLite stores read it from the run's lock file, the
            PostgreSQL store from ``pg_stat_activity``; the memory store's owner is this
            process.
    """

    def __init__(
        self, message: str, *, owner: RunOwner | None = None, run_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.owner = owner
        self.run_id = run_id

    def __reduce__(self) -> tuple[object, ...]:  # keep ``owner`` across processes (pickle)
        return (type(self), self.args, {"owner": self.owner, "run_id": self.run_id})


class NotFoundError(DurableError, LookupError):
    """No record exists for the run (R-STORE-2, E-1).

    Only raised when the store positively knows there is no record: permission, corruption and
    read failures are other errors. Check the store location and the run id; a missing record is
    never a sign that a run finished, and ``resume`` never turns it into ``run`` (R-RT-3).
    """


class ConflictError(DurableError):
    """A compare-and-swap or identity check failed (R-STORE-3, C-2, E-1).

    The stored record is unchanged. Check the expected revision and the run identity; from the
    runtime's save boundary it arrives wrapped in :class:`CheckpointError`.
    """


class CheckpointError(DurableError):
    """A store error crossed the runtime's reliable save boundary (R-RT-2).

    The original error is kept as ``__cause__``. The save may or may not have been written: the
    run stopped, nothing was retried or rolled back, and the next ``resume`` loads again.
    """


class CorruptRecordError(DurableError, ValueError):
    """A record (stored or about to be stored) breaks a rule of the data model (R-*, S-*, B-FILE-5).

    The message names the JSON or record path of the first violation and says what was
    expected; the broken rule is on ``rule``, not in the message. Nothing is
    written to "repair" it: keep the evidence and fix the cause (E-1).

    Args:
        message: the full explanation (what was expected, what was found, what to do).
        path: the JSON path of the violation (``$.Scopes["…"].Nodes["split"].Outputs[0]``),
            or ``None`` when the problem has no place in the record (e.g. unparsable bytes).
        rule: the SPEC rule that was broken (``"R-ATT-3"``), when one is known.

    Attributes:
        path: as given; ``None`` when unknown.
        rule: as given; ``None`` when unknown.
    """

    def __init__(self, message: str, *, path: str | None = None, rule: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.rule = rule


class SchemaError(DurableError):
    """A store's database does not have exactly the expected schema (B-SQL-1, B-PG-1).

    The message names the unexpected or missing object. Durable never alters a schema it did
    not create; use a dedicated database (SQLite) or schema (PostgreSQL).
    """


class CodecError(DurableError, TypeError):
    """A value cannot be encoded or decoded, or no codec serves a type (section C).

    The message names the type, the codec id/version and, for nested values, the path inside the
    value (``items[3].name``).
    """


class ConfigError(DurableError, ValueError):
    """A run configuration is invalid; the message names the file, table and key."""


class UnsharedStoreError(ConfigError):
    """A launcher was given a store its workers cannot all reach (X-LAUNCH).

    A memory store lives in one process; SQLite's write-ahead log needs every process on one
    host. Give a store every worker reaches: PostgreSQL across hosts, and on one machine the
    file or SQLite store too.
    """


class PluginError(DurableError):
    """A plugin could not be loaded, or a name (store, codec) is unknown or registered twice.

    The message lists what is installed and which distribution provides a known name.
    """


class MismatchError(DurableError):
    """Base of the errors raised when a stored run does not belong to the current call."""


class DefinitionMismatchError(MismatchError):
    """The stored ``Definition`` fingerprint differs from the graph given to ``resume``.

    Raised before any node runs; nothing is saved. Resume with the graph the run was started
    with, or continue under the new graph in a new run (``durable fork``).

    The record holds only the whole definition's fingerprint. Where the fingerprints of the
    definition's parts are known (the run log of the run on this machine, or the runtime that
    started it), the attributes name what changed; otherwise they hold what the record itself
    shows (nodes it confirmed that the graph no longer has, or whose outputs changed).

    Args:
        message: the full explanation.
        added, removed, changed: node paths (``"load"``, ``"report/render"``).
        keys: key paths whose declaration was added, removed or changed.
        inputs: names of graph inputs added or removed (``"report/rows"`` inside a Sub).
        graphs: mount paths of graphs whose name or graph-wide aspects changed (``""`` is
            the root graph).
        complete: True when the saved definition's parts were known, so the attributes list
            every change; False when only the record was compared.

    Attributes:
        added: nodes of the graph the run's definition did not have.
        removed: nodes of the run's definition the graph no longer has.
        changed: nodes whose declaration changed (requires, provides, aspects, bindings).
        keys, inputs, graphs, complete: as given.
    """

    def __init__(
        self,
        message: str,
        *,
        added: tuple[str, ...] = (),
        removed: tuple[str, ...] = (),
        changed: tuple[str, ...] = (),
        keys: tuple[str, ...] = (),
        inputs: tuple[str, ...] = (),
        graphs: tuple[str, ...] = (),
        complete: bool = False,
    ) -> None:
        super().__init__(message)
        self.added = tuple(added)
        self.removed = tuple(removed)
        self.changed = tuple(changed)
        self.keys = tuple(keys)
        self.inputs = tuple(inputs)
        self.graphs = tuple(graphs)
        self.complete = complete

    @property
    def details(self) -> dict[str, object]:
        """The attributes as a JSON-ready dict (``durable ... --json`` prints it)."""
        return {
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": list(self.changed),
            "keys": list(self.keys),
            "inputs": list(self.inputs),
            "graphs": list(self.graphs),
            "complete": self.complete,
        }


class VersionMismatchError(MismatchError):
    """The stored business ``Version`` differs from the one given to ``resume``."""


class InputsMismatchError(MismatchError):
    """The root inputs given to ``resume`` differ from the stored fingerprint (R-REC-3).

    The record holds only the fingerprint of all the inputs together. Where the run's history
    keeps each input's own fingerprint, ``changed`` names the inputs that differ.

    Args:
        message: the full explanation.
        changed: names of the root inputs that differ (empty when not known).

    Attributes:
        changed: as given.
    """

    def __init__(self, message: str, *, changed: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.changed = tuple(changed)

    @property
    def details(self) -> dict[str, object]:
        """``{"changed": [...]}`` (``durable ... --json`` prints it): empty when not known."""
        return {"changed": list(self.changed)}


class GraphError(DurableError, ValueError):
    """A graph definition breaks a static rule (G-2, G-5, G-9); raised before any body runs.

    The message names the node and the key.
    """


class UndeclaredKeyError(DurableError, KeyError):
    """A node body touched a key it did not declare in ``requires``/``provides`` (G-5)."""

    def __str__(self) -> str:  # KeyError would otherwise print the message with quotes
        return str(self.args[0]) if self.args else ""


class SlotError(DurableError, RuntimeError):
    """A node body or caller broke a slot rule at run time (G-3, G-4, G-10).

    Raised when a slot is written twice, a skipped or pending slot is read without a default, a
    value is not an instance of its key's type, or a stream key is used like a value key (or the
    other way round). The message names the node and the key. Inside a body it is a failure of
    the node like any other exception.
    """


class NodeFailedError(DurableError):
    """A node failed: the error of a failed run, of a failed Sub node, or of a failed stream (G-6).

    The node's original exception is ``__cause__``; :attr:`original` follows the chain through
    nested Sub nodes down to the first error that is not a ``NodeFailedError``.

    Attributes:
        path: the node's position, ``"split"`` in the root graph, ``"report/count"`` inside the
            Sub node ``report``.
    """

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path

    @property
    def original(self) -> BaseException | None:
        """The first error in the ``__cause__`` chain that is not a ``NodeFailedError``."""
        error: BaseException | None = self.__cause__
        while isinstance(error, NodeFailedError):
            error = error.__cause__
        return error


class MessageFailedError(NodeFailedError):
    """A processor node failed because one message spent its whole Retry budget (S-8).

    The handler's last exception is ``__cause__`` (and :attr:`original`).

    Attributes:
        path: the processor node's position.
        key: the name of the processor's input stream key.
        sequence: the message's sequence number in that stream.
        tries: how many tries of that message failed (its whole budget).
    """

    def __init__(self, message: str, path: str, *, key: str, sequence: int, tries: int) -> None:
        super().__init__(message, path)
        self.key = key
        self.sequence = sequence
        self.tries = tries

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _message_failed,
            (str(self), self.path, self.key, self.sequence, self.tries),
        )


def describe_error(error: BaseException | None) -> str:
    """``"ValueError: boom"`` (the type and message of an error), ``""`` for None."""
    if error is None:
        return ""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _message_failed(message: str, path: str, key: str, sequence: int, tries: int) -> Any:
    return MessageFailedError(message, path, key=key, sequence=sequence, tries=tries)


class RetryExhaustedError(DurableError):
    """A Retry's budget was already spent before this process started (G-8, R-ATT-4).

    Restarting never refills a budget: when the checkpoint says every try at a Retry boundary
    has already failed, the node fails with this error without running its body again.
    """


class SessionClosedError(DurableError):
    """``load``/``save`` was called on a session after ``close()`` (R-STORE-4).

    Also raised by ``Store.acquire`` after ``Store.close()``.
    """


class AcquireTimeoutError(DurableError, TimeoutError):
    """Ownership of a run could not be decided within the timeout (B-PG-2, B-SQL-1).

    Raised when waiting for connection capacity, a network check or an initialisation lock ran
    out of time. It never means "busy": the run may or may not be owned elsewhere.
    """


class StoreError(DurableError):
    """A store's medium failed: I/O, the database, the network to it (B-PG-3, R-RT-2).

    The base of the errors a store raises about its medium rather than about the run (those
    are :class:`BusyError`, :class:`NotFoundError`, :class:`ConflictError`,
    :class:`CorruptRecordError` …). The message names the store and what it was doing.

    Args:
        message: the full explanation.
        uncertain: the operation may or may not have taken effect (a save whose commit was not
            confirmed, because the connection was lost while it ran).

    Attributes:
        uncertain: as given. When True after a save, load the run again before deciding
            anything: the new revision may be stored. When False, the store knows the
            operation wrote nothing (it failed before writing, or the write was refused).
    """

    def __init__(self, message: str, *, uncertain: bool = False) -> None:
        super().__init__(message)
        self.uncertain = uncertain


class StreamError(DurableError):
    """A durable stream operation was refused (S-2, S-3, S-5).

    The base of :class:`StaleDeliveryError`, :class:`StreamFailedError` and
    :class:`StreamNotResumableError`; the message names the stream and says what to do.
    """


class StaleDeliveryError(StreamError):
    """A delivery of an older generation tried to acknowledge an element (S-2).

    Every resume raises a stream's generation; a delivery handed out before it has no ack
    authority any more. The element is delivered again with the new generation.
    """


class StreamFailedError(StreamError):
    """The stream's source failed: it refuses open, send and ack (S-5)."""


class StreamNotResumableError(StreamError):
    """``resume`` refused a run whose stopped producer cannot go on from its position (S-3).

    A producer that was still running sent elements with ``send`` (no position). Nothing ran
    and nothing was saved; make the producer send with ``send_at(element, position)`` and start
    from ``writer.position``, then start a new run.
    """


class ExecutorError(DurableError):
    """An executor could not run a node body where it was asked to.

    The base of :class:`NotPicklableError`, :class:`WorkerLostError` and
    :class:`RemoteBodyError`. Inside a run it is the failure of one try of the node, like any
    exception of the body: a ``Retry`` decides whether the node runs again.
    """


class NotPicklableError(ExecutorError, TypeError):
    """A node body, an input value or an output value cannot travel to or from its executor.

    Bodies and values sent to a process pool or a Dask cluster are pickled. The message names
    the node (and the key for a value) and what pickle refused. A body that cannot travel is
    found before the run starts; a value, when it is about to be sent or returned. Define the
    body at module level (importable by name in a worker), make the value picklable, or run the
    node with ``executor="local"``.
    """


class WorkerLostError(ExecutorError):
    """The worker process running a node body died (killed, crashed, out of memory).

    The try of the node failed; its ``Retry`` budget applies as for any failure. Other bodies
    running in the same process pool when it broke fail the same way.
    """


class RemoteBodyError(ExecutorError):
    """A remote body raised an exception that could not be pickled back to the owner.

    Exceptions that pickle cross the process boundary unchanged (type and message); this one
    stands in for those that do not, and names the original type.

    Attributes:
        type_name: the original exception's ``module.qualname``.
    """

    def __init__(self, message: str, type_name: str = "") -> None:
        super().__init__(message)
        self.type_name = type_name

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.type_name))


class InvariantError(DurableError):
    """Durable broke one of its own internal rules: a bug in Durable, not in the caller's code.

    Raised where Durable finds a state its own code should have made impossible. The message
    says what was found and asks to report it. Do not catch it to go on: the run stops, and
    what was saved before stays as it was.

    Args:
        detail: what was found (the message adds the request to report it).

    Attributes:
        detail: as given.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"{detail}. This is a bug in Durable, not in your code or data: please report it "
            "to Durable's maintainers with the traceback and the Durable version"
        )
        self.detail = detail

    def __reduce__(self) -> tuple[object, ...]:  # rebuild from the detail, not the message
        return (type(self), (self.detail,), dict(self.__dict__))
