"""Durable stream bookkeeping: the ``Streams`` entries of the run record (SPEC S-1…S-5).

A logical **source** is one stream key provided by one node in one scope; it is written by that
node's root attempt. The record keeps one :class:`~durable_core.records.StreamRecord` per
(source, reading group):

- the **writer entry** (group ``""``) holds what belongs to the source: ``LastSequence``,
  ``Cursor`` (the producer's last ``send_at`` position, JSON), ``Resumable`` and the terminal
  state; its ``AckedThrough`` equals ``LastSequence`` and it has no ``Pending``;
- **kept entries** (groups ``"/kept/1"``, ``"/kept/2"``, …; no node path starts with ``/``)
  hold the elements kept for reading groups that do not exist yet: a new try of a Sub node with
  a Retry (around a reader of the stream, between the source's scope and the reader) opens new
  groups, which read the stream from its first element. While such a Sub node can still start
  a try, every element sent is kept, :data:`KEPT_SIZE` to an entry (``/kept/k`` holds
  sequences ``(k-1)·KEPT_SIZE+1`` … ``k·KEPT_SIZE`` in ``Pending``, ``AckedThrough``
  ``(k-1)·KEPT_SIZE``), so that a save rewrites at most one entry of them; the save that ends
  the last such Sub node deletes them. A stream no such Sub node reads has none;
- one **reader entry** per reading group (the reading node's path, ``"load"``,
  ``"report/load"``) holds that group's ack front: ``Pending`` (the unacked elements, encoded,
  in sequence order) and ``AckedThrough`` (never past a gap). It is created with the first
  element the group receives, or, for a group that a new Sub try opens, in the save that adds
  the try's scope: the group then starts with every kept element
  (:func:`reopen_groups`). An entry under a Sub therefore always belongs to the Sub's latest
  scope in the record.

Every entry of a source shares its ``Generation``; it is raised once in each process that opens
(or restores) the source again, so a delivery of an older process cannot ack.

The functions below are record mutations (a :class:`~durable_core.durable.ledger.Proposal` in,
checks first, then changes), so a caller can combine them with any other change in one save —
a message-transaction processor confirms an ack, its state, its values and the elements it sent
in one CAS by applying :func:`ack`, :func:`append` and its own mutations to one proposal.
:class:`StreamBook` is the checkpointer's side: it turns the engine's stream calls into these
mutations. Recovery (what ``resume`` checks and rebuilds) is
:mod:`durable_core.durable.streamrecovery`.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import hashlib
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from durable_core._digest import SHORT_INPUT, sha256_hex, short_sha256
from durable_core.codecs import Codecs
from durable_core.codecs.scalars import _IntCodec
from durable_core.durable.activity import RunActivity
from durable_core.errors import (
    CodecError,
    DurableError,
    StaleDeliveryError,
    StreamFailedError,
)
from durable_core.graph.checkpoint import AckFuture
from durable_core.records import (
    PendingMessageRecord,
    RunRecord,
    StreamDescriptorRecord,
    StreamRecord,
    StreamTerminal,
    ValueRecord,
    ValueState,
)

if TYPE_CHECKING:
    from durable_core.durable.ledger import Ledger, Proposal
    from durable_core.graph.checkpoint import Attempt
    from durable_core.graph.keys import Key
    from durable_core.graph.streams import Stream

__all__ = [
    "KEPT_PREFIX",
    "KEPT_SIZE",
    "WRITER_GROUP",
    "Source",
    "StreamBook",
    "ack",
    "append",
    "append_many",
    "complete_source",
    "decode_cursor",
    "encode_cursor",
    "entries_of",
    "fail_sources",
    "finish_group",
    "kept_group",
    "kept_history",
    "open_source",
    "raise_generation",
    "release",
    "reopen_groups",
]

WRITER_GROUP = ""
"""The group name of a source's writer entry (no node path is empty)."""

KEPT_PREFIX = "/kept/"
"""The group names of a source's kept entries start with it (no node path starts with ``/``)."""

KEPT_SIZE = 256
"""How many kept elements one kept entry holds."""

_log = logging.getLogger("durable_core.durable")


