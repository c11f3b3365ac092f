"""The durable checkpointer: the engine's checkpoint seam backed by the run record (G-12).

:class:`DurableCheckpointer` implements :class:`~durable_core.graph.Checkpointer` for one run.
It turns each seam call into a record mutation saved through the run's
:class:`~durable_core.durable.ledger.Ledger` (one commit path, group commit), and answers the
engine from what the record already holds:

- ``open_scope``: the root scope is the record's ``RootScope``; a Sub's child scope has the id of
  the Sub node's deepest current attempt (R-SCOPE-2), its ``Path`` is the Sub node's path. A
  scope already in the record is reused (its confirmed nodes are restored); a new one is added
  to the record with the first save that needs it, fingerprinted from the Sub's stable bindings
  (``Bindings: true``, R-SCOPE-1).
- ``begin_node``: a node with a NodeRecord in its scope is restored (its body does not run); an
  active root attempt is adopted (same id); otherwise the node gets a new root attempt that is
  not saved yet: it is written (active) with the first change that needs it in the record — a
  Retry try that starts, the child scope of a Sub that opens, the attempt's failure, or the
  node's confirmation. A node that has not got that far leaves nothing in the record, and runs
  again under a new root attempt after a restart. A failed root attempt in a live scope means
  the node failed for good in an earlier process: the run stops, naming it (``resume`` reports
  this before anything runs when the node is in the root graph).
- ``begin_try``: the first try at a Retry boundary looks at the record: failed tries count as
  spent, an active try is adopted with its index, and a spent budget is reported as such
  (R-ATT-4: restarting never refills a budget). Every new try is saved active before it runs
  (with its root attempt, when that is not saved yet), with the outer attempt as parent and the
  aspect's position as boundary (R-ATT-3).
- ``fail_attempt``: the attempt is saved failed.
- streams (``open_stream``, ``send_element``, ``ack_elements``) go to the run's
  :class:`~durable_core.durable.streams.StreamBook`; opening a stream (or acking) writes the
  node's root attempt when it is not saved yet, in the same save as the writer entry (the
  ack); a root attempt's failure saves its streams failed in the same save (S-5); a confirmed
  reader's groups are acked and a confirmed producer's streams completed in the save that
  confirms the node.
- processor nodes (``open_processor``, ``begin_message``, ``fail_message``,
  ``commit_messages``) go to the run's :class:`~durable_core.durable.messages.MessageBook`:
  each message transaction is one save; the final one is saved with the node's confirmation.
  The processor's root attempt costs no save of its own: it is written with the first of
  these saves (or with a failed try, or an ack of its input).
- ``commit_node``: the outputs are encoded (codec id, version, data, digest) and the root attempt
  is confirmed together with the complete NodeRecord in one save (R-ATT-2, R-NODE-1), with the
  Retry tries that led to the success; the engine publishes the outputs only after that save
  succeeded.

Each change is reported to the runtime as a :class:`~durable_core.durable.events.RecoveryEvent`
after the save that holds it. A restored node's ``NODE_RESTORED`` event is built only when
someone listens (``listening``): a resume of many confirmed nodes with no observer and no
``durable_recovery_event`` plugin makes no event per node; ``restored_count`` counts the
restored nodes either way.
"""

from __future__ import annotations

