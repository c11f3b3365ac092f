"""``Runtime``: run and resume graphs durably (seed 000; SPEC R, R-RT-1…3, R-ATT-*, R-VAL-3).

A :class:`Runtime` pairs a :class:`~durable_core.store.Store` with
:class:`~durable_core.codecs.Codecs`. ``run`` starts a new run and writes its first record;
``resume`` loads an existing record, checks that it belongs to the graph, version and inputs it
is given, validates and decodes everything it holds, and continues: confirmed nodes are restored
without running their bodies, active attempts are adopted, spent Retry tries stay spent.

Every change is saved by compare-and-swap through one commit path before the engine goes on
(see :mod:`durable_core.durable.ledger`). A save that fails stops the run at once with a
:class:`~durable_core.errors.CheckpointError`; the next ``resume`` loads again (R-RT-2).
See ``docs/durable.md``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from durable_core import history
from durable_core._typeforms import (
    InstanceMismatch,
    check_instance,
    format_path,
    mismatch_text,
    normalize,
    type_name,
)
from durable_core.codecs import Codecs
from durable_core.durable.activity import RunActivity
from durable_core.durable.checkpointer import DurableCheckpointer, describe_error
from durable_core.durable.definition_diff import (
    DefinitionFingerprints,
    RecentGraphs,
    definition_mismatch,
)
from durable_core.durable.events import STOPPED, EventKind, InputFingerprints, RecoveryEvent
from durable_core.durable.fingerprint import values_fingerprint
from durable_core.durable.inbox import send as send_message
from durable_core.durable.ledger import Ledger, new_id
from durable_core.durable.messages_recovery import Adopted, adopt_managed
from durable_core.durable.recovery import Failures, decode_confirmed, propagate_failures
from durable_core.durable.streamrecovery import StreamPlan, plan_streams, repair
from durable_core.durable.waiting import SUSPEND, RunServices, Waiting, suspending
from durable_core.errors import (
    CheckpointError,
    CodecError,
    ConfigError,
    ConflictError,
    CorruptRecordError,
    GraphError,
    InputsMismatchError,
    NodeFailedError,
    NotFoundError,
    VersionMismatchError,
)
from durable_core.executors import Executor, resolve_executor
from durable_core.graph import (
    CancelToken,
    Graph,
    Key,
    RunResult,
    RunStatus,
    execute_async,
)
from durable_core.graph import Observer as GraphObserver
from durable_core.graph.checkpoint import NodeOutputs
from durable_core.graph.definition import count_nodes
from durable_core.graph.remote import dump_bodies
from durable_core.plugins import each_implementation
from durable_core.records import RECORD_FORMAT, RunRecord, ScopeRecord, ValueRecord, ValueState
from durable_core.records.integrity import validate_record
from durable_core.store import Store

__all__ = ["DurableResult", "Observer", "Runtime", "count_nodes"]

log = logging.getLogger("durable_core.durable")

Observer = Callable[[RecoveryEvent], Any]
"""A runtime observer: called with each :class:`RecoveryEvent`; its return value is ignored."""


@attrs.frozen
class DurableResult:
    """The outcome of ``Runtime.run``/``resume``.

    Attributes:
        run_id: the run.
        status: ``"completed"``, ``"failed"``, ``"canceled"``, or ``"waiting"`` (with
            ``suspend=True``: the run stopped to wait for inbox messages or a timer, X-WAIT).
        error: the run's error when it failed (a ``NodeFailedError`` naming the node, the
            original exception as ``__cause__`` when it failed in this process), else None.
        revision: the record's revision when the run ended.
        saves: how many saves this call made (the first record included).
        restored: how many nodes were restored from the record instead of run (a count,
            Sub graphs' nodes included; the restored values are in ``result``).
        result: the engine's :class:`~durable_core.graph.RunResult` (values by key).
        waiting: when ``status == "waiting"``: what the run waits for, and until when.

    Like the engine's ``RunResult``, it answers for the root graph's keys: ``result[KEY]``,
    ``KEY in result``, :meth:`get`, :meth:`skipped`, :meth:`pending` and :attr:`values`; a key
    that is not a key of the root graph raises ``UndeclaredKeyError``.
    """

    run_id: str
    status: str
    error: BaseException | None
    revision: int
    saves: int
    restored: int
    result: RunResult = attrs.field(repr=False)
    waiting: Waiting | None = None

    def __getitem__(self, key: Key[Any]) -> Any:
        """The ready value of ``key`` (see :meth:`RunResult.__getitem__`)."""
        return self.result[key]

    def __contains__(self, key: Key[Any]) -> bool:
        """True when ``key`` is ready (see :meth:`RunResult.__contains__`)."""
        return key in self.result

    def get(self, key: Key[Any], default: Any = None) -> Any:
        """The ready value of ``key``, or ``default`` when it is skipped or pending."""
        return self.result.get(key, default)

    def skipped(self, key: Key[Any]) -> bool:
        """Whether ``key`` ended skipped."""
        return self.result.skipped(key)

    def pending(self, key: Key[Any]) -> bool:
        """Whether ``key`` never arrived (the run failed or was canceled first)."""
        return self.result.pending(key)

    @property
    def values(self) -> dict[str, Any]:
        """Every ready value of the root graph, by key name (a copy)."""
        return self.result.values


def _check_graph(graph: Graph) -> None:
    graph.validate()
    for key in graph.inputs:
        if key.stream:
            raise GraphError(
                f"graph {graph.name!r} takes the stream {key.name!r} as a root input: a durable "
                "run stores only the streams its nodes produce. Produce it in a node (with "
                "send_at, to survive restarts), or run the graph with execute(). Nothing was "
                "saved."
            )


def _check_max_running(max_running: object) -> None:
    if max_running is None:
        return
    if isinstance(max_running, bool) or not isinstance(max_running, int) or max_running < 1:
        raise ConfigError(
            f"max_running must be a positive integer (bodies running at once), got "
            f"{max_running!r}; nothing was saved"
        )


def _check_version(version: object) -> None:
    if not isinstance(version, str):
        raise ConfigError(
            f"version must be a str (the host's business version), got {version!r}; nothing "
            "was saved"
        )


class Runtime:
    """Runs graphs durably on one store.

    Args:
        store: where records are saved (any :class:`~durable_core.store.Store`).
        codecs: encodes inputs and outputs. When None: ``Codecs.from_plugins(plugins)`` when
            ``plugins`` is given (the built-ins plus every loaded codec plugin's codecs), else
            :meth:`Codecs.default` (the built-ins only).
        observers: callables receiving each :class:`RecoveryEvent` after the save it
            describes; an observer that raises is logged and never fails the run.
        graph_observers: engine observers (:class:`~durable_core.graph.Observer`) passed to
            every run: ``graph_started``/``graph_finished`` and ``node_waiting``/
            ``node_running``/``node_finished`` (``restored=True`` for a node restored from
            the record), as with ``execute(..., observers=...)`` (G-11).
        plugins: a plugin manager (``make_plugin_manager()``) whose
            ``durable_recovery_event`` hook also receives the events (each implementation is
            called on its own: one that raises is logged and the others still get the event),
            and whose codec plugins fill the registry when ``codecs`` is None; None: no hook
            calls.
        executor: where function-form bodies declared with ``executor="default"`` run: an
            :class:`~durable_core.executors.Executor` (kept open across runs; close it when
            done), or a registered name such as ``"process"`` (built with default options
            from ``plugins`` or the installed plugins, stopped after each run); None: the
            run's worker threads. The owner keeps attempts, budgets, timeouts and commits
            (see ``docs/executors.md``).

    Raises:
        ConflictError, CodecError, PluginError: building the registry from ``plugins`` failed
            (see :meth:`Codecs.from_plugins`); ``executor`` names no installed executor.
        ConfigError: ``executor`` is neither an Executor, a name, nor None.

    Attributes:
        activity: the stream elements sent and processor messages committed by the runs of
            this runtime so far (:class:`~durable_core.durable.activity.RunActivity`); the
            ``durable`` command's progress line shows them.

    Example:
        >>> from durable_core import Graph, Key, MemoryStore
        >>> N, TWICE = Key("n", int), Key("twice", int)
        >>> g = Graph("double", inputs=[N])
        >>> @g.node("double", requires=[N], provides=[TWICE])
        ... def double(rc):
        ...     rc.set(TWICE, rc.get(N) * 2)
        >>> runtime = Runtime(MemoryStore())
        >>> runtime.run(g, run_id="job-1", version="1", inputs={N: 21})[TWICE]
        42
        >>> runtime.resume(g, run_id="job-1", version="1", inputs={N: 21}).restored
        1
    """

    def __init__(
        self,
        store: Store,
        codecs: Codecs | None = None,
        *,
        observers: Iterable[Observer] = (),
        graph_observers: Iterable[GraphObserver] = (),
        plugins: Any = None,
        executor: Executor | str | None = None,
    ) -> None:
        self.store = store
        self._codecs_from_plugins = codecs is None and plugins is not None
        if codecs is not None:
            self.codecs = codecs
        elif plugins is not None:
            self.codecs = Codecs.from_plugins(plugins)
        else:
            self.codecs = Codecs.default()
        self._observers = list(observers)
        self.activity = RunActivity()
        self._graph_observers = tuple(graph_observers)
        self._plugins = plugins
        self._hooked: tuple[Any, ...] = ()
        self._hook_calls: list[tuple[str, Callable[..., Any]]] = []
        self.executor, self._owns_executor = resolve_executor(executor, plugins)
        self._ran = RecentGraphs()  # explains a definition change without a run log

    # -- public API ------------------------------------------------------------------------

    send = staticmethod(send_message)

    def run(
        self,
        graph: Graph,
        *,
        run_id: str,
        version: str,
        inputs: Mapping[Key[Any], Any],
        max_running: int | None = None,
        timeout: float | None = None,
        cancel: CancelToken | None = None,
        input_identity: Mapping[Key[Any], Any] | None = None,
        suspend: bool = False,
    ) -> DurableResult:
        """Start a new run of ``graph`` and execute it (R-RT-3).

        In order: the graph is checked, and every value key of it and of its Sub graphs must
        have a codec for its declared type (:meth:`Codecs.check_declared`); the inputs are
        checked (every root input given, each value of its key's type, the whole value) and
        encoded; nothing is acquired or saved when any of that fails. Then the run is
        acquired; an existing record is refused; the first record is saved (format 2,
        revision 1, ``Version``, ``Definition`` = the graph's fingerprint, ``Inputs`` = the
        inputs' fingerprint, a random ``RootScope``); then the graph executes, every change
        saved before the engine goes on.

        Args:
            graph: the graph.
            run_id: the run's identity in the store (must not exist yet).
            version: the host's business version; ``resume`` must give the same.
            inputs: a value for every root input, by key; ``resume`` must give the same again.
            max_running: at most this many bodies run at once (engine default when None).
            timeout: seconds ``store.acquire`` may wait at most, or None for the store's own
                limit. It bounds only waiting for capacity or a network check (PostgreSQL:
                a free pool connection plus the lock query; the shorter of this and the store's
                ``acquire_timeout`` wins) and never the run itself; a run owned by another
                session is ``BusyError`` at once, never waited for. The file, SQLite and
                memory stores do not wait in ``acquire`` and only check the value.
            cancel: a :class:`~durable_core.graph.CancelToken` to stop the run from outside
                (for example from a SIGINT handler): running bodies are canceled, the call
                returns ``status == "canceled"`` and the record stays resumable. Without one,
                Ctrl-C raises ``KeyboardInterrupt`` once the running bodies have ended (a plain
                body first finishes its current call); the record stays resumable as well.
            suspend: when the run has nothing to do but wait for inbox messages or a timer,
                end it with status ``"waiting"`` and a waiting note in the store, holding no
                process and no lock (X-WAIT; see :mod:`durable_core.durable.waiting`); a post
                to it or its deadline passing makes it due for ``resume``.
            input_identity: for some root input keys, a value of the key's type that stands
                for the input in the record's input fingerprint instead of the value the graph
                receives (see :meth:`input_fingerprints`). The run configuration uses it for
                ``{ path = … }`` inputs: the graph gets the absolute path, the fingerprint
                holds the path relative to the configuration's folder. ``resume`` accepts the
                fingerprint with these stand-ins or without them.

        Returns:
            The :class:`DurableResult`; a node's failure is ``status == "failed"`` with a
            ``NodeFailedError`` naming it.

        Raises:
            BusyError: another session owns the run.
            CodecError: a value key's declared type has no codec (the message lists every
                such key and how to register one); nothing was acquired or saved. Also: an
                output cannot be encoded while the run executes (the run stopped; the node
                stays active and runs again on resume).
            CheckpointError: the record already exists (``ConflictError`` inside: use
                ``resume``), an input value cannot be encoded (``CodecError`` inside, naming
                the key: NaN, a lock inside an ``object`` value …; nothing was saved), or a
                save failed (the run stopped; resume later).
            GraphError: the graph is invalid (or takes a stream root input), or the inputs do
                not match its root inputs: a key that is not a root input, one missing, or a
                value that is not of its key's declared type (checked deeply: ``[1, "two"]`` for
                ``list[int]``, ``True`` for ``int``); nothing was saved.
            ConfigError: ``max_running`` or ``version`` is invalid; nothing was saved.
            NotPicklableError: a function-form body cannot be sent to the runtime's
                executor; nothing was saved.
            CorruptRecordError: a record of the run exists but cannot be read; it is left
                alone.
            ValueError: ``timeout`` is negative or not a number.
        """
        options: dict[str, Any] = {
            "run_id": run_id,
            "version": version,
            "inputs": inputs,
            "max_running": max_running,
            "timeout": timeout,
            "cancel": cancel,
            "input_identity": input_identity,
        }
        return suspending(
            suspend,
            self.store,
            lambda again: asyncio.run(
                (self.resume_async if again else self.run_async)(graph, **options)
            ),
        )

    def resume(
        self,
        graph: Graph,
        *,
        run_id: str,
        version: str,
        inputs: Mapping[Key[Any], Any],
        max_running: int | None = None,
        timeout: float | None = None,
        cancel: CancelToken | None = None,
        input_identity: Mapping[Key[Any], Any] | None = None,
        suspend: bool = False,
    ) -> DurableResult:
        """Continue an existing run of ``graph`` from its record.

        Before any node runs: the record must exist (``NotFoundError`` is never turned into a
        new run, R-RT-3), have a supported format (R-REC-1), the same run id, ``version``,
        definition fingerprint and inputs fingerprint; the whole record is validated
        (``validate_record``) and every confirmed value of every scope decoded and checked
        (codec id/version, digest, type: R-VAL-3). Nothing is saved when a check fails. Then
        the graph executes: confirmed nodes are restored without running, active attempts are
        adopted, failed Retry tries count as spent. A format-1 record is written back as
        format 2 by the first save.

        Args: as :meth:`run`.

        Returns:
            The :class:`DurableResult`. When a node of the root graph failed for good in an
            earlier process, nothing runs and the result is ``failed`` with a
            ``NodeFailedError`` naming it.

        Raises:
            NotFoundError: no record for ``run_id``; nothing is created.
            BusyError: another session owns the run.
            VersionMismatchError, DefinitionMismatchError, InputsMismatchError: the record
                belongs to another version, graph or inputs. A DefinitionMismatchError names
                the nodes added, removed and changed where the run log or this runtime kept
                the started definition's parts (``.added``, ``.removed``, ``.changed``, …).
            CorruptRecordError: the record breaks a rule of the data model, a stored value is
                damaged (digest mismatch), or its format is newer than this runtime's.
            CodecError: a value key's declared type has no codec (as :meth:`run`; checked
                before the run is acquired), a stored value's codec changed, or it no longer
                decodes to its type.
            InputsMismatchError: an input value cannot be encoded (so it cannot be the one
                the run was started with).
            CheckpointError: a save failed (the run stopped; resume again later).
            GraphError, ConfigError, ValueError: as :meth:`run`.
        """
        options: dict[str, Any] = {
            "run_id": run_id,
            "version": version,
            "inputs": inputs,
            "max_running": max_running,
            "timeout": timeout,
            "cancel": cancel,
            "input_identity": input_identity,
        }
        return suspending(
            suspend,
            self.store,
            lambda again: asyncio.run(self.resume_async(graph, **options)),
        )

    def run_or_resume(
        self,
        graph: Graph,
        *,
        run_id: str,
        version: str,
        inputs: Mapping[Key[Any], Any],
        max_running: int | None = None,
        timeout: float | None = None,
        cancel: CancelToken | None = None,
        input_identity: Mapping[Key[Any], Any] | None = None,
        suspend: bool = False,
    ) -> DurableResult:
        """Start ``run_id`` when it has no record, else continue it: one call for a scheduler.

        :meth:`run` is tried first; when the run already has a record (nothing was saved),
        :meth:`resume` continues it with every check ``resume`` makes (the same version,
        definition and inputs). A run that failed for good stays failed: its result is
        ``failed`` again, nothing runs (start a new run id, or fork it after a fix).

        Args: as :meth:`run`.

        Returns:
            The :class:`DurableResult` of the run or of the resume.

        Raises:
            As :meth:`run` when the run is new, as :meth:`resume` when it exists.
        """
        options: dict[str, Any] = {
            "run_id": run_id,
            "version": version,
            "inputs": inputs,
            "max_running": max_running,
            "timeout": timeout,
            "cancel": cancel,
            "input_identity": input_identity,
        }
        return suspending(
            suspend,
            self.store,
            lambda again: asyncio.run(
                (self.resume_async if again else self.run_or_resume_async)(graph, **options)
            ),
        )

    async def run_or_resume_async(
        self,
        graph: Graph,
        *,
        run_id: str,
        version: str,
        inputs: Mapping[Key[Any], Any],
        max_running: int | None = None,
        timeout: float | None = None,
        cancel: CancelToken | None = None,
        input_identity: Mapping[Key[Any], Any] | None = None,
    ) -> DurableResult:
        """The ``async`` form of :meth:`run_or_resume` (same arguments, errors and result)."""
        options: dict[str, Any] = {
            "run_id": run_id,
            "version": version,
            "inputs": inputs,
            "max_running": max_running,
            "timeout": timeout,
            "cancel": cancel,
            "input_identity": input_identity,
        }
        try:
            return await self.run_async(graph, **options)
        except CheckpointError as exc:
            if not isinstance(exc.__cause__, ConflictError):
                raise
        return await self.resume_async(graph, **options)

    def _preflight(self, graph: Graph, version: str, max_running: int | None) -> None:
        """The checks ``run`` and ``resume`` make before touching the store."""
        _check_graph(graph)
        _check_max_running(max_running)
        _check_version(version)
        self._check_codecs(graph)
        if self.executor is not None:
            dump_bodies(graph, self.executor)  # a body that cannot travel: before any save

    async def run_async(
        self,
        graph: Graph,
        *,
        run_id: str,
        version: str,
        inputs: Mapping[Key[Any], Any],
        max_running: int | None = None,
        timeout: float | None = None,
        cancel: CancelToken | None = None,
        input_identity: Mapping[Key[Any], Any] | None = None,
    ) -> DurableResult:
        """The ``async`` form of :meth:`run` (same arguments, errors and result)."""
        return await self._run_or_resume(
            True, graph, run_id, version, inputs, max_running, timeout, cancel, input_identity
        )

    async def resume_async(
        self,
        graph: Graph,
        *,
        run_id: str,
        version: str,
        inputs: Mapping[Key[Any], Any],
        max_running: int | None = None,
        timeout: float | None = None,
        cancel: CancelToken | None = None,
        input_identity: Mapping[Key[Any], Any] | None = None,
    ) -> DurableResult:
        """The ``async`` form of :meth:`resume` (same arguments, errors and result)."""
        return await self._run_or_resume(
            False, graph, run_id, version, inputs, max_running, timeout, cancel, input_identity
        )

    async def _run_or_resume(
        self,
        new: bool,
        graph: Graph,
        run_id: str,
        version: str,
        inputs: Mapping[Key[Any], Any],
        max_running: int | None,
        timeout: float | None,
        cancel: CancelToken | None,
        input_identity: Mapping[Key[Any], Any] | None = None,
    ) -> DurableResult:
        """The one body of ``run`` (``new``) and ``resume``: check, acquire, start or load,
        execute; then wait for a save still in flight and close the session in a worker
        thread (closing may wait for the store: a lock file, a database)."""
        self._preflight(graph, version, max_running)
        fingerprint = ""
        given: InputFingerprints | None = None
        if new:
            try:
                given = self._input_parts(graph, inputs, input_identity)[0]
            except CodecError as exc:
                raise CheckpointError(f"run {run_id!r}: {exc}. Nothing was saved.") from exc
            fingerprint = given.fingerprint
        session = await self._acquire(run_id, timeout)
        ledger: Ledger | None = None
        try:
            streams: StreamPlan | None = None
            managed: dict[tuple[str, str], Adopted] = {}
            if new:
                ledger = await self._start(session, graph, run_id, version, fingerprint)
                restored: dict[tuple[str, str], NodeOutputs] = {}
                failures = Failures()
                kind = EventKind.RUN_STARTED
            else:
                record = await asyncio.to_thread(session.load)
                restored, given = self._check_record(
                    graph, record, run_id, version, inputs, input_identity
                )
                streams = plan_streams(graph, record, self.codecs)
                failures = propagate_failures(record)
                managed = adopt_managed(graph, record, self.codecs, failures.propagated)
                ledger = Ledger(session, record)
                if streams.repairs:
                    # One CAS converges every endpoint of each listed root and its failure
                    # (S-6); a failed save stops here, and the next resume loads what was stored.
                    repairs = streams.repairs
                    await asyncio.to_thread(ledger.commit, lambda p: repair(p, repairs))
                    failures = propagate_failures(ledger.record)
                kind = EventKind.RUN_RESUMED
            self._ran.remember(run_id, graph)
            self._emit(
                RecoveryEvent(
                    kind=kind,
                    run_id=run_id,
                    revision=ledger.revision,
                    total_nodes=count_nodes(graph),
                    definition=DefinitionFingerprints(graph),
                    inputs=given,
                ),
                self._history(ledger.record),
            )
            if failures.terminal:
                return self._failed_for_good(graph, ledger.record, inputs, restored, failures)
            return await self._execute(
                graph, ledger, inputs, restored, failures, max_running, cancel, streams, managed
            )
        finally:
            await _release(session, ledger)
            if ledger is not None and history.WRITER.pending():
                # what the caller reads next (durable log, inspect) holds this run's events
                await asyncio.to_thread(history.flush)

    async def _start(
        self, session: Any, graph: Graph, run_id: str, version: str, fingerprint: str
    ) -> Ledger:
        """Refuse an existing record, then save the first one (R-RT-3)."""
        try:
            await asyncio.to_thread(session.load)
        except NotFoundError:
            pass
        else:
            conflict = ConflictError(f"a record of run {run_id!r} already exists")
            raise CheckpointError(
                f"run {run_id!r} already has a record: call resume to continue it, or "
                "choose a new run id. Nothing was saved."
            ) from conflict
        root = new_id()
        record = RunRecord(
            run_id=run_id,
            format=RECORD_FORMAT,
            revision=0,
            version=version,
            definition=graph.fingerprint(),
            inputs=fingerprint,
            root_scope=root,
            scopes={
                root: ScopeRecord(
                    graph=graph.name, path="", inputs=fingerprint, nodes={}, bindings=False
                )
            },
        )
        ledger = Ledger(session, None)
        await asyncio.to_thread(ledger.create, record)
        return ledger

    # -- steps -----------------------------------------------------------------------------

    async def _acquire(self, run_id: str, timeout: float | None) -> Any:
        """``store.acquire`` in a worker thread; when the caller is canceled meanwhile, the
        session the thread still gets is closed at once (the run is not left owned)."""
        future = asyncio.ensure_future(asyncio.to_thread(self.store.acquire, run_id, timeout))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:

            def release(done: asyncio.Future[Any]) -> None:
                if not done.cancelled() and done.exception() is None:
                    done.result().close()

            future.add_done_callback(release)
            raise

    def _check_codecs(self, graph: Graph) -> None:
        """Every value key of ``graph`` and of its Sub graphs has a codec for its declared
        type (or a type broad on purpose, see :meth:`Codecs.check_declared`).

        Raises:
            CodecError: listing every key without one, and how to register it.
        """
        missing: list[tuple[str, Key[Any], str]] = []
        for sub_graph in graph.graphs().values():
            states = [n.processor.state_key for n in sub_graph.nodes.values() if n.processor]
            for key in [*sub_graph.keys.values(), *states]:  # a processor's state is stored too
                try:
                    if key.stream:  # every element is stored with the element type's codec
                        self.codecs.lookup(key.type)
                        continue
                    self.codecs.check_declared(key.type)
                except CodecError as exc:
                    missing.append((sub_graph.name, key, str(exc)))
        if not missing:
            return
        served = self._served_by_plugins([key.type for _, key, _ in missing])
        lines = []
        for graph_name, key, problem in missing:
            line = f"  - key {key.name!r} of graph {graph_name!r} (type {type_name(key.type)}): "
            line += problem
            hint = served.get(type_name(key.type))
            if hint is not None:
                line += (
                    f". An installed codec plugin serves this type ({hint}), but this "
                    "runtime's registry does not use it: pass codecs=Codecs.from_plugins() or "
                    "plugins=make_plugin_manager() to Runtime"
                )
            lines.append(line)
        count = f"{len(missing)} key{'s' if len(missing) > 1 else ''}"
        raise CodecError(
            f"graph {graph.name!r} cannot run durably: no codec serves the declared type of "
            f"{count}, so their values could not be stored. Nothing was run or saved.\n"
            + "\n".join(lines)
            + "\nRegister a codec for each type in the registry the Runtime uses: "
            'for attrs classes, dataclasses and enums, [codecs] json = ["module:Class"] in '
            "the run's TOML file or codecs.register_json(T) from Python, "
            "codecs.register(codec) for a custom codec, or install a codec plugin and build "
            "the registry with Codecs.from_plugins() (see docs/codecs.md)."
        )

    def _served_by_plugins(self, types: list[Any]) -> dict[str, str]:
        """For types this runtime's registry lacks: the codec id an installed codec plugin
        has for them, by type name (empty when the registry already comes from the plugins,
        or the plugins cannot be loaded)."""
        if self._codecs_from_plugins:
            return {}
        try:
            from durable_core.plugins import make_plugin_manager

            pm = self._plugins if self._plugins is not None else make_plugin_manager()
            available = Codecs.from_plugins(pm)
        except Exception:  # only a hint: never hide the real error behind a plugin's
            log.debug("codec plugins could not be loaded for a hint", exc_info=True)
            return {}
        served: dict[str, str] = {}
        for tp in types:
            try:
                available.check_declared(tp)
            except CodecError:
                continue
            try:
                served[type_name(tp)] = f"codec {available.lookup(tp).id}"
            except CodecError:
                served[type_name(tp)] = "its values' classes have codecs"
        return served

    def input_fingerprints(
        self,
        graph: Graph,
        inputs: Mapping[Key[Any], Any],
        input_identity: Mapping[Key[Any], Any] | None = None,
    ) -> tuple[str, ...]:
        """The input fingerprints of ``inputs``: the one a new run stores first, then any other
        one ``resume`` also accepts (R-REC-2 ``Inputs``, R-REC-3).

        ``input_identity`` gives, for some root input keys, a value that stands for the input
        in the fingerprint instead of the value the graph receives: the run configuration
        gives a path input under the configuration's folder as its path relative to that
        folder, so that the project folder can be moved or cloned elsewhere and its runs still
        resume. The fingerprint of the values as given is accepted as well (a run started
        without ``input_identity``, as every run was before it existed).

        Args:
            graph: the graph whose root inputs these are.
            inputs: a value for every root input, by key.
            input_identity: stand-in values by key (each key one of ``inputs``, each value of
                the key's type), or None.

        Returns:
            One fingerprint (no stand-ins), or two: with the stand-ins, then without.

        Raises:
            GraphError: as :meth:`_encode_inputs`, for the inputs or the stand-ins; or a
                stand-in's key is not one of ``inputs``.
            CodecError: a value or stand-in cannot be encoded.
        """
        return tuple(part.fingerprint for part in self._input_parts(graph, inputs, input_identity))

    def _input_parts(
        self,
        graph: Graph,
        inputs: Mapping[Key[Any], Any],
        input_identity: Mapping[Key[Any], Any] | None = None,
    ) -> tuple[InputFingerprints, ...]:
        """:meth:`input_fingerprints`, each with the fingerprint of every input key."""

        def parts(values: list[ValueRecord]) -> InputFingerprints:
            return InputFingerprints(
                values_fingerprint(values), {v.name: values_fingerprint([v]) for v in values}
            )

        plain = parts(self._encode_inputs(graph, inputs))
        if not input_identity:
            return (plain,)
        extra = [key for key in input_identity if key not in inputs]
        if extra:
            raise GraphError(
                f"input_identity names {sorted(getattr(k, 'name', repr(k)) for k in extra)}, "
                f"which are not among the inputs given to graph {graph.name!r}. Nothing was "
                "saved."
            )
        stand_ins = {**inputs, **input_identity}
        return (parts(self._encode_inputs(graph, stand_ins)), plain)

    def _encode_inputs(self, graph: Graph, inputs: Mapping[Key[Any], Any]) -> list[ValueRecord]:
        """Check the root inputs, then encode each (R-REC-2 ``Inputs``).

        Each value must be of its key's declared type, checked deeply as a durable run
        checks every value it stores (``[1, "two"]`` is not a ``list[int]``, ``True`` not an
        ``int``; an ``int`` is a ``float``): a wrong type is a ``GraphError``, like an input
        the engine refuses. A value of the right type that cannot be encoded is a
        ``CodecError``.

        Raises:
            GraphError: a key is not a root input, a value is not of its key's type, or an
                input is missing.
            CodecError: a value cannot be encoded (the message names the key).
        """
        if not isinstance(inputs, Mapping):
            raise GraphError(
                f"inputs must be a mapping of the root input keys of graph {graph.name!r} to "
                f"values, got {type(inputs).__name__}"
            )
        declared = {key.name: key for key in graph.inputs}
        values: list[ValueRecord] = []
        for key, value in inputs.items():
            name = getattr(key, "name", None)
            if not isinstance(key, Key) or declared.get(name) != key:  # type: ignore[arg-type]
                raise GraphError(
                    f"{key!r} is not a root input of graph {graph.name!r}; its inputs are "
                    f"{sorted(declared)}, keyed by their Key. Nothing was saved."
                )
            key_type = normalize(key.type)
            try:
                if not key.accepts(value):
                    raise InstanceMismatch(mismatch_text(key_type, value))
                check_instance(value, key_type)
            except InstanceMismatch as exc:
                where = f"at {format_path(exc.path)}: " if exc.path else ""
                raise GraphError(
                    f"root input {key.name!r} of graph {graph.name!r} takes "
                    f"{type_name(key.type)} values: {where}{exc.problem}. Nothing was saved."
                ) from None
            try:
                encoded = self.codecs.encode_value(key.type, value)
            except CodecError as exc:
                raise CodecError(f"root input {key.name!r} cannot be stored: {exc}") from exc
            values.append(
                ValueRecord(
                    name=key.name,
                    type_id=encoded.codec_id,
                    version=encoded.version,
                    state=ValueState.READY,
                    digest=encoded.digest,
                    data=encoded.data,
                )
            )
        missing = sorted(set(declared) - {v.name for v in values})
        if missing:
            raise GraphError(
                f"graph {graph.name!r}: inputs {missing} were not given; pass a value for every "
                "root input. Nothing was saved."
            )
        return values

    def _check_record(
        self,
        graph: Graph,
        record: RunRecord,
        run_id: str,
        version: str,
        inputs: Mapping[Key[Any], Any],
        input_identity: Mapping[Key[Any], Any] | None = None,
    ) -> tuple[dict[tuple[str, str], NodeOutputs], InputFingerprints]:
        """Check the loaded record against what resume was given (R-REC-1, R-REC-3); return
        the decoded outputs of the confirmed nodes, and the fingerprints of the inputs that
        matched."""
        if not 1 <= record.format <= RECORD_FORMAT:
            raise CorruptRecordError(
                f"run {run_id!r} has record format {record.format}; this version of Durable "
                f"reads formats 1 to {RECORD_FORMAT}. Use the Durable version that wrote it; "
                "nothing was saved.",
                path="$.Format",
                rule="R-REC-1",
            )
        if record.run_id != run_id:
            raise CorruptRecordError(
                f"the record loaded for run {run_id!r} names run {record.run_id!r}; nothing was "
                "saved. Check the store.",
                path="$.RunID",
                rule="R-STORE-3",
            )
        if record.version != version:
            raise VersionMismatchError(
                f"run {run_id!r} was started with version {record.version!r}, resume was given "
                f"{version!r}. Resume with the version it was started with, or start a new run "
                "id. Nothing was saved."
            )
        definition = graph.fingerprint()
        if record.definition != definition:
            raise definition_mismatch(graph, record, self._ran.get(run_id), store=self.store)
        try:
            accepted = self._input_parts(graph, inputs, input_identity)
        except CodecError as exc:
            raise InputsMismatchError(
                f"resume of run {run_id!r}: {exc}; such an input cannot be the one the run was "
                "started with. Nothing was saved."
            ) from exc
        matched = [part for part in accepted if part.fingerprint == record.inputs]
        if not matched:
            paths = ""
            if input_identity:  # inputs that name a place: moving the project may be the cause
                paths = (
                    " A { path = ... } input of a run configuration counts by its path relative "
                    "to the configuration's folder; a run started before that rule counts it by "
                    "its absolute path: resume such a run from its original folder, or fork it "
                    "there."
                )
            changed = changed_inputs(self.store, record, accepted)
            if changed:
                names = ", ".join(repr(name) for name in changed)
                what = f"input {names} differs" if len(changed) == 1 else f"inputs {names} differ"
                raise InputsMismatchError(
                    f"the inputs given to resume run {run_id!r} differ from those it was "
                    f"started with: {what} (a value, or the codec id/version of its type, "
                    f"changed). Resume needs the original inputs again.{paths} Nothing was "
                    "saved.",
                    changed=tuple(changed),
                )
            raise InputsMismatchError(
                f"the inputs given to resume run {run_id!r} differ from those it was started "
                "with (their fingerprints differ: a value, or the codec id/version of an input "
                f"type, changed). Resume needs the original inputs again.{paths} Nothing was "
                "saved."
            )
        validate_record(record, definition=graph.provided_names())
        return decode_confirmed(graph, record, self.codecs), matched[0]

    def _failed_for_good(
        self,
        graph: Graph,
        record: RunRecord,
        inputs: Mapping[Key[Any], Any],
        restored: dict[tuple[str, str], NodeOutputs],
        failures: Failures,
    ) -> DurableResult:
        """The result of resuming a run whose root graph has a failed node: nothing runs.

        Its slots are what ``run`` would have shown: the root inputs and the outputs of the
        root graph's confirmed nodes.
        """
        nodes = [node_id for node_id, _ in failures.terminal]
        first_node, first_attempt = failures.terminal[0]
        others = f" (and {nodes[1:]})" if len(nodes) > 1 else ""
        error = NodeFailedError(
            f"node {first_node!r}{others} of run {record.run_id!r} failed for good in an earlier "
            f"process (root attempt {first_attempt} is failed); nothing was run. A failed "
            "attempt is never run again and no Retry budget is refilled. After a fix, fork "
            "the run into a new run id ('durable fork', or fork_run) to keep its confirmed "
            "nodes, or start a new run id to run the graph again.",
            path=first_node,
        )
        ready: dict[str, Any] = {key.name: value for key, value in inputs.items()}
        skipped: set[str] = set()
        root_scope = record.root_scope
        for (scope_id, _), outputs in restored.items():
            if scope_id == root_scope:
                ready.update(outputs.ready)
                skipped.update(outputs.skipped)
        self._emit(
            RecoveryEvent(
                kind=EventKind.RUN_FINISHED,
                run_id=record.run_id,
                revision=record.revision,
                status=str(RunStatus.FAILED),
                error=describe_error(error),
            ),
            self._history(record),
        )
        return DurableResult(
            run_id=record.run_id,
            status=str(RunStatus.FAILED),
            error=error,
            revision=record.revision,
            saves=0,
            restored=0,
            result=RunResult(graph, RunStatus.FAILED, error, ready, skipped),
        )

    async def _execute(
        self,
        graph: Graph,
        ledger: Ledger,
        inputs: Mapping[Key[Any], Any],
        restored: dict[tuple[str, str], NodeOutputs],
        failures: Failures,
        max_running: int | None,
        cancel: CancelToken | None,
        streams: StreamPlan | None = None,
        managed: Mapping[tuple[str, str], Adopted] | None = None,
    ) -> DurableResult:
        target = self._history(ledger.record)
        checkpointer = DurableCheckpointer(
            ledger,
            self.codecs,
            restored,
            lambda event: self._emit(event, target),
            propagated=failures.propagated,
            streams=streams,
            managed=managed,
            listening=self._listening(),
            activity=self.activity,
        )
        services = RunServices(
            self.store, ledger.record.run_id, self.codecs, graph, SUSPEND.get(), cancel
        )
        options: dict[str, Any] = {
            "checkpointer": checkpointer,
            "cancel": services.cancel,
            "observers": (*self._graph_observers, services.observer),
        }
        if max_running is not None:
            options["max_running"] = max_running
        try:
            async with services:  # inboxes, timers and waiting (X-INBOX-2, X-WAIT)
                result = await execute_async(
                    graph, inputs=dict(inputs), executor=self.executor, **options
                )
        finally:
            if self._owns_executor and self.executor is not None:
                await asyncio.to_thread(self.executor.close)
        record = ledger.record
        error = result.error
        if ledger.error is not None:
            error = ledger.error
        status = str(result.status)
        if error is not None and not isinstance(error, NodeFailedError):
            # not a node's failure: the save or the durable layer stopped the run, and the
            # record stays resumable, so the history does not call the run failed
            status = STOPPED
        self._emit(
            RecoveryEvent(
                kind=EventKind.RUN_FINISHED,
                run_id=record.run_id,
                revision=ledger.revision,
                status=status,
                error=describe_error(error),
            ),
            target,
        )
        if ledger.error is not None:
            raise ledger.error
        if error is not None and not isinstance(error, NodeFailedError):
            # The run was stopped by the checkpointer itself (an output no codec encodes, a
            # record that disagrees with the graph): not a node failure, raise it.
            raise error
        final = await services.status(
            str(result.status), record, cancel is not None and cancel.canceled
        )
        return DurableResult(
            run_id=record.run_id,
            status=final,
            error=error,
            revision=ledger.revision,
            saves=ledger.saves,
            restored=checkpointer.restored_count,
            result=result,
            waiting=services.suspended if final == "waiting" else None,
        )

    def _event_hooks(self) -> list[tuple[str, Callable[..., Any]]]:
        """The callers of the ``durable_recovery_event`` implementations, built again only
        when the implementations changed (events come several times per node)."""
        impls = tuple(self._plugins.hook.durable_recovery_event.get_hookimpls())
        if impls != self._hooked:
            self._hooked = impls
            self._hook_calls = (
                each_implementation(self._plugins, "durable_recovery_event", reverse=True)
                if impls
                else []
            )
        return self._hook_calls

    def _listening(self) -> bool:
        """Whether any observer or ``durable_recovery_event`` implementation receives events
        (read as a run starts: without one, a resume builds no event per restored node)."""
        return bool(self._observers) or (self._plugins is not None and bool(self._event_hooks()))

    def _history(self, record: RunRecord) -> history.HistoryTarget:
        """Where the history of ``record``'s run goes: this runtime's store, that run."""
        return history.HistoryTarget(self.store, record.run_id, record.root_scope)

    def _emit(self, event: RecoveryEvent, target: history.HistoryTarget | None = None) -> None:
        for observer in self._observers:
            try:
                observer(event)
            except Exception:
                log.exception("recovery event observer %r raised; the run goes on", observer)
        if self._plugins is None:
            return
        for plugin_name, call in self._event_hooks():
            try:
                call(event=event, history=target)
            except Exception:
                log.exception(
                    "the durable_recovery_event hook of plugin %r raised; the run goes on",
                    plugin_name,
                )


def changed_inputs(store: Any, record: RunRecord, given: Iterable[InputFingerprints]) -> list[str]:
    """The names of the root inputs that differ from those ``record``'s run started with,
    judged by the per-input fingerprints its history keeps (the run log's ``inputs`` entry);
    empty when the history has none for the record's inputs. With several ways to count the
    given inputs (``input_identity``), the one with the fewest differences."""
    from durable_core.runlog import saved_inputs

    saved = saved_inputs(store, record.run_id, record.inputs, record.root_scope)
    if saved is None:
        return []
    best: list[str] | None = None
    for part in given:
        names = sorted(
            name
            for name in saved.keys() | part.keys.keys()
            if saved.get(name) != part.keys.get(name)
        )
        if best is None or len(names) < len(best):
            best = names
    return best or []


async def _release(session: Any, ledger: Ledger | None) -> None:
    """Wait for a save still in flight, then close ``session`` in a worker thread.

    No task is left behind: when the caller is canceled meanwhile, it still waits until the
    session is closed (so that the run is never left owned, and a save is never cut off by the
    close), then the cancellation goes on.
    """
    canceled: asyncio.CancelledError | None = None
    if ledger is not None:
        while True:
            try:
                await ledger.settle()
                break
            except asyncio.CancelledError as exc:
                canceled = exc
    closing = asyncio.get_running_loop().run_in_executor(None, session.close)
    while not closing.done():
        try:
            await asyncio.wait([closing])
        except asyncio.CancelledError as exc:
            canceled = exc
    closing.result()
    if canceled is not None:
        raise canceled
