"""``Runtime``: run and resume graphs durably (seed 000; SPEC R, R-RT-1…3, R-ATT-*, R-VAL-3).

A :class:`Runtime` pairs a :class:`~durable_core.store.Store` with
:class:`~durable_core.codecs.Codecs`. ``run`` starts a new run and writes its first record;
``resume`` loads an existing record, checks that it belongs to the graph, version and inputs it
is given, validates and decodes everything it holds, and continues: confirmed nodes are restored
without running their bodies, active attempts are adopted, spent Retry tries stay spent.

Every change is saved by compare-and-swap through one commit path before the engine goes on
(see :mod:`durable_core.durable.ledger`). A save that fails stops the run at once with a
:class:`~durable_core.errors.CheckpointError`; the next ``resume`` loads again (R-RT-2).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from durable_core.codecs import Codecs
from durable_core.durable.checkpointer import (
    DurableCheckpointer,
    decode_outputs,
    encode_value_record,
)
from durable_core.durable.events import EventKind, RecoveryEvent
from durable_core.durable.fingerprint import values_fingerprint
from durable_core.durable.ledger import Ledger, new_id
from durable_core.errors import (
    CheckpointError,
    CodecError,
    ConflictError,
    CorruptRecordError,
    DefinitionMismatchError,
    DurableError,
    GraphError,
    InputsMismatchError,
    NotFoundError,
    VersionMismatchError,
)
from durable_core.graph import CancelToken, Graph, execute_async
from durable_core.graph.checkpoint import NodeOutputs
from durable_core.integrity import validate_record
from durable_core.records import RECORD_FORMAT, RunRecord, ScopeRecord, ValueRecord
from durable_core.store import Store

__all__ = ["DurableResult", "Runtime"]

log = logging.getLogger("durable_core.durable")

Observer = Callable[[RecoveryEvent], Any]


@attrs.frozen
class DurableResult:
    """The outcome of ``Runtime.run``/``resume``.

    Attributes:
        run_id: the run.
        status: ``"completed"``, ``"failed"`` or ``"canceled"``.
        error: the run's error when it failed (a ``NodeFailedError`` naming the node, the
            original exception as ``__cause__``), else None.
        revision: the record's revision when the run ended.
        saves: how many saves this call made.
        restored: how many nodes were restored from the record instead of run.
        result: the engine's result (values by key).
    """

    run_id: str
    status: str
    error: BaseException | None
    revision: int
    saves: int
    restored: int
    result: Any = attrs.field(repr=False)

    def __getitem__(self, key: Any) -> Any:
        """The value of ``key`` (see the engine result)."""
        return self.result[key]

    def skipped(self, key: Any) -> bool:
        """Whether ``key`` ended skipped."""
        return self.result.skipped(key)


def count_nodes(graph: Graph) -> int:
    """Nodes of ``graph`` plus, for each Sub node, the nodes of its child graph (recursively)."""
    total = 0
    for node in graph.nodes.values():
        total += 1
        if node.child is not None:
            total += count_nodes(node.child)
    return total


class Runtime:
    """Runs graphs durably on one store.

    Args:
        store: where records are saved (any :class:`~durable_core.store.Store`).
        codecs: encodes inputs and outputs; default :meth:`Codecs.default`.
        observers: callables receiving each :class:`RecoveryEvent` after the save it
            describes; an observer that raises is logged and never fails the run.
        plugins: a plugin manager (``make_plugin_manager()``) whose
            ``durable_recovery_event`` hook also receives the events; None: no hook calls.
    """

    def __init__(
        self,
        store: Store,
        codecs: Codecs | None = None,
        *,
        observers: Iterable[Observer] = (),
        plugins: Any = None,
    ) -> None:
        self.store = store
        self.codecs = codecs if codecs is not None else Codecs.default()
        self._observers = list(observers)
        self._plugins = plugins

    # -- public API ------------------------------------------------------------------------

    def run(
        self,
        graph: Graph,
        *,
        run_id: str,
        version: str,
        inputs: Mapping[Any, Any],
        max_running: int | None = None,
        timeout: float | None = None,
        cancel: CancelToken | None = None,
    ) -> DurableResult:
        """Start a new run of ``graph`` and execute it (R-RT-3).

        Args:
            graph: the graph.
            run_id: the run's identity in the store (must not exist yet).
            version: the host's business version; ``resume`` must give the same.
            inputs: the root inputs by key; ``resume`` must give the same again.
            max_running: at most this many bodies run at once (engine default when None).
            timeout: seconds to wait at most in ``store.acquire`` (capacity/network only).
            cancel: a :class:`~durable_core.graph.CancelToken` to stop the run from outside
                (Ctrl-C): running bodies are canceled, the record stays resumable.

        Returns:
            The :class:`DurableResult`; a business failure is ``status == "failed"``.

        Raises:
            BusyError: another session owns the run.
            CheckpointError: the record already exists (``ConflictError`` inside: use
                ``resume``), an input cannot be encoded (before anything is saved), or a save
                failed (the run stopped; resume later).
            GraphError: the graph is invalid or the inputs do not match its root inputs.
            CodecError: an output cannot be encoded (the run stopped; the node stays active).
        """
        return asyncio.run(
            self.run_async(
                graph,
                run_id=run_id,
                version=version,
                inputs=inputs,
                max_running=max_running,
                timeout=timeout,
                cancel=cancel,
            )
        )

    def resume(
        self,
        graph: Graph,
        *,
        run_id: str,
        version: str,
        inputs: Mapping[Any, Any],
        max_running: int | None = None,
        timeout: float | None = None,
        cancel: CancelToken | None = None,
    ) -> DurableResult:
        """Continue an existing run of ``graph`` from its record.

        Before any node runs: the record must exist (``NotFoundError`` is never turned into a
        new run, R-RT-3), have a supported format, the same run id, ``version``, definition
        fingerprint and inputs fingerprint; the whole record is validated and every confirmed
        value decoded and checked (codec id/version, digest, type: R-VAL-3). Nothing is saved
        when any check fails.

        Raises:
            NotFoundError: no record for ``run_id``.
            BusyError: another session owns the run.
            VersionMismatchError, DefinitionMismatchError, InputsMismatchError: the record
                belongs to another version, graph or inputs.
            CorruptRecordError: the record breaks a rule of the data model, or a stored value
                is damaged (digest mismatch).
            CodecError: a stored value's codec changed or it no longer decodes to its type.
            CheckpointError: a save failed (the run stopped; resume again later).
        """
        return asyncio.run(
            self.resume_async(
                graph,
                run_id=run_id,
                version=version,
                inputs=inputs,
                max_running=max_running,
                timeout=timeout,
                cancel=cancel,
            )
        )

    async def run_async(
        self,
        graph: Graph,
        *,
        run_id: str,
        version: str,
        inputs: Mapping[Any, Any],
        max_running: int | None = None,
        timeout: float | None = None,
        cancel: CancelToken | None = None,
    ) -> DurableResult:
        """The ``async`` form of :meth:`run` (same arguments, errors and result)."""
        graph.validate()
        values = self._encode_inputs(graph, inputs, run_id)
        fingerprint = values_fingerprint(values)
        session = await asyncio.to_thread(self.store.acquire, run_id, timeout)
        try:
            try:
                await asyncio.to_thread(session.load)
            except NotFoundError:
                pass
            else:
                conflict = ConflictError(f"a record of run {run_id!r} already exists")
                error = CheckpointError(
                    f"run {run_id!r} already has a record: call resume to continue it, or "
                    "choose a new run id (R-RT-3). Nothing was saved."
                )
                raise error from conflict
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
            self._emit(
                RecoveryEvent(
                    kind=EventKind.RUN_STARTED,
                    run_id=run_id,
                    revision=ledger.revision,
                    total_nodes=count_nodes(graph),
                )
            )
            return await self._execute(graph, ledger, inputs, {}, max_running, cancel)
        finally:
            await asyncio.to_thread(session.close)

    async def resume_async(
        self,
        graph: Graph,
        *,
        run_id: str,
        version: str,
        inputs: Mapping[Any, Any],
        max_running: int | None = None,
        timeout: float | None = None,
        cancel: CancelToken | None = None,
    ) -> DurableResult:
        """The ``async`` form of :meth:`resume` (same arguments, errors and result)."""
        graph.validate()
        session = await asyncio.to_thread(self.store.acquire, run_id, timeout)
        try:
            record = await asyncio.to_thread(session.load)
            restored = self._check_record(graph, record, run_id, version, inputs)
            ledger = Ledger(session, record)
            self._emit(
                RecoveryEvent(
                    kind=EventKind.RUN_RESUMED,
                    run_id=run_id,
                    revision=ledger.revision,
                    total_nodes=count_nodes(graph),
                )
            )
            return await self._execute(graph, ledger, inputs, restored, max_running, cancel)
        finally:
            await asyncio.to_thread(session.close)

    # -- steps -----------------------------------------------------------------------------

    def _encode_inputs(
        self, graph: Graph, inputs: Mapping[Any, Any], run_id: str
    ) -> list[ValueRecord]:
        declared = {key.name: key for key in graph.inputs}
        values: list[ValueRecord] = []
        for key, value in inputs.items():
            name = getattr(key, "name", key)
            if declared.get(name) != key:
                raise GraphError(
                    f"input {key!r} is not a root input of graph {graph.name!r}; its inputs are "
                    f"{sorted(declared)}"
                )
            try:
                values.append(encode_value_record(self.codecs, key, True, value))
            except DurableError as exc:
                raise CheckpointError(
                    f"root input {name!r} of run {run_id!r} cannot be encoded: {exc}. Register a "
                    "codec for its type (Codecs.register / register_json). Nothing was saved."
                ) from exc
        return values

    def _check_record(
        self,
        graph: Graph,
        record: RunRecord,
        run_id: str,
        version: str,
        inputs: Mapping[Any, Any],
    ) -> dict[tuple[str, str], NodeOutputs]:
        if record.format > RECORD_FORMAT or record.format < 1:
            raise CorruptRecordError(
                f"run {run_id!r} has record format {record.format}; this version of Durable "
                f"reads formats 1 to {RECORD_FORMAT}. Use the Durable version that wrote it; "
                "nothing was saved (R-REC-1)."
            )
        if record.run_id != run_id:
            raise CorruptRecordError(
                f"the record loaded for run {run_id!r} names run {record.run_id!r}; nothing was "
                "saved. Check the store."
            )
        if record.version != version:
            raise VersionMismatchError(
                f"run {run_id!r} was started with version {record.version!r}, resume was given "
                f"{version!r}. Resume with the version it was started with, or start a new run "
                "id. Nothing was saved."
            )
        definition = graph.fingerprint()
        if record.definition != definition:
            raise DefinitionMismatchError(
                f"run {run_id!r} was started with another definition of graph {graph.name!r} "
                f"(stored fingerprint {record.definition[:12]}…, current {definition[:12]}…). "
                "Resume with the graph it was started with, or start a new run id. Nothing "
                "was saved."
            )
        try:
            values = self._encode_inputs(graph, inputs, run_id)
        except CheckpointError as exc:
            raise InputsMismatchError(f"resume of run {run_id!r}: {exc}") from exc
        if values_fingerprint(values) != record.inputs:
            raise InputsMismatchError(
                f"the inputs given to resume run {run_id!r} differ from those it was started "
                "with (their fingerprints differ). Resume needs the original inputs again "
                "(R-REC-3). Nothing was saved."
            )
        validate_record(record, definition=graph.describe_provides())
        graphs = graph.graphs()
        restored: dict[tuple[str, str], NodeOutputs] = {}
        for scope_id, scope in record.scopes.items():
            scope_graph = graphs.get(scope.graph)
            if scope_graph is None:
                raise CorruptRecordError(
                    f"scope {scope_id} of run {run_id!r} names graph {scope.graph!r}, which is "
                    "not part of the definition"
                )
            for node_id, node_record in scope.nodes.items():
                node = scope_graph.nodes.get(node_id)
                if node is None:
                    raise CorruptRecordError(
                        f"scope {scope_id} holds node {node_id!r}, which graph {scope.graph!r} "
                        "does not have"
                    )
                where = f"run {run_id!r} scope {scope.path or '(root)'!r} node {node_id!r}"
                restored[(scope_id, node_id)] = decode_outputs(
                    self.codecs, node.provides, node_record, where
                )
        return restored

    async def _execute(
        self,
        graph: Graph,
        ledger: Ledger,
        inputs: Mapping[Any, Any],
        restored: dict[tuple[str, str], NodeOutputs],
        max_running: int | None,
        cancel: CancelToken | None,
    ) -> DurableResult:
        restored_count = 0

        def emit(event: RecoveryEvent) -> None:
            nonlocal restored_count
            if event.kind is EventKind.NODE_RESTORED:
                restored_count += 1
            self._emit(event)

        checkpointer = DurableCheckpointer(ledger, self.codecs, restored, emit)
        options: dict[str, Any] = {"checkpointer": checkpointer, "cancel": cancel}
        if max_running is not None:
            options["max_running"] = max_running
        saves_before = ledger.saves
        result = await execute_async(graph, inputs=dict(inputs), **options)
        record = ledger.record
        self._emit(
            RecoveryEvent(
                kind=EventKind.RUN_FINISHED,
                run_id=record.run_id,
                revision=ledger.revision,
                status=result.status,
            )
        )
        if ledger.error is not None:
            raise ledger.error
        error = result.error
        if isinstance(error, (CheckpointError, CodecError, CorruptRecordError)):
            raise error
        return DurableResult(
            run_id=record.run_id,
            status=result.status,
            error=error,
            revision=ledger.revision,
            saves=ledger.saves - saves_before,
            restored=restored_count,
            result=result,
        )

    def _emit(self, event: RecoveryEvent) -> None:
        for observer in self._observers:
            try:
                observer(event)
            except Exception:
                log.exception("recovery event observer %r raised; the run goes on", observer)
        if self._plugins is not None:
            try:
                self._plugins.hook.durable_recovery_event(event=event)
            except Exception:
                log.exception("a durable_recovery_event hook raised; the run goes on")