def kept_group(index: int) -> str:
    """The group name of kept entry ``index`` (1, 2, …)."""
    return f"{KEPT_PREFIX}{index}"


def kept_history(record: RunRecord, source: Source) -> list[PendingMessageRecord] | None:
    """Every element ``source`` keeps for groups a Retry may open again, in sequence order, when
    its kept entries hold every element sent (1 … ``LastSequence``); None when they do not (it
    keeps nothing, or a record written before elements were kept)."""
    writer = record.streams.get(source.entry_id(WRITER_GROUP))
    if writer is None:
        return None
    kept: list[PendingMessageRecord] = []
    index = 1
    while len(kept) < writer.last_sequence:
        entry = record.streams.get(source.entry_id(kept_group(index)))
        if entry is None:
            return None
        kept.extend(entry.pending)
        index += 1
    if [m.sequence for m in kept] != list(range(1, writer.last_sequence + 1)):
        return None
    return kept


@functools.lru_cache(maxsize=4096)
def _hex_id(*parts: str) -> str:
    text = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@attrs.frozen(cache_hash=True)  # a key of the per-element look-ups: hashed once
class Source:
    """A logical stream source: key ``key`` of node ``node_id`` in scope ``scope``.

    Attributes:
        scope: the producing node's scope id.
        node_id: the producing node.
        key: the stream key's name.
        attempt: the writer's root attempt id.
    """

    scope: str
    node_id: str
    key: str
    attempt: str = attrs.field(default="", eq=False)

    @property
    def source_id(self) -> str:
        """The stable identity of the source (a hash of scope, node and key)."""
        return _hex_id(self.scope, self.node_id, self.key)

    def entry_id(self, group: str) -> str:
        """The key in ``RunRecord.streams`` of this source's entry for ``group``."""
        return _hex_id(self.scope, self.node_id, self.key, group)

    @property
    def label(self) -> str:
        """``stream 'events' of node 'tail'`` (for messages)."""
        return _label(self.key, self.node_id)


@functools.lru_cache(maxsize=4096)
def _label(key: str, node_id: str) -> str:
    return f"stream {key!r} of node {node_id!r}"  # asked for per element: made once