import logging
import operator
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from durable_core._quickinit import quick_init
from durable_core.codecs import Codecs
from durable_core.durable import ledger as L
from durable_core.durable.activity import RunActivity
from durable_core.durable.copies import ATOMS, share_values, shared_as_is
from durable_core.durable.events import EventKind, RecoveryEvent
from durable_core.durable.failures import failure_of
from durable_core.durable.fingerprint import sub_scope_fingerprint
from durable_core.durable.messages import MessageBook
from durable_core.durable.recovery import decode_outputs
from durable_core.durable.resume import ResumePlan
from durable_core.durable.streamrecovery import StreamPlan
from durable_core.durable.streams import (
    Source,
    StreamBook,
    complete_source,
    fail_sources,
    finish_group,
    raise_generation,
    release,
    reopen_groups,
)
from durable_core.errors import (
    CodecError,
    CorruptRecordError,
    DurableError,
    NodeFailedError,
    StreamFailedError,
    describe_error,
)
from durable_core.graph import Checkpointer, Graph
from durable_core.graph.checkpoint import Attempt, CopyOnRead, NodeOutputs, Scope, Values
from durable_core.graph.processor import Managed, MessageAttempt, MessageCommit, Processor
from durable_core.graph.streams import Stream
from durable_core.records import (
    AttemptRecord,
    AttemptState,
    NodeReason,
    NodeRecord,
    StreamDescriptorRecord,
    ValueRecord,
    ValueState,
)

__all__ = ["DurableCheckpointer", "decode_outputs", "encode_value_record"]

log = logging.getLogger("durable_core.durable")

# ``Attempt(id=…, scope=…, node=…, restored=…)``, built once per restored node of a resume.
_restored_attempt = quick_init(Attempt, "id", "scope", "node", "restored")
_new_attempt = quick_init(Attempt, "id", "scope", "node")
_IS_STREAM = operator.attrgetter("stream")  # whether a key is a stream key, read in C
_new_value = quick_init(ValueRecord, "name", "type_id", "version", "state", "digest", "data")
"""``ValueRecord(name=…, type_id=…, version=…, state=…, digest=…, data=…)``: one per output."""

# ``NodeReason(reason)`` for the reasons the engine gives (its values and its members).
_REASONS: dict[Any, NodeReason] = {
    **{reason.value: reason for reason in NodeReason},
    **{reason: reason for reason in NodeReason},
}

Emit = Callable[[RecoveryEvent], None]


def encode_value_record(codecs: Codecs, key: Any, ready: bool, value: Any = None) -> ValueRecord:
    """The ValueRecord of one slot: encoded with digest when ready, empty when skipped (R-VAL-1/2).

    Args:
        codecs: the registry that encodes the value.
        key: the slot's key.
        ready: whether the slot is ready (else skipped: no data, empty digest).
        value: the ready value.

    Returns:
        The value record.

    Raises:
        CodecError: no codec can encode the value; the message names the key.
        DurableError: ``key`` is a stream key and ``ready`` (a stream is stored as its
            source's descriptor, S-1).
    """
    if not ready:
        return ValueRecord(name=key.name, state=ValueState.SKIPPED)
    if type(value) is CopyOnRead:  # a Sub node's output through Out: saved in the child
        if isinstance(value.source, ValueRecord):
            return attrs.evolve(value.source, name=key.name)
        value = value.read()
    if getattr(key, "stream", False):
        raise DurableError(
            f"key {key.name!r} is a stream: a ready stream is stored as the descriptor of its "
            "source (StreamBook.output_record), never through a codec"
        )
    encoded = codecs.encode_value(key.type, value, name=key.name)
    return _new_value(  # type: ignore[no-any-return]
        key.name,
        encoded.codec_id,
        encoded.version,
        ValueState.READY,
        encoded.digest,
        encoded.data,
    )


def _nothing(proposal: L.Proposal) -> None:
    """A mutation that changes nothing."""


def _scope_chain(scope: Scope) -> frozenset[str]:
    """The ids of ``scope`` and of every scope above it."""
    ids = []
    current: Scope | None = scope
    while current is not None:
        ids.append(current.id)
        parent = current.parent
        current = None if parent is None else parent.scope
    return frozenset(ids)


