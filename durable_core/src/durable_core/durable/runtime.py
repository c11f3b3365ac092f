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
from durable_core.codecs import Codecs
from durable_core.durable.activity import RunActivity
from durable_core.durable.checkpointer import DurableCheckpointer
from durable_core.durable.definition_diff import DefinitionFingerprints, RecentGraphs
from durable_core.durable.events import STOPPED, EventKind, InputFingerprints, RecoveryEvent
from durable_core.durable.inbox import send as send_message
from durable_core.durable.ledger import Ledger, new_id
from durable_core.durable.preflight import (
    Mode,
    PluginHints,
    RunRequest,
    input_parts,
    preflight,
)
from durable_core.durable.resume import ResumePlan, plan_resume, repair_streams
from durable_core.durable.waiting import SUSPEND, RunServices, Waiting, suspending
from durable_core.errors import (
    CheckpointError,
    CodecError,
    ConflictError,
    NodeFailedError,
    NotFoundError,
    describe_error,
)
from durable_core.executors import Executor
from durable_core.graph import (
    CancelToken,
    Graph,
    Key,
    RunResult,
    RunStatus,
    execute_async,
)
from durable_core.graph import Observer as GraphObserver
from durable_core.graph.definition import count_nodes
from durable_core.graph.mainloop import run_main
from durable_core.plugins.manager import default_plugins
from durable_core.records import RECORD_FORMAT, RunRecord, ScopeRecord
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
        if codecs is not None:
            self.codecs = codecs
        elif plugins is not None:
            self.codecs = Codecs.from_plugins(plugins)
        else:
            self.codecs = Codecs.default()
        self._observers = list(observers)
        self.activity = RunActivity()
        self._graph_observers = tuple(graph_observers)
        self._hints = PluginHints(plugins, codecs is None and plugins is not None)
        self._plugins = plugins  # recovery events reach plugins through it alone (_emit)
        if executor is None or isinstance(executor, Executor):
            self.executor, self._owns_executor = executor, False
        else:  # a registered name: built with default options, owned and closed by this runtime
            manager = plugins if plugins is not None else default_plugins()
            self.executor, self._owns_executor = manager.executor(executor)
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
        request = RunRequest(
            Mode.RUN, graph, run_id, version, inputs, max_running, timeout, cancel, input_identity
        )
        return self._perform_sync(request, suspend)

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
        request = RunRequest(
            Mode.RESUME,
            graph,
            run_id,
            version,
            inputs,
            max_running,
            timeout,
            cancel,
            input_identity,
        )
        return self._perform_sync(request, suspend)

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
        request = RunRequest(
            Mode.RUN_OR_RESUME,
            graph,
            run_id,
            version,
            inputs,
            max_running,
            timeout,
            cancel,
            input_identity,
        )
        return self._perform_sync(request, suspend)

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
        request = RunRequest(
            Mode.RUN_OR_RESUME,
            graph,
            run_id,
            version,
            inputs,
            max_running,
            timeout,
            cancel,
            input_identity,
        )
        return await self._perform(request)

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
        request = RunRequest(
            Mode.RUN, graph, run_id, version, inputs, max_running, timeout, cancel, input_identity
        )
        return await self._perform(request)

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
        request = RunRequest(
            Mode.RESUME,
            graph,
            run_id,
            version,
            inputs,
            max_running,
            timeout,
            cancel,
            input_identity,
        )
        return await self._perform(request)

    def _perform_sync(self, request: RunRequest, suspend: bool) -> DurableResult:
        """``request`` on a new event loop; with ``suspend``, a run found due again after it
        let go (a post or its deadline) is resumed at once (:func:`suspending`)."""
        return suspending(
            suspend,
            self.store,
            lambda again: run_main(
                self._perform(attrs.evolve(request, mode=Mode.RESUME) if again else request)
            ),
        )

    async def _perform(self, request: RunRequest) -> DurableResult:
        """The one path of every public method: ``run_or_resume`` tries to start the run,
        and continues it when it already has a record (nothing was saved)."""
        if request.mode is not Mode.RUN_OR_RESUME:
            return await self._start_or_continue(request, new=request.mode is Mode.RUN)
        try:
            return await self._start_or_continue(request, new=True)
        except CheckpointError as exc:
            if not isinstance(exc.__cause__, ConflictError):
                raise
        return await self._start_or_continue(request, new=False)

    async def _start_or_continue(self, request: RunRequest, *, new: bool) -> DurableResult:
        """Start (``new``) or resume: check, acquire, save the first record or plan the
        resume, execute; then wait for a save still in flight and close the session in a
        worker thread (closing may wait for the store: a lock file, a database)."""
        preflight(request, self.codecs, self.executor, self._hints)
        graph, run_id = request.graph, request.run_id
        given: InputFingerprints | None = None
        if new:
            try:
                given = input_parts(graph, self.codecs, request.inputs, request.input_identity)[0]
            except CodecError as exc:
                raise CheckpointError(f"run {run_id!r}: {exc}. Nothing was saved.") from exc
        session = await self._acquire(run_id, request.timeout)
        ledger: Ledger | None = None
        try:
            if given is not None:
                ledger = await self._start(session, request, given.fingerprint)
                plan = ResumePlan.fresh(given)
            else:
                record = await asyncio.to_thread(session.load)
                plan = plan_resume(
                    request, record, self.codecs, self.store, self._ran.get(run_id), self._plugins
                )
                ledger = Ledger(session, record)
                plan = await repair_streams(ledger, plan)
            self._ran.remember(run_id, graph)
            self._emit(
                RecoveryEvent(
                    kind=plan.kind,
                    run_id=run_id,
                    revision=ledger.revision,
                    total_nodes=count_nodes(graph),
                    definition=DefinitionFingerprints(graph),
                    inputs=plan.inputs,
                ),
                self._history(ledger.record),
            )
            if plan.failures.terminal:
                return self._failed_for_good(request, ledger.record, plan)
            return await self._execute(request, ledger, plan)
        finally:
            await _release(session, ledger)
            if ledger is not None and history.WRITER.pending():
                # what the caller reads next (durable log, inspect) holds this run's events
                await asyncio.to_thread(history.flush)

    async def _start(self, session: Any, request: RunRequest, fingerprint: str) -> Ledger:
        """Refuse an existing record, then save the first one (R-RT-3)."""
        graph, run_id = request.graph, request.run_id
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
            version=request.version,
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
            GraphError: as :func:`~durable_core.durable.preflight.encode_inputs`, for the
                inputs or the stand-ins; or a stand-in's key is not one of ``inputs``.
            CodecError: a value or stand-in cannot be encoded.
        """
        parts = input_parts(graph, self.codecs, inputs, input_identity)
        return tuple(part.fingerprint for part in parts)

    def _failed_for_good(
        self, request: RunRequest, record: RunRecord, plan: ResumePlan
    ) -> DurableResult:
        """The result of resuming a run whose root graph has a failed node: nothing runs.

        Its slots are what ``run`` would have shown: the root inputs and the outputs of the
        root graph's confirmed nodes.
        """
        graph, failures = request.graph, plan.failures
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
        ready: dict[str, Any] = {key.name: value for key, value in request.inputs.items()}
        skipped: set[str] = set()
        root_scope = record.root_scope
        for (scope_id, _), outputs in plan.restored.items():
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
        self, request: RunRequest, ledger: Ledger, plan: ResumePlan
    ) -> DurableResult:
        """Execute the graph from ``plan``, every change saved through ``ledger``; report how
        the run ended (``RUN_FINISHED``) and raise an error that is not a node's failure."""
        target = self._history(ledger.record)
        checkpointer = DurableCheckpointer(
            ledger,
            self.codecs,
            plan,
            lambda event: self._emit(event, target),
            listening=self._listening(),
            activity=self.activity,
        )
        services = RunServices(
            self.store,
            ledger.record.run_id,
            self.codecs,
            request.graph,
            SUSPEND.get(),
            request.cancel,
        )
        watcher = () if services.observer is None else (services.observer,)
        options: dict[str, Any] = {
            "checkpointer": checkpointer,
            "cancel": services.cancel,
            "observers": (*self._graph_observers, *watcher),
        }
        if request.max_running is not None:
            options["max_running"] = request.max_running
        try:
            async with services:  # inboxes, timers and waiting (X-INBOX-2, X-WAIT)
                result = await execute_async(
                    request.graph, inputs=dict(request.inputs), executor=self.executor, **options
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
        cancel = request.cancel
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

    def _listening(self) -> bool:
        """Whether any observer or ``durable_recovery_event`` implementation receives events
        (read as a run starts: without one, a resume builds no event per restored node)."""
        plugins = self._plugins
        return bool(self._observers) or (
            plugins is not None and plugins.listens_to_recovery_events()
        )

    def _history(self, record: RunRecord) -> history.HistoryTarget:
        """Where the history of ``record``'s run goes: this runtime's store, that run."""
        return history.HistoryTarget(self.store, record.run_id, record.root_scope)

    def _emit(self, event: RecoveryEvent, target: history.HistoryTarget | None = None) -> None:
        for observer in self._observers:
            try:
                observer(event)
            except Exception:
                log.exception("recovery event observer %r raised; the run goes on", observer)
        if self._plugins is not None:
            self._plugins.emit_recovery_event(event, target)


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
