"""Durable message transactions: the ``Messages`` and ``Managed`` entries of processor nodes
(SPEC S-7…S-10).

A processor node (:meth:`~durable_core.graph.Graph.processor`) commits each message, or batch of
messages, in **one save** (S-8):

- each message's successful try as a confirmed ``MessageAttemptRecord`` (input entry, group,
  sequence, the node's root attempt as parent, Index/Limit);
- the input's acknowledgement (the reading group's ``Pending`` and ``AckedThrough``);
- the node's ``ManagedRecord`` (owned by scope, root attempt and node): the new state as an
  explicit complete snapshot, encoded by the run's codecs, and every ordinary value set so far;
- the elements the messages sent, appended to the output streams' entries.

A failed try is saved failed at once, so a restart refills no per-message budget (S-7); a try
that is still running is kept in memory only (after a crash it is begun again with the same
index, as an active attempt is adopted). The final transaction (the last batch and ``finish``)
is saved with the node's confirmation, in the same save (:meth:`MessageBook.confirm`): reading
ends exactly when the node is confirmed, so a restart never reads past an ``rc.stop()``.

**A bounded record.** A message's attempts are folded away once it is confirmed and acknowledged
(in the same save): the record keeps the container, the attempts of the last message committed
(what S-9 needs: every container has a confirmed message of its ownership), and the failed
attempts of messages not acknowledged yet. When the node is confirmed, its container and message
attempts are folded away with the confirmation (its outputs are in its ``NodeRecord``). Record
size grows with unacknowledged messages and containers, not with messages processed.
"""

from __future__ import annotations

import asyncio
import random
import secrets
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from durable_core.codecs import Codecs
from durable_core.durable import ledger as L
from durable_core.durable.activity import RunActivity
from durable_core.durable.messages_recovery import Adopted
from durable_core.durable.streams import Source, ack, append_many, encode_cursor
from durable_core.errors import CodecError, DurableError
from durable_core.graph.checkpoint import Attempt
from durable_core.graph.processor import Managed, MessageAttempt, MessageCommit, Processor
from durable_core.graph.streams import Stream
from durable_core.records import (
    AttemptState,
    ManagedRecord,
    MessageAttemptRecord,
    ValueRecord,
    ValueState,
)

__all__ = ["MessageBook", "container_id"]


def container_id(node_id: str, attempt_id: str) -> str:
    """The key of a processor's ``ManagedRecord`` in ``RunRecord.managed``."""
    return f"{node_id}/{attempt_id}"