class DurableCheckpointer(Checkpointer):
    """The checkpoint seam of one durable run (see the module documentation).

    Args:
        ledger: the run's committed record and commit path.
        codecs: encodes outputs.
        plan: what the run starts from (:class:`~durable_core.durable.resume.ResumePlan`):
            the decoded outputs of confirmed nodes (built before the run starts, so that a
            damaged value stops ``resume`` before any body runs); the active attempts that
            the record implies have failed (``plan.failures.propagated``: treated as failed
            and saved failed with the next save); what resume rebuilds for streams; and the
            committed state of processor nodes adopted from the record.
        emit: called with each recovery event after the save it describes.
        listening: whether anyone receives the events passed to ``emit``; when False, no
            event is built.
        activity: where the run's stream elements and processor messages are counted (see
            :class:`~durable_core.durable.activity.RunActivity`); None: a counter of its own.

    Attributes:
        restored_count: how many nodes were restored from the record so far (Sub graphs'
            nodes included).
    """

    def __init__(
        self,
        ledger: L.Ledger,
        codecs: Codecs,
        plan: ResumePlan,
        emit: Emit,
        *,
        listening: bool = True,
        activity: RunActivity | None = None,
    ) -> None:
        self._ledger = ledger
        self._listening = listening
        self.restored_count = 0
        self._plan = plan.streams if plan.streams is not None else StreamPlan()
        self._book = StreamBook(ledger, codecs, activity)
        # Called once per element sent: the book's own method, without a frame in between.
        self.queue_element = self._book.queue_element  # type: ignore[method-assign]
        self._messages = MessageBook(ledger, codecs, plan.managed, self._book.encode, activity)
        self._restored_streams: dict[tuple[str, str, str], Stream] = {}
        self._codecs = codecs
        self._restored = plan.restored
        self._emit = emit
        record = ledger.record
        self._run_id = record.run_id
        self._root_scope = record.root_scope
        self._known_scopes = dict(record.scopes)
        failed = frozenset(plan.failures.propagated)
        # The attempts the record held when this process started (the ledger replaces an
        # attempt it changes, so this copy of the map keeps them as they were); indexed by
        # _history on first use: a resume that restores every node never needs it.
        self._started_with = dict(record.attempts)
        self._failed = failed
        self._indexed: dict[tuple[str, str, str], list[tuple[str, AttemptRecord]]] | None = None
        # Root attempts begun in this process and not saved yet, with the mutation saving them.
        self._unsaved: dict[str, L.Mutation] = {}
        # Retry tries begun or adopted in this process, by their node's root attempt id.
        self._tries: dict[str, list[str]] = defaultdict(list)
        # The durable streams a Sub node's child reads, by the Sub's root attempt id: the
        # save that ends the Sub node lets them stop keeping elements for groups it anchors.
        self._sub_inputs: dict[str, list[Stream]] = {}
        # What each node's confirming save does besides confirming it, by node: whether it
        # produces a stream, reads one (as its own group), and is a processor.
        self._roles: dict[Any, tuple[bool, bool, bool]] = {}
        # Root attempts being confirmed whose outputs are shared as they are (shared_as_is):
        # ``share`` answers at once for them.
        self._as_is: set[str] = set()
        for attempt_id in sorted(failed):

            def fail(proposal: L.Proposal, attempt_id: str = attempt_id) -> None:
                L.fail_attempt(proposal, attempt_id)

            ledger.defer(fail)

    # -- helpers ---------------------------------------------------------------------------

    @property
    def _history(self) -> dict[tuple[str, str, str], list[tuple[str, AttemptRecord]]]:
        """The attempts the record held when this process started, by (parent, node,
        boundary), in index order; attempts implied failed count as failed.

        The root attempts of restored nodes are left out: ``begin_node`` restores such a node
        before it looks at the index, and no try of theirs begins (their bodies do not run).
        A resume that runs only its last node indexes what that node needs, not every
        attempt of the run."""
        if self._indexed is not None:
            return self._indexed
        failed = self._failed
        started = self._started_with
        if self._restored:
            known = self._known_scopes
            restored = self._restored
            if len(restored) == sum(len(scope.nodes) for scope in known.values()):
                # Every NodeRecord is restored (the usual resume: decode_confirmed decodes each
                # one): no pair to look up per node.
                skip = {node.attempt for scope in known.values() for node in scope.nodes.values()}
            else:
                skip = {known[scope_id].nodes[node_id].attempt for scope_id, node_id in restored}
            kept = [item for item in started.items() if item[0] not in skip]
        else:
            kept = list(started.items())
        history: dict[tuple[str, str, str], list[tuple[str, AttemptRecord]]] = defaultdict(list)
        for attempt_id, attempt in kept:
            if attempt_id in failed:
                attempt = AttemptRecord(
                    parent=attempt.parent,
                    node_id=attempt.node_id,
                    boundary=attempt.boundary,
                    index=attempt.index,
                    limit=attempt.limit,
                    state=AttemptState.FAILED,
                )
            history[(attempt.parent, attempt.node_id, attempt.boundary)].append(
                (attempt_id, attempt)
            )
        for tries in history.values():
            if len(tries) > 1:
                tries.sort(key=lambda item: item[1].index)
        self._indexed = history
        self._started_with = {}
        return history

    def _take_unsaved(self, attempt: Attempt) -> L.Mutation:
        """The mutation that writes ``attempt``'s root attempt when it is not saved yet (a
        no-op otherwise); from now on it counts as saved. Put it first in the mutation of the
        change that needs the root attempt in the record."""
        begin = self._unsaved.pop((attempt if attempt.parent is None else attempt.root).id, None)
        return begin if begin is not None else _nothing

    def _event(
        self,
        kind: EventKind,
        attempt: Attempt,
        error: str = "",
        revision: int | None = None,
        failure: BaseException | None = None,
    ) -> None:
        if not self._listening:  # nobody receives events: build none
            return
        details = failure_of(failure)
        self._emit(
            RecoveryEvent(
                kind=kind,
                run_id=self._run_id,
                scope_path=attempt.scope.path,
                scope_id=attempt.scope.id,
                node_id=attempt.node_id,
                attempt_index=attempt.index,
                attempt_limit=attempt.limit,
                revision=self._ledger.revision if revision is None else revision,
                attempt_id=attempt.id,
                error=error,
                where=details.where,
                traceback=details.traceback,
                boundary=attempt.boundary,
            )
        )

    # -- the seam --------------------------------------------------------------------------

    async def open_scope(
        self, graph: Graph, path: str, parent: Attempt | None, inputs: Values
    ) -> Scope:
        if parent is None:
            return Scope(id=self._root_scope, graph=graph, path=path, parent=None)
        scope_id = parent.id
        prefix = path + "/"
        streams = [
            value
            for value in inputs.ready.values()
            if isinstance(value, Stream) and isinstance(value.data, Source)
        ]
        if streams:
            known_inputs = self._sub_inputs.setdefault(parent.root.id, [])
            known_inputs.extend(s for s in streams if s not in known_inputs)
        known = self._known_scopes.get(scope_id)
        if known is not None:
            if known.graph != graph.name or known.path != path:
                raise CorruptRecordError(
                    f"scope {scope_id} holds graph {known.graph!r} at path {known.path!r}, but "
                    f"the Sub node's attempt now runs graph {graph.name!r} at path {path!r} "
                    "",
                    rule="R-SCOPE-2",
                )
            # An adopted try: its groups go on from their saved tails, not from the start.
            for stream in streams:
                stream.resume_groups(prefix)
            return Scope(id=scope_id, graph=graph, path=path, parent=parent)
        fingerprint = sub_scope_fingerprint(parent.node)
        graph_name = graph.name
        root = self._take_unsaved(parent)
        # The engine opened the child's readers of these streams anew (Stream.reopen): their
        # entries start again with every kept element, in the save that adds the scope, so a
        # scope in the record means its groups are its own (S-2).
        reopened = [
            (stream.data, groups) for stream in streams if (groups := stream.reopenable(prefix))
        ]

        def add_scope(proposal: L.Proposal) -> None:
            root(proposal)
            L.open_scope(
                proposal, scope_id, graph=graph_name, path=path, inputs=fingerprint, bindings=True
            )
            for source, groups in reopened:
                reopen_groups(proposal, source, groups)

        if not reopened:
            self._ledger.defer(add_scope)
        else:  # after the appends queued before the groups were opened again
            await self._ledger.commit_async(add_scope)
        return Scope(id=scope_id, graph=graph, path=path, parent=parent)

    def restore_node(self, scope: Scope, node: Any) -> Attempt | None:
        return self.restore_nodes(scope, (node,))[0]

    def restore_nodes(self, scope: Scope, nodes: Sequence[Any]) -> list[Attempt | None]:
        restored, scope_id = self._restored, scope.id
        answers: list[Attempt | None] = []
        append, count = answers.append, 0
        records: Mapping[str, NodeRecord] | None = None
        for node in nodes:
            outputs = restored.get((scope_id, node.id))
            if outputs is None:
                append(None)
                continue
            if records is None:
                records = self._known_scopes[scope_id].nodes
            attempt_id = records[node.id].attempt
            if not outputs.checked:  # checked: decoded values only, no stream descriptor
                outputs = self._restore_streams(node, outputs)
            append(_restored_attempt(attempt_id, scope, node, outputs))
            count += 1
            if self._listening:  # the fields _event would fill in, for a restored root attempt
                self._emit(
                    RecoveryEvent(
                        EventKind.NODE_RESTORED,
                        self._run_id,
                        scope.path,
                        node.id,
                        1,
                        1,
                        self._ledger.revision,
                        attempt_id=attempt_id,
                        scope_id=scope_id,
                    )
                )
        self.restored_count += count
        return answers

    async def begin_node(self, scope: Scope, node: Any) -> Attempt:
        restored = self.restore_node(scope, node) if self._restored else None
        if restored is not None:
            return restored
        for attempt_id, stored in self._history.get((scope.id, node.id, ""), ()):
            if stored.state is AttemptState.ACTIVE:
                attempt = Attempt(
                    id=attempt_id,
                    scope=scope,
                    node=node,
                    streams=self._plan.adopted.get(attempt_id),
                    staged=self._messages.staged(scope.id, node.id, attempt_id),
                )
                self._event(EventKind.ATTEMPT_ADOPTED, attempt)
                return attempt
            where = f"{scope.path}/{node.id}" if scope.path else node.id
            raise NodeFailedError(
                f"node {where!r} of run {self._run_id!r} failed for good in an earlier process "
                f"(its root attempt {attempt_id} is {stored.state.value}); a failed attempt is "
                "never run again and no Retry budget is refilled. Start a new run id "
                "to run the graph again.",
                path=where,
            )
        attempt_id = L.new_id()
        scope_id, node_id = scope.id, node.id

        def begin(proposal: L.Proposal) -> None:
            L.begin_attempt(proposal, attempt_id, parent=scope_id, node_id=node_id, if_new=True)

        # Not saved yet: the root attempt is written with the first change that needs it.
        self._unsaved[attempt_id] = begin
        attempt = _new_attempt(attempt_id, scope, node)
        if self._listening:  # (each node's own events: no call when nobody listens)
            self._event(EventKind.ATTEMPT_STARTED, attempt)
        return attempt

    async def begin_try(self, parent: Attempt, boundary: str, index: int, limit: int) -> Attempt:
        history = self._history.pop((parent.id, parent.node_id, boundary), None)
        tries = self._tries[parent.root.id]
        if history:
            last_id, last = history[-1]
            limit = last.limit
            if last.state is AttemptState.ACTIVE:
                attempt = Attempt(
                    id=last_id,
                    scope=parent.scope,
                    node=parent.node,
                    parent=parent,
                    boundary=boundary,
                    index=last.index,
                    limit=limit,
                )
                tries.append(last_id)
                self._event(EventKind.ATTEMPT_ADOPTED, attempt)
                return attempt
            index = max(index, last.index + 1)
            if index > limit:  # every try was spent before this process: the engine fails it
                return Attempt(
                    id="",
                    scope=parent.scope,
                    node=parent.node,
                    parent=parent,
                    boundary=boundary,
                    index=index,
                    limit=limit,
                )
        attempt_id = L.new_id()
        parent_id, node_id = parent.id, parent.node_id

        root = self._take_unsaved(parent)

        def begin(proposal: L.Proposal) -> None:
            root(proposal)
            L.begin_attempt(
                proposal,
                attempt_id,
                parent=parent_id,
                node_id=node_id,
                boundary=boundary,
                index=index,
                limit=limit,
            )

        saved = await self._ledger.commit_async(begin)
        tries.append(attempt_id)
        attempt = Attempt(
            id=attempt_id,
            scope=parent.scope,
            node=parent.node,
            parent=parent,
            boundary=boundary,
            index=index,
            limit=limit,
        )
        self._event(EventKind.ATTEMPT_STARTED, attempt, revision=saved.revision)
        return attempt

    async def fail_attempt(self, attempt: Attempt, error: BaseException) -> None:
        if not attempt.id:
            return
        if attempt.id not in self._unsaved:
            stored = self._ledger.record.attempts.get(attempt.id)
            if stored is None or stored.state is not AttemptState.ACTIVE:
                return
        attempt_id = attempt.id
        is_root = attempt.parent is None
        scope_id, node_id = attempt.scope.id, attempt.node_id
        root = self._take_unsaved(attempt)
        released = self._released(attempt) if is_root else ()

        def fail(proposal: L.Proposal) -> None:
            root(proposal)
            L.fail_attempt(proposal, attempt_id)
            if is_root:  # the root's failure and its streams' failure: one save (S-5)
                fail_sources(proposal, scope_id, node_id)
            for source in released:
                release(proposal, source)

        saved = await self._ledger.commit_async(fail)
        self._event(EventKind.ATTEMPT_FAILED, attempt, describe_error(error), saved.revision, error)

    async def commit_node(self, attempt: Attempt, outputs: NodeOutputs) -> None:
        try:
            values = [
                self._book.output_record(key, outputs.ready[key.name])
                if key.stream and isinstance(outputs.ready.get(key.name), Stream)
                else encode_value_record(
                    self._codecs,
                    key,
                    key.name in outputs.ready,
                    outputs.ready.get(key.name),
                )
                for key in attempt.node.provides
            ]
        except CodecError as exc:
            raise CodecError(
                f"node {attempt.path!r}: {exc}. Nothing of that node was saved and the run "
                "stays resumable: change what the node sets (or register a codec that can "
                "store it), then resume the run"
            ) from exc
        node = attempt.node
        roles = self._roles.get(node)
        if roles is None:
            roles = self._roles[node] = (
                any(map(_IS_STREAM, node.provides)),
                node.child is None and any(map(_IS_STREAM, node.requires)),
                isinstance(node.body, Processor),  # node.processor is not None
            )
        produces, reads, processor = roles
        group = attempt.path if reads else ""
        scopes = _scope_chain(attempt.scope) if reads else frozenset()
        released = self._released(attempt) if self._sub_inputs else ()
        given = outputs.reason
        reason = (_REASONS.get(given) if isinstance(given, str) else None) or NodeReason(given)
        scope_id, node_id, attempt_id = attempt.scope.id, node.id, attempt.id
        tries = self._successful_tries(attempt_id) if attempt_id in self._tries else ()
        root = self._take_unsaved(attempt)

        def confirm(proposal: L.Proposal) -> None:
            root(proposal)
            if processor:  # its final transaction, in the save that confirms it (S-8)
                self._messages.confirm(proposal, attempt_id)
            L.confirm_node(
                proposal,
                scope_id,
                node_id=node_id,
                attempt_id=attempt_id,
                reason=reason,
                outputs=values,
                tries=tries,
            )
            if produces:
                complete_source(proposal, scope_id, node_id)
            if reads:  # its own groups only: never those of another (a failed) try (S-2)
                finish_group(proposal, group, scopes)
            for source in released:
                release(proposal, source)

        if shared_as_is(outputs.ready, values):
            self._as_is.add(attempt_id)
        try:
            saved = await self._ledger.commit_async(confirm)
        except BaseException as exc:
            self._as_is.discard(attempt_id)
            self._messages.confirmed(attempt_id, exc)
            raise
        self._messages.confirmed(attempt_id)
        if self._listening:
            self._event(EventKind.NODE_CONFIRMED, attempt, revision=saved.revision)

    def node_running(self, attempt: Attempt) -> None:
        # No save: the history learns when the body started (its wait for inputs ended).
        if self._listening:
            self._event(EventKind.NODE_RUNNING, attempt)

    def watch_bodies(self, running: Callable[[], int]) -> None:
        # While no body runs, a save on the event loop holds up nobody (see Ledger.save_when);
        # a body awaiting its ack or a stream gives its slot back, so it does not count.
        self._ledger.save_when(lambda: running() <= 0)

    def watch_turns(self, alone: Callable[[], bool]) -> None:
        # A commit that nothing else could join starts its save at once (Ledger.start_when).
        self._ledger.start_when(alone)

    def share(
        self, scope: Scope, attempt: Attempt | None, ready: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        if attempt is not None and attempt.id in self._as_is:
            self._as_is.discard(attempt.id)  # confirmed just now: see commit_node
            return ready
        if attempt is not None and attempt.restored is not None:
            for value in ready.values():
                if type(value) not in ATOMS:
                    break
            else:  # the usual restored node: values decoded from the record that nobody can change
                return ready
        return share_values(self._codecs, self._ledger.record, scope, attempt, ready)

    async def open_stream(self, attempt: Attempt, key: Any, stream: Stream) -> None:
        # The writer entry names the root attempt: a root not saved yet is written with it.
        await self._book.open_stream(attempt, key, stream, before=self._take_unsaved(attempt))
        self._messages.opened(attempt, key, stream)

    # -- processor nodes: durable/messages.py ------------------------------------------------

    async def open_processor(
        self, attempt: Attempt, processor: Processor[Any], input: Stream | None
    ) -> Managed | None:
        # Its root attempt is written with its first save that names it (a message
        # transaction, a failed try, an ack of its input, or its confirmation): no save here.
        return self._messages.open_processor(attempt, processor, input)

    async def begin_message(self, attempt: Attempt, message: MessageAttempt) -> MessageAttempt:
        return self._messages.begin_message(attempt, message)

    async def begin_messages(
        self, attempt: Attempt, key: Any, deliveries: tuple[tuple[int, int], ...], limit: int
    ) -> list[MessageAttempt]:
        return self._messages.begin_messages(attempt, key, deliveries, limit)

    async def fail_message(self, message: MessageAttempt, error: BaseException) -> None:
        await self._messages.fail_message(
            message, error, lambda: self._take_unsaved(message.attempt)
        )
        if self._listening and message.id and message.index <= message.limit:
            details = failure_of(error)
            attempt = message.attempt
            self._emit(
                RecoveryEvent(
                    kind=EventKind.MESSAGE_FAILED,
                    run_id=self._run_id,
                    scope_path=attempt.scope.path,
                    scope_id=attempt.scope.id,
                    node_id=attempt.node_id,
                    attempt_index=message.index,
                    attempt_limit=message.limit,
                    revision=self._ledger.revision,
                    attempt_id=message.id,
                    error=describe_error(error),
                    where=details.where,
                    traceback=details.traceback,
                    sequence=message.sequence,
                )
            )

    async def commit_messages(self, attempt: Attempt, commit: MessageCommit) -> Any:
        return await self._messages.commit_messages(
            attempt, commit, lambda: self._take_unsaved(attempt)
        )

    def queue_element(
        self, attempt: Attempt, key: Any, stream: Stream, sequence: int, element: Any
    ) -> Any:
        # Each instance calls its book's method directly (set in __init__).
        return self._book.queue_element(attempt, key, stream, sequence, element)

    async def send_element(
        self, attempt: Attempt, key: Any, stream: Stream, sequence: int, element: Any
    ) -> Any:
        return self.queue_element(attempt, key, stream, sequence, element)

    def queue_ack(
        self,
        attempt: Attempt,
        key: Any,
        stream: Stream,
        group: str,
        generation: int,
        sequences: tuple[int, ...],
    ) -> Any:
        if not isinstance(stream.data, Source):
            return None  # a stream given as a root input: nothing is saved for it
        # The reader's root attempt, when not saved yet, is written in the ack's save (None
        # when it is saved: the ack may then join the group's queued one).
        before = self._unsaved.pop(attempt.root.id, None)
        return self._book.queue_ack(stream, group, generation, sequences, before)

    async def ack_elements(
        self,
        attempt: Attempt,
        key: Any,
        stream: Stream,
        group: str,
        generation: int,
        sequences: tuple[int, ...],
    ) -> Any:
        return self.queue_ack(attempt, key, stream, group, generation, sequences)

    def _restore_streams(self, node: Any, outputs: NodeOutputs) -> NodeOutputs:
        """Replace the stream descriptors of restored outputs by streams: a completed source
        with each group's unacked tail (its generation raised once, with the next save), or a
        read-only failed endpoint for a Sub alias of a failed source (S-3, S-4)."""
        if outputs.checked or not any(
            isinstance(v, StreamDescriptorRecord) for v in outputs.ready.values()
        ):  # checked: decoded values only, no stream descriptor (decode_confirmed)
            return outputs
        keys = {key.name: key for key in node.provides}
        ready = dict(outputs.ready)
        for name, value in outputs.ready.items():
            if isinstance(value, StreamDescriptorRecord):
                ready[name] = self._restored_stream(keys[name], value)
        return NodeOutputs(reason=outputs.reason, ready=ready, skipped=outputs.skipped)

    def _restored_stream(self, key: Any, d: StreamDescriptorRecord) -> Stream:
        where = (d.scope, d.node_id, d.key)
        stream = self._restored_streams.get(where)
        if stream is not None:
            return stream
        source = Source(d.scope, d.node_id, d.key, d.attempt)
        if where in self._plan.failed:
            stream = Stream.replay(
                key,
                (),
                failed=StreamFailedError(f"{source.label} failed; it has no elements to read"),
            )
        else:
            stream = Stream.restore(key, self._plan.completed[where])
            stream.data = source
            if self._book.remember(source):

                def again(proposal: L.Proposal) -> None:
                    raise_generation(proposal, source)

                self._ledger.defer(again)
        self._restored_streams[where] = stream
        return stream

    def _released(self, attempt: Attempt) -> tuple[Source, ...]:
        """The sources that stop keeping elements when the Sub node of root ``attempt`` ends:
        it anchored their last groups that a Retry could open again."""
        streams = self._sub_inputs.pop(attempt.id, None)
        if not streams:
            return ()
        return tuple(stream.data for stream in streams if stream.releases(attempt.path))

    def _successful_tries(self, root_id: str) -> tuple[str, ...]:
        """The tries of ``root_id``'s node whose whole chain up to the root is still active:
        the tries that led to its success (failed tries and everything under them are out)."""
        attempts = self._ledger.record.attempts
        chain: list[str] = []
        for try_id in self._tries.pop(root_id, ()):
            current = try_id
            while current != root_id:
                stored = attempts.get(current)
                if stored is None or stored.state is not AttemptState.ACTIVE:
                    break
                current = stored.parent
            else:
                chain.append(try_id)
        return tuple(chain)