def encode_cursor(position: Any, label: str) -> bytes:
    """The bytes saved as ``Cursor`` for a ``send_at`` position (canonical JSON).

    Raises:
        CodecError: the position is not a JSON value.
    """
    if type(position) is int:  # what json.dumps writes for an int, without its machinery
        return b"%d" % position
    try:
        text = json.dumps(position, separators=(",", ":"), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise CodecError(
            f"{label}: the position {position!r} given to send_at is not a JSON value ({exc}); "
            "use an int, str, float, bool, None, or lists and dicts of them"
        ) from None
    return text.encode()


_sha256 = hashlib.sha256


_BIG_INT = 10**600
"""An int of fewer digits has its text made at once: ``int()`` converts at least 640 digits
however the interpreter's limit is set (``sys.set_int_max_str_digits``)."""


def _unstorable(exc: Exception, label: str) -> CodecError:
    """The error raised for an element its codec could not encode (``exc``)."""
    if isinstance(exc, CodecError):
        return CodecError(f"{label}: an element cannot be stored: {exc}")
    return CodecError(f"{label}: an element cannot be stored: {type(exc).__name__}: {exc}")


def decode_cursor(cursor: bytes) -> tuple[bool, Any]:
    """``(positioned, position)`` of a saved ``Cursor`` (empty: no position was saved)."""
    if not cursor:
        return False, None
    return True, json.loads(cursor)


def entries_of(
    record: RunRecord, scope: str, node_id: str, key: str | None = None
) -> Iterator[tuple[str, StreamRecord]]:
    """Every ``(entry id, StreamRecord)`` of the sources of ``node_id`` in ``scope`` (of
    stream ``key`` only, when given)."""
    for entry_id, entry in record.streams.items():
        if entry.scope == scope and entry.node_id == node_id and (key is None or entry.key == key):
            yield entry_id, entry


def _check_not_failed(entry: StreamRecord | None, source: Source, what: str) -> None:
    if entry is not None and entry.terminal is StreamTerminal.FAILED:
        raise StreamFailedError(
            f"{source.label} failed; it refuses {what}. Its elements are void: the reading "
            "nodes fail with the producer"
        )


# -- Record mutations -----------------------------------------------------------------------


def open_source(proposal: Proposal, source: Source, *, again: bool) -> int:
    """Open ``source``: add its writer entry, or (``again``: a later process opens it) raise
    the generation of every entry of the source once. Returns the source's generation.

    Raises:
        StreamFailedError: the source failed.
    """
    record = proposal.record
    writer_id = source.entry_id(WRITER_GROUP)
    writer = record.streams.get(writer_id)
    _check_not_failed(writer, source, "open")
    if writer is None:
        proposal.add_stream(
            writer_id,
            StreamRecord(
                scope=source.scope,
                node_id=source.node_id,
                key=source.key,
                group=WRITER_GROUP,
                generation=1,
                source_id=source.source_id,
                resumable=True,
            ),
        )
        return 1
    if again:
        return raise_generation(proposal, source)
    return writer.generation


def raise_generation(proposal: Proposal, source: Source) -> int:
    """Raise the generation of every entry of ``source`` by one; return the new one (S-2)."""
    ids = [eid for eid, _ in entries_of(proposal.record, source.scope, source.node_id, source.key)]
    generation = 0
    for entry_id in ids:
        entry = proposal.stream(entry_id)
        entry.generation += 1
        generation = max(generation, entry.generation)
    return generation


def append(
    proposal: Proposal,
    source: Source,
    *,
    sequence: int,
    data: bytes,
    digest: str,
    cursor: bytes | None,
    resumable: bool,
    groups: tuple[str, ...],
    retain: bool = False,
) -> None:
    """Save element ``sequence`` of ``source`` for each reading group in ``groups``, with the
    producer's new cursor (``None``: unchanged) (S-2, S-3). With ``retain`` (a group that a
    Retry opens again may still need it), its kept entry keeps the element too, as long as
    it kept every earlier one.

    Raises:
        StreamFailedError: the source failed.
        DurableError: the source is not open, or ``sequence`` does not follow its last one.
    """
    append_many(proposal, source, ((sequence, data, digest, cursor, resumable, groups, retain),))


Element = tuple[int, bytes, str, "bytes | None", bool, tuple[str, ...], bool]
"""What :func:`append_many` takes for one element: ``(sequence, data, digest, cursor,
resumable, groups, retain)``, the arguments of :func:`append`."""


def append_many(proposal: Proposal, source: Source, elements: Sequence[Element]) -> None:
    """:func:`append` for each of ``elements`` in order, with the same outcome, but the
    source's entries are looked up once for all of them. Every element is checked before
    anything changes: when one does not follow the one before it, none is saved.

    Raises:
        StreamFailedError: the source failed.
        DurableError: the source is not open, or an element does not follow its last one.
    """
    record = proposal.record
    writer_id = source.entry_id(WRITER_GROUP)
    stored = record.streams.get(writer_id)
    _check_not_failed(stored, source, "elements")
    if stored is None or stored.terminal is not StreamTerminal.OPEN:
        raise DurableError(f"{source.label} is not open; it takes no elements")
    last = stored.last_sequence
    for element in elements:
        if element[0] != last + 1:
            raise DurableError(
                f"{source.label}: element {element[0]} does not follow element {last}"
            )
        last = element[0]
    writer = proposal.stream(writer_id)
    entries: dict[str, StreamRecord | None] = {}
    for sequence, data, digest, cursor, resumable, groups, retain in elements:
        message = PendingMessageRecord(sequence, data, digest)
        if retain:
            _keep(proposal, source, writer, message)
        writer.last_sequence = writer.acked_through = sequence
        if cursor is not None:
            writer.cursor = cursor
        writer.resumable = resumable
        for group in groups:
            entry = entries.get(group, _UNSEEN)
            if entry is _UNSEEN:
                entry = entries[group] = _reading_entry(proposal, source, writer, group, sequence)
            if entry is None:
                continue
            entry.pending.append(message)
            entry.last_sequence = sequence
            entry.cursor = writer.cursor
            entry.resumable = resumable


_UNSEEN: Any = object()


def _reading_entry(
    proposal: Proposal, source: Source, writer: StreamRecord, group: str, sequence: int
) -> StreamRecord | None:
    """The proposal's own entry of ``group``, which receives element ``sequence`` (added, with
    the elements before it acknowledged, when the group has none yet); None when the entry
    has ended (it receives nothing)."""
    entry_id = source.entry_id(group)
    if entry_id not in proposal.record.streams:
        proposal.add_stream(
            entry_id,
            _group_entry(
                source, writer, group, last_sequence=sequence - 1, acked_through=sequence - 1
            ),
        )
    entry = proposal.stream(entry_id)
    return entry if entry.terminal is StreamTerminal.OPEN else None


def _keep(
    proposal: Proposal, source: Source, writer: StreamRecord, message: PendingMessageRecord
) -> None:
    """Keep ``message`` in its kept entry, when every earlier element is kept."""
    record = proposal.record
    sequence = message.sequence
    previous = sequence - 1
    if previous:
        last = record.streams.get(source.entry_id(kept_group((previous - 1) // KEPT_SIZE + 1)))
        if last is None or last.last_sequence != previous:
            return  # an element before it is not kept: nothing is kept any more
    index = previous // KEPT_SIZE + 1
    entry_id = source.entry_id(kept_group(index))
    if entry_id in record.streams:
        entry = proposal.stream(entry_id)
        entry.pending.append(message)
        entry.last_sequence = sequence
        return
    proposal.add_stream(
        entry_id,
        _group_entry(
            source,
            writer,
            kept_group(index),
            last_sequence=sequence,
            acked_through=previous,
            pending=[message],
        ),
    )


def ack(
    proposal: Proposal, source: Source, group: str, generation: int, sequences: tuple[int, ...]
) -> None:
    """Acknowledge ``sequences`` for ``group``: they leave ``Pending``; ``AckedThrough`` moves
    up to the first element still pending, never past a gap (S-2). Acking an element that is
    acked already changes nothing.

    Raises:
        StaleDeliveryError: ``generation`` is not the group's current generation.
        StreamFailedError: the source failed.
        DurableError: the group has no entry, or a sequence was never sent.
    """
    record = proposal.record
    entry_id = source.entry_id(group)
    stored = record.streams.get(entry_id)
    _check_not_failed(record.streams.get(source.entry_id(WRITER_GROUP)), source, "acks")
    _check_not_failed(stored, source, "acks")
    if stored is None:
        raise DurableError(f"{source.label} has no reading group {group!r}; nothing to ack")
    if generation != stored.generation:
        older = "an older" if generation < stored.generation else "a future"
        raise StaleDeliveryError(
            f"{source.label}, group {group!r}: a delivery of {older} generation ({generation}) "
            f"cannot ack generation {stored.generation}; the element is delivered again with "
            "the current generation, ack that delivery"
        )
    ordered = sorted(set(sequences))
    if ordered and (ordered[0] < 1 or ordered[-1] > stored.last_sequence):
        sequence = ordered[0] if ordered[0] < 1 else ordered[-1]
        raise DurableError(
            f"{source.label}, group {group!r}: element {sequence} was never sent "
            f"(last sequence {stored.last_sequence})"
        )
    entry = proposal.stream(entry_id)
    pending = entry.pending
    count = len(ordered)
    if (
        count
        and len(pending) >= count
        and pending[0].sequence == ordered[0]
        and pending[count - 1].sequence == ordered[-1]
        and ordered[-1] - ordered[0] == count - 1
    ):
        # The usual case, acks in order: a run of sequences without a gap that starts the
        # pending list. Pending sequences rise strictly, so its first ``count`` elements are
        # exactly these: cut them off at once.
        del pending[:count]
    else:
        for sequence in ordered:
            index = bisect.bisect_left(pending, sequence, key=_sequence_of)
            if index < len(pending) and pending[index].sequence == sequence:
                del pending[index]
    entry.acked_through = pending[0].sequence - 1 if pending else entry.last_sequence


def _sequence_of(message: PendingMessageRecord) -> int:
    return message.sequence


def finish_group(proposal: Proposal, group: str, scopes: frozenset[str] | None = None) -> None:
    """The reading node ``group`` is confirmed: its read obligation ends, so every element it
    received — and every one it will never read — is acknowledged (``Pending`` empties).

    Args:
        proposal: the proposal.
        group: the reading group (the node's path).
        scopes: the reader's own scope and the scopes above it: only the entries of sources
            there are its own. An entry of the same group for a source in another scope (the
            scope of a failed Sub try) is void history and stays as it is. None: every scope.
    """
    for entry_id, entry in list(proposal.record.streams.items()):
        if entry.group != group or entry.terminal is StreamTerminal.FAILED:
            continue
        if scopes is not None and entry.scope not in scopes:
            continue
        if entry.pending or entry.acked_through != entry.last_sequence:
            own = proposal.stream(entry_id)
            own.pending.clear()
            own.acked_through = own.last_sequence


def reopen_groups(proposal: Proposal, source: Source, groups: tuple[str, ...]) -> None:
    """A new try of a Sub node opens ``groups`` of ``source`` (a stream of a scope above it)
    as new groups: each entry starts with every kept element, nothing acked, so
    that the try reads the stream from its first element (S-2). Save it with the try's new
    scope. A failed source is left alone (its readers fail)."""
    record = proposal.record
    writer = record.streams.get(source.entry_id(WRITER_GROUP))
    if writer is None or writer.terminal is StreamTerminal.FAILED:
        return
    kept = kept_history(record, source)
    for group in groups:
        entry_id = source.entry_id(group)
        stored = record.streams.get(entry_id)
        if stored is None:
            proposal.add_stream(
                entry_id, _group_entry(source, writer, group, terminal=writer.terminal)
            )
        elif stored.terminal is StreamTerminal.FAILED:
            continue
        entry = proposal.stream(entry_id)
        # A record that keeps nothing for new groups: the group starts with the next element.
        entry.pending = list(kept) if kept is not None else []
        entry.acked_through = 0 if kept is not None else writer.last_sequence
        entry.last_sequence = writer.last_sequence
        entry.cursor = writer.cursor
        entry.resumable = writer.resumable


def release(proposal: Proposal, source: Source) -> None:
    """No group that a Retry may open again is left for ``source``: its kept entries go (and,
    with them, every element kept for such groups)."""
    streams = proposal.record.streams
    index = 1
    while (entry_id := source.entry_id(kept_group(index))) in streams:
        del streams[entry_id]
        index += 1


def complete_source(proposal: Proposal, scope: str, node_id: str) -> None:
    """The writer ``node_id`` in ``scope`` is confirmed: every entry of its sources gets the
    completed terminal state (in the same save as the NodeRecord, S-1)."""
    for entry_id, entry in list(entries_of(proposal.record, scope, node_id)):
        if entry.terminal is StreamTerminal.OPEN:
            proposal.stream(entry_id).terminal = StreamTerminal.COMPLETED


def fail_sources(proposal: Proposal, scope: str, node_id: str) -> None:
    """The writer ``node_id`` in ``scope`` really failed: every entry of every source its root
    attempt opened gets the failed terminal state, in the save that fails the root attempt
    (S-5). Entries already failed are left alone (strictly idempotent)."""
    for entry_id, entry in list(entries_of(proposal.record, scope, node_id)):
        if entry.terminal is StreamTerminal.OPEN:
            proposal.stream(entry_id).terminal = StreamTerminal.FAILED


# -- The checkpointer's side ----------------------------------------------------------------


class StreamBook:
    """The stream calls of the durable checkpointer (the engine's seam, see
    :mod:`durable_core.graph.checkpoint`), for one run in one process.

    Args:
        ledger: the run's commit path.
        codecs: encodes elements (the codec of the stream key's element type).
    """

    def __init__(self, ledger: Ledger, codecs: Codecs, activity: RunActivity | None = None) -> None:
        self._ledger = ledger
        self._codecs = codecs
        self._activity = activity if activity is not None else RunActivity()
        self._codec_of: dict[Any, Any] = {}
        self._opened: set[Source] = set()
        """Sources opened or restored in this process (their generation is raised once)."""
        self._sends: dict[Source, tuple[list[tuple[Any, ...]], asyncio.Future[Any]]] = {}
        """Per source, its last queued elements and the future of their save."""
        self._acks: dict[tuple[Source, str, int], _QueuedAck] = {}
        """Per source, group and generation, its last queued ack."""

    def codec(self, key: Key[Any]) -> Any:
        """The codec of ``key``'s element type (cached)."""
        codec = self._codec_of.get(key.type)
        if codec is None:
            codec = self._codec_of[key.type] = self._codecs.lookup(key.type)
        return codec

    def encode(self, key: Key[Any], element: Any, label: str) -> tuple[bytes, str]:
        """``(data, digest)`` of one element.

        Raises:
            CodecError: the element cannot be encoded.
        """
        try:
            data = self.codec(key).encode(element)
        except Exception as exc:
            raise _unstorable(exc, label) from exc
        return data, sha256_hex(data)

    def remember(self, source: Source) -> bool:
        """Note that ``source`` is open in this process; False when it already was."""
        if source in self._opened:
            return False
        self._opened.add(source)
        return True

    async def open_stream(
        self,
        attempt: Attempt,
        key: Key[Any],
        stream: Stream,
        before: Callable[[Proposal], Any] | None = None,
    ) -> None:
        """Open (or, after a restart, open again) the stream ``key`` of ``attempt``'s node.

        Args:
            attempt: the producing node's root attempt.
            key: the stream key.
            stream: the engine's stream (its generation and source are set here).
            before: a mutation applied first in the same save (the checkpointer writes a root
                attempt that is not saved yet with it).
        """
        source = Source(attempt.scope.id, attempt.node_id, key.name, attempt.id)
        state = (attempt.streams or {}).get(key.name)
        if state is not None:
            stream.load(state)
        again = self._ledger.record.streams.get(source.entry_id(WRITER_GROUP)) is not None
        first = self.remember(source)

        def open_(proposal: Proposal) -> int:
            if before is not None:
                before(proposal)
            return open_source(proposal, source, again=again and first)

        saved = await self._ledger.commit_async(open_)
        stream.generation = saved.value
        stream.data = source

    def queue_element(
        self, attempt: Attempt, key: Key[Any], stream: Stream, sequence: int, element: Any
    ) -> asyncio.Future[Any]:
        """Queue element ``sequence`` for saving (on the event loop, without waiting); the
        returned future succeeds once saved."""
        source: Source = stream.data
        # As ``self.encode`` and ``encode_cursor``, inlined: this runs once per element, and
        # the source's label is only made for an error message.
        codec = self._codec_of.get(key.type)
        if codec is None:
            codec = self.codec(key)
        if type(element) is int and type(codec) is _IntCodec and -_BIG_INT < element < _BIG_INT:
            data = b"%d" % element  # what the codec gives, without the call
        else:
            try:
                data = codec.encode(element)
            except Exception as exc:
                raise _unstorable(exc, source.label) from exc
        if stream.positioned:
            position = stream.position
            if type(position) is int:
                cursor: bytes | None = b"%d" % position
            else:
                cursor = encode_cursor(position, source.label)
        else:
            cursor = None
        self._activity.elements += 1

        digest = (short_sha256 if len(data) < SHORT_INPUT else _sha256)(data).hexdigest()
        element_fields = (
            sequence,
            data,
            digest,
            cursor,
            stream.resumable,
            stream.groups,
            stream.retaining,
        )
        ledger = self._ledger
        queued = self._sends.get(source)
        if queued is not None and ledger.last_queued(queued[1]):
            # The source's last element is the ledger's last queued change: this one joins
            # it, as if applied right after it (one mutation and one future per batch).
            queued[0].append(element_fields)
            return queued[1]
        elements = [element_fields]

        def send(proposal: Proposal) -> None:
            append_many(proposal, source, elements)

        future = ledger.commit_soon(send, readers_wait=True)
        self._sends[source] = (elements, future)
        return future

    def queue_ack(
        self,
        stream: Stream,
        group: str,
        generation: int,
        sequences: tuple[int, ...],
        before: Callable[[Proposal], Any] | None = None,
    ) -> asyncio.Future[None] | None:
        """Queue the acknowledgement of ``sequences`` for ``group`` (on the event loop, without
        waiting); the returned future succeeds once it is saved, and a failure it reports is
        logged here (nobody need read it). ``before`` is a mutation applied first in the same
        save (the reader's root attempt when it is not saved yet)."""
        source = stream.data
        if not isinstance(source, Source):
            return None  # a stream given as a root input: nothing is saved for it
        ledger = self._ledger
        waiter: asyncio.Future[None] = AckFuture(loop=asyncio.get_running_loop())  # one per ack
        where = (source, group, generation)
        queued = self._acks.get(where)
        if (
            before is None
            and queued is not None
            and queued.batch == ledger.batches
            and not queued.saved.done()
        ):
            # The group's last ack is still queued (its batch not taken yet): this one joins
            # it, one mutation and one copy of the group's entry for every ack of the batch.
            queued.sequences.extend(sequences)
            queued.waiters.append(waiter)
            return waiter
        joined = _QueuedAck(list(sequences), [waiter], ledger.batches)

        def ack_(proposal: Proposal) -> None:
            if before is not None:
                before(proposal)
            ack(proposal, source, group, generation, tuple(joined.sequences))

        joined.saved = ledger.commit_soon(ack_)
        joined.saved.add_done_callback(joined.hand_on)
        self._acks[where] = joined
        return waiter

    def output_record(self, key: Key[Any], stream: Stream) -> ValueRecord:
        """The ValueRecord of a stream output: the descriptor of its source (S-1).

        Raises:
            DurableError: the stream has no durable source (a stream root input passed on).
        """
        source = stream.data
        if not isinstance(source, Source):
            raise DurableError(
                f"output {key.name!r} is a stream that no node of this run produced (a stream "
                "given as an input); a durable run can only store streams its nodes produce"
            )
        codec = self.codec(key)
        return ValueRecord(
            name=key.name,
            type_id=codec.id,
            version=codec.version,
            state=ValueState.READY,
            stream=StreamDescriptorRecord(
                source_id=source.source_id,
                scope=source.scope,
                node_id=source.node_id,
                key=source.key,
                attempt=source.attempt,
                capacity=key.capacity,
                terminal=StreamTerminal.COMPLETED,
            ),
        )


class _QueuedAck:
    """One queued ack mutation and the acks that joined it: each caller has a future of its
    own (canceling one caller's wait leaves the others'), answered when the save returns."""

    __slots__ = ("batch", "saved", "sequences", "waiters")

    def __init__(self, sequences: list[int], waiters: list[asyncio.Future[None]], batch: int):
        self.sequences = sequences
        self.waiters = waiters
        self.batch = batch
        """The ledger's batch count when queued: joining is allowed while it has not moved."""
        self.saved: asyncio.Future[Any]

    def hand_on(self, saved: asyncio.Future[Any]) -> None:
        canceled = saved.cancelled()
        error = None if canceled else saved.exception()
        if error is not None:  # a reader that does not await its acks learns it from the log
            _log.warning("an ack failed: %s", error)
        for waiter in self.waiters:
            if waiter.done():  # its caller stopped waiting; the ack is saved all the same
                continue
            if canceled:
                waiter.cancel()
            elif error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)
                waiter.exception()  # read: it is logged above, not reported "never retrieved"


def _group_entry(source: Source, writer: StreamRecord, group: str, **fields: Any) -> StreamRecord:
    """A new entry of ``group`` for ``source``: the writer's identity and generation, and
    ``fields`` (its front, or its terminal)."""
    return StreamRecord(
        scope=source.scope,
        node_id=source.node_id,
        key=source.key,
        group=group,
        generation=writer.generation,
        source_id=writer.source_id,
        **fields,
    )