class MessageBook:
    """The processor calls of the durable checkpointer, for one run in one process.

    Args:
        ledger: the run's commit path.
        codecs: encodes states, values and sent elements.
        adopted: what resume adopts, by ``(scope id, node id)``
            (:func:`~durable_core.durable.messages_recovery.adopt_managed`).
        encode_element: ``(key, element, label) -> (data, digest)`` of the stream book (the
            element type's codec).
    """

    def __init__(
        self,
        ledger: L.Ledger,
        codecs: Codecs,
        adopted: Mapping[tuple[str, str], Adopted],
        encode_element: Any,
        activity: RunActivity | None = None,
    ) -> None:
        self._ledger = ledger
        self._codecs = codecs
        self._activity = activity if activity is not None else RunActivity()
        self._adopted = dict(adopted)
        self._encode_element = encode_element
        # Message attempts the record held when this process started, by
        # (entry id, sequence, parent attempt id): [(id, record)] in index order.
        history: dict[tuple[str, int, str], list[tuple[str, MessageAttemptRecord]]]
        history = defaultdict(list)
        # Ids of the message attempts of the last commit of each processing attempt (folded
        # away by the next commit).
        self._kept: dict[str, list[str]] = defaultdict(list)
        for mid, m in ledger.record.messages.items():
            history[(m.stream, m.sequence, m.parent)].append((mid, m))
        for tries in history.values():
            tries.sort(key=lambda item: item[1].index)
            if any(m.state is AttemptState.CONFIRMED for _, m in tries):
                self._kept[tries[0][1].parent].extend(mid for mid, _ in tries)
        self._history = dict(history)
        # Failed tries saved in this process, by (entry id, sequence, parent): their ids.
        self._failed: dict[tuple[str, int, str], list[str]] = defaultdict(list)
        # The input entry of each processing attempt, and its output streams by key name.
        self._inputs: dict[str, str] = {}
        self._outputs: dict[str, dict[str, Stream[Any]]] = defaultdict(dict)
        # Message attempt ids: 16 bytes in hex from a generator seeded by the OS once (one id
        # per message: the OS's generator per id would cost more than the message); a batch of
        # first tries shares one draw (see ``begin_messages``).
        self._random = random.Random(secrets.randbits(128))
        # The last non-final transaction of each processing attempt, by root attempt id: its
        # save's future (the next one is saved after it).
        self._last: dict[str, asyncio.Future[Any]] = {}
        # Final transactions waiting for their node's confirmation, by root attempt id.
        self._final: dict[str, tuple[L.Mutation, asyncio.Future[None]]] = {}

    # -- adoption --------------------------------------------------------------------------

    def staged(self, scope_id: str, node_id: str, attempt_id: str) -> Any:
        """The values a processor's adopted root attempt has set already (S-10), or None."""
        adopted = self._adopted.get((scope_id, node_id))
        if adopted is None or adopted.attempt != attempt_id:
            return None
        return adopted.staged

    def open_processor(
        self, attempt: Attempt, processor: Processor[Any], input: Stream[Any] | None
    ) -> Managed | None:
        """The committed state to continue from (S-7); None to start from ``initial``."""
        if input is not None:
            self._inputs[attempt.id] = _entry_id(input, attempt)
        adopted = self._adopted.pop((attempt.scope.id, attempt.node_id), None)
        if adopted is None or adopted.attempt != attempt.id:
            return None
        return Managed(adopted.state)

    # -- tries -----------------------------------------------------------------------------

    def begin_message(self, attempt: Attempt, message: MessageAttempt) -> MessageAttempt:
        """Answer ``begin_message``: adopt an active try, count failed ones as spent."""
        entry = self._inputs[attempt.id]
        key = (entry, message.sequence, attempt.id)
        history = self._history.pop(key, None)
        failed = self._failed.get(key, ())
        index, limit = message.index, message.limit
        if history:
            last_id, last = history[-1]
            limit = last.limit
            if last.state is AttemptState.ACTIVE:
                self._failed[key].extend(mid for mid, _ in history[:-1])
                return _evolve(message, last_id, last.index, limit, entry)
            if last.state is AttemptState.CONFIRMED:
                raise DurableError(
                    f"message {message.sequence} of {message.key.name!r} is confirmed already "
                    "but was delivered again; the record and the stream disagree"
                )
            index = max(index, last.index + 1)
            self._failed[key].extend(mid for mid, _ in history)
        elif failed:
            index = max(index, len(failed) + 1)
        return _evolve(message, f"{self._random.getrandbits(128):032x}", index, limit, entry)

    def begin_messages(
        self, attempt: Attempt, key: Any, deliveries: tuple[tuple[int, int], ...], limit: int
    ) -> list[MessageAttempt]:
        """Answer ``begin_messages``: :meth:`begin_message` for each first try, made at once
        when this process has no history of the messages (no try saved before it started,
        none failed in it)."""
        if self._history or self._failed:
            return [
                self.begin_message(
                    attempt,
                    MessageAttempt.first(attempt, key, sequence, generation, limit),
                )
                for sequence, generation in deliveries
            ]
        # One random draw per call: the ids are its 24 hex digits, then each message's place
        # in the call in 8 (32 in all, as ``begin_message``'s): unique in the record as long
        # as no two calls draw the same 96 bits.
        prefix = f"{self._random.getrandbits(96):024x}"
        count = len(deliveries)
        if count <= len(_PLACES):
            ids = [prefix + place for place in _PLACES[:count]]
        else:
            ids = [f"{prefix}{place:08x}" for place in range(count)]
        return MessageAttempt.first_tries(
            ids, attempt, key, deliveries, limit, self._inputs[attempt.id]
        )

    async def fail_message(
        self,
        message: MessageAttempt,
        error: BaseException,
        root: Callable[[], L.Mutation] | None = None,
    ) -> None:
        """Save the try failed (its budget stays spent after a restart).

        Args:
            message: the failed try.
            error: what it raised.
            root: called once, when a save is made: the mutation writing the processor's root
                attempt if it is not saved yet (applied first in the same save).
        """
        if not message.id or message.index > message.limit:
            return
        record = _message_record(message, AttemptState.FAILED)
        mid = message.id
        before = root() if root is not None else None

        def fail(proposal: L.Proposal) -> None:
            if before is not None:
                before(proposal)
            proposal.record.messages[mid] = record

        await self._ledger.commit_async(fail)
        self._failed[(message.data, message.sequence, message.attempt.id)].append(mid)

    # -- commits ---------------------------------------------------------------------------

    def opened(self, attempt: Attempt, key: Any, stream: Stream[Any]) -> None:
        """A node opened the output stream ``key`` (a processor's sends go there)."""
        if attempt.node.processor is not None:
            self._outputs[attempt.id][key.name] = stream

    async def commit_messages(
        self,
        attempt: Attempt,
        commit: MessageCommit,
        root: Callable[[], L.Mutation] | None = None,
    ) -> asyncio.Future[Any]:
        """Queue one message transaction (or batch) for a save of its own (one CAS), without
        waiting for it; hold the final one for the node's confirmation. Either way return the
        future that succeeds once the transaction is saved (it fails with the save's error).

        A transaction queued while the node's one before it is not saved yet is held back
        behind it (and fails with it): it is applied after it, in order, in the same save or a
        later one. The transactions held back behind a save in flight share the next save,
        each one applied only if the one before it was (its own acks, state, values and sends
        whole). The engine lets at most ``UNSAVED_COMMITS`` of them wait while the next
        messages run.

        Args:
            attempt: the processor's root attempt.
            commit: what the engine commits.
            root: as for :meth:`fail_message` (not called for the final transaction: the
                confirmation writes the root attempt).

        Raises:
            CodecError: the state, a value or a sent element cannot be encoded (nothing is
                saved; the run stops). A failed save (or a ledger stopped already) fails the
                returned future with its ``CheckpointError`` instead.
        """
        processor = attempt.node.processor
        assert processor is not None
        mutation = self._mutation(attempt, processor, commit, self._outputs[attempt.id])
        messages = len(commit.messages)
        sends = sum(len(elements) for elements in commit.sends.values())
        if commit.final:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._final[attempt.id] = (mutation, future)

            def counted(done: asyncio.Future[None]) -> None:
                if not done.cancelled() and done.exception() is None:
                    self._activity.messages += messages
                    self._activity.elements += sends

            future.add_done_callback(counted)
            return future
        before = root() if root is not None else None
        if before is not None:
            transaction = mutation

            def mutation(proposal: L.Proposal) -> None:
                before(proposal)  # the root attempt first: the message attempts name it
                transaction(proposal)

        # Held back behind the node's commit before it: applied after it, in order.
        saved = self._ledger.commit_soon(mutation, after=self._last.get(attempt.id))
        self._last[attempt.id] = saved

        def counted_saved(done: asyncio.Future[Any]) -> None:
            if not done.cancelled() and done.exception() is None:
                self._activity.messages += messages
                self._activity.elements += sends

        saved.add_done_callback(counted_saved)
        return saved

    def confirm(self, proposal: L.Proposal, attempt_id: str) -> None:
        """In the save that confirms the node of root attempt ``attempt_id``: apply its final
        transaction, then fold its container and message attempts away."""
        final = self._final.get(attempt_id)
        if final is not None:
            final[0](proposal)
        messages = proposal.record.messages
        for mid in [mid for mid, m in messages.items() if m.parent == attempt_id]:
            del messages[mid]
        for key in [k for k, mg in proposal.record.managed.items() if mg.parent == attempt_id]:
            del proposal.record.managed[key]

    def confirmed(self, attempt_id: str, error: BaseException | None = None) -> None:
        """The node's confirmation was saved (or failed with ``error``): settle the final
        transaction's future."""
        if not (self._outputs or self._inputs or self._kept or self._last or self._final):
            return  # no stream or processor in flight: nothing held for this node
        self._outputs.pop(attempt_id, None)
        self._inputs.pop(attempt_id, None)
        self._kept.pop(attempt_id, None)
        self._last.pop(attempt_id, None)
        final = self._final.pop(attempt_id, None)
        if final is None or final[1].done():
            return
        if error is None:
            final[1].set_result(None)
        else:
            final[1].set_exception(error)

    def _mutation(
        self, attempt: Attempt, processor: Processor[Any], commit: MessageCommit, outputs: Any
    ) -> L.Mutation:
        """Encode everything first (a codec error saves nothing), then build the mutation."""
        codecs = self._codecs
        where = f"processor {attempt.path!r}"
        try:
            state = codecs.encode_value(processor.state, commit.state, name="state")
        except CodecError as exc:
            raise CodecError(f"{where}: its state cannot be stored: {exc}") from exc
        state_record = ValueRecord(
            name=processor.state_key.name,
            type_id=state.codec_id,
            version=state.version,
            state=ValueState.READY,
            digest=state.digest,
            data=state.data,
        )
        keys = {key.name: key for key in attempt.node.provides}
        values: list[ValueRecord] = []
        for name, value in commit.values.ready.items():
            encoded = codecs.encode_value(keys[name].type, value, name=name)
            values.append(
                ValueRecord(
                    name=name,
                    type_id=encoded.codec_id,
                    version=encoded.version,
                    state=ValueState.READY,
                    digest=encoded.digest,
                    data=encoded.data,
                )
            )
        for name in sorted(commit.values.skipped):
            if not keys[name].stream:
                values.append(ValueRecord(name=name, state=ValueState.SKIPPED))
        sends: list[tuple[Source, tuple[tuple[int, bytes, str], ...], bytes | None, tuple]] = []
        for name, numbered in commit.sends.items():
            stream: Stream[Any] = outputs[name]
            source = stream.data
            if not isinstance(source, Source):
                raise DurableError(f"{where}: output stream {name!r} was not opened durably")
            encoded_elements = tuple(
                (sequence, *self._encode_element(keys[name], element, source.label))
                for sequence, element in numbered
            )
            cursor = encode_cursor(stream.position, source.label) if stream.positioned else None
            sends.append((source, encoded_elements, cursor, stream.groups, stream.retaining))
        # Only the last message's record is written (the earlier ones are folded away in the
        # same save): the others need no record made.
        messages = [(m.id, None, m.data, m.sequence, m.generation) for m in commit.messages]
        if messages and not commit.final:
            last_message = commit.messages[-1]
            messages[-1] = (
                last_message.id,
                _message_record(last_message, AttemptState.CONFIRMED),
                *messages[-1][2:],
            )
        scope_id, node_id, attempt_id = attempt.scope.id, attempt.node_id, attempt.id
        container = container_id(node_id, attempt_id)
        kept = self._kept
        failed = self._failed
        managed = ManagedRecord(
            scope=scope_id, parent=attempt_id, node_id=node_id, state=state_record, values=values
        )
        final = commit.final

        def apply(proposal: L.Proposal) -> None:
            record = proposal.record
            if attempt_id not in record.attempts:
                raise DurableError(f"{where}: its root attempt {attempt_id} is not in the record")
            by_entry: dict[tuple[str, int], list[int]] = defaultdict(list)
            new_kept: list[str] = []
            last = len(messages) - 1
            for i, (mid, message, entry, sequence, generation) in enumerate(messages):
                by_entry[(entry, generation)].append(sequence)
                tries = failed.pop((entry, sequence, attempt_id), [])
                if i == last and not final:  # the ownership proof of the container (S-9)
                    record.messages[mid] = message
                    new_kept = [mid, *tries]
                else:  # confirmed and acknowledged in this very save: folded away at once
                    for try_id in tries:
                        record.messages.pop(try_id, None)
            for (entry, generation), sequences in by_entry.items():
                stored = record.streams[entry]
                source = Source(stored.scope, stored.node_id, stored.key)
                ack(proposal, source, stored.group, generation, tuple(sequences))
            for source, elements, cursor, groups, retain in sends:
                final_index = len(elements) - 1
                append_many(
                    proposal,
                    source,
                    [
                        (
                            sequence,
                            data,
                            digest,
                            None if i < final_index else cursor,
                            True,
                            groups,
                            retain,
                        )
                        for i, (sequence, data, digest) in enumerate(elements)
                    ],
                )
            if final:
                return  # the container and the attempts are folded away with the node
            record.managed[container] = managed
            if new_kept:  # fold the previous proof away (its message is acknowledged)
                for mid in kept.get(attempt_id, ()):
                    record.messages.pop(mid, None)
                kept[attempt_id] = new_kept

        return apply


def _entry_id(stream: Any, attempt: Attempt) -> str:
    source = getattr(stream, "data", None)
    if not isinstance(source, Source):
        raise DurableError(
            f"processor {attempt.path!r}: its input stream has no durable source (a stream "
            "given as an input cannot be processed durably)"
        )
    return source.entry_id(attempt.path)


_PLACES = tuple(f"{place:08x}" for place in range(1024))
"""The 8-digit ends of the ids one ``begin_messages`` call gives (see there)."""


def _evolve(message: MessageAttempt, mid: str, index: int, limit: int, entry: str) -> Any:
    return MessageAttempt(
        id=mid,
        attempt=message.attempt,
        key=message.key,
        sequence=message.sequence,
        generation=message.generation,
        index=index,
        limit=limit,
        data=entry,
    )


def _message_record(message: MessageAttempt, state: AttemptState) -> MessageAttemptRecord:
    return MessageAttemptRecord(
        stream=message.data,
        group=message.attempt.path,
        sequence=message.sequence,
        parent=message.attempt.id,
        node_id=message.attempt.node_id,
        index=message.index,
        limit=message.limit,
        state=state,
    )
