"""Proposals adopted into the committed record: a stream entry changed in place is written as
the fields that changed and a splice of its pending list, never as the whole entry, and the
delta folds into exactly the record's canonical bytes."""

from __future__ import annotations

import hashlib
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_core import PendingMessageRecord, RunRecord, StreamRecord, record_to_json
from durable_core.durable.proposal import Proposal, _pending_splice, adopt, rollback
from durable_core.records.delta import apply_delta, read_delta
from durable_core.records.encoder import RecordEncoder
from durable_core.testing import sample_record


def _message(sequence: int, size: int = 8) -> PendingMessageRecord:
    data = bytes([sequence % 251]) * size
    return PendingMessageRecord(sequence, data, hashlib.sha256(data).hexdigest())


def _backlogged(backlog: int, size: int) -> tuple[RunRecord, RecordEncoder, str]:
    """A record with one reading group holding ``backlog`` unacked elements of ``size``
    bytes, encoded once; the entry's id."""
    record = sample_record("run-1", 1)
    scope = record.root_scope
    entry = StreamRecord(
        scope=scope,
        node_id="tail",
        key="events",
        group="load",
        source_id="s" * 32,
        last_sequence=backlog,
        acked_through=0,
        pending=[_message(n, size) for n in range(1, backlog + 1)],
    )
    record.streams["e" * 32] = entry
    encoder = RecordEncoder()
    encoder.encode(record)
    return record, encoder, "e" * 32


def _ack_front(record: RunRecord, entry_id: str) -> tuple[bytes, Any, int]:
    """Acknowledge the group's first pending element, adopted into ``record``; returns the
    bytes before, the change and the revision before."""
    proposal = Proposal(record)
    own = proposal.stream(entry_id)
    del own.pending[0]
    own.acked_through = own.pending[0].sequence - 1 if own.pending else own.last_sequence
    before = record_to_json(record)
    base = record.revision
    proposal.record.revision = base + 1
    change, _ = adopt(proposal, record)
    return before, change, base


# covers: S-2, R-STORE-3
@pytest.mark.parametrize("remembered", [True, False])
def test_an_ack_writes_a_delta_that_does_not_grow_with_the_backlog(remembered: bool) -> None:
    # remembered=False: the first save after a resume (an encoder that has seen nothing).
    sizes = {}
    for backlog in (10, 1_000):
        record, encoder, entry_id = _backlogged(backlog, size=1_024)
        if not remembered:
            encoder = RecordEncoder()
        before, change, base = _ack_front(record, entry_id)
        delta, data = encoder.encode_change(record, change, base)
        assert delta is not None
        assert apply_delta(before, delta) == record_to_json(record) == data()
        assert read_delta(delta).splice == ((("Streams", entry_id, "Pending"), (1,), ()),)
        sizes[backlog] = len(delta)
    # The entry of 1,000 elements of 1 KiB is ~1.4 MB; the delta names one sequence.
    assert sizes[1_000] == sizes[10] < 300, sizes


# covers: S-2, R-STORE-3
def test_an_element_sent_to_a_backlogged_group_is_appended_not_rewritten() -> None:
    record, encoder, entry_id = _backlogged(500, size=1_024)
    proposal = Proposal(record)
    own = proposal.stream(entry_id)
    own.pending.append(_message(501, size=16))
    own.last_sequence = 501
    before = record_to_json(record)
    proposal.record.revision = record.revision + 1
    base = record.revision
    change, _ = adopt(proposal, record)
    delta, data = encoder.encode_change(record, change, base)
    assert delta is not None and len(delta) < 400, len(delta or b"")
    assert apply_delta(before, delta) == data() == record_to_json(record)
    (splice,) = read_delta(delta).splice
    assert splice[1] == () and [m["Sequence"] for m in splice[2]] == [501]


_LISTS = st.lists(st.integers(1, 60), unique=True).map(sorted)


# covers: S-2
@settings(max_examples=300, deadline=None)
@given(old=_LISTS, new=_LISTS, data=st.booleans())
def test_a_splice_is_found_exactly_when_the_new_list_follows_from_the_old(
    old: list[int], new: list[int], data: bool
) -> None:
    committed = [_message(n) for n in old]
    by_sequence = {m.sequence: m for m in committed}
    # A message the proposal kept is the committed object; a new one is a new object (with
    # ``data``: an equal-looking new object for a sequence the old list holds).
    proposed = [by_sequence[n] if n in by_sequence and not data else _message(n) for n in new]
    splice = _pending_splice(committed, proposed)
    last = old[-1] if old else 0
    expected = all(n in by_sequence for n in new if n <= last)
    assert (splice is not None) == expected, (old, new)
    if splice is not None:
        dropped = set(splice.dropped)
        assert [m for m in committed if m.sequence not in dropped] + splice.appended == proposed
        assert splice.dropped == sorted(dropped)
        assert all(m.sequence > last for m in splice.appended)


# covers: S-2, R-STORE-3, R-RT-1
@pytest.mark.parametrize("seed", range(8))
def test_random_stream_changes_fold_into_the_canonical_bytes(seed: int) -> None:
    rng = random.Random(seed)
    record, encoder, entry_id = _backlogged(20, size=4)
    for step in range(80):
        proposal = Proposal(record)
        own = proposal.stream(entry_id)
        choice = rng.randrange(7)
        if choice == 0 and own.pending:  # an ack in order
            del own.pending[0]
        elif choice == 1 and own.pending:  # an ack out of order
            del own.pending[rng.randrange(len(own.pending))]
        elif choice == 2:  # elements sent
            for _ in range(rng.randint(1, 3)):
                own.last_sequence += 1
                own.pending.append(_message(own.last_sequence))
        elif choice == 3:  # sent and acked in one save
            own.last_sequence += 1
            own.pending.append(_message(own.last_sequence))
            del own.pending[rng.randrange(len(own.pending))]
        elif choice == 4:  # the group's reader is confirmed: everything is acked
            own.pending.clear()
        elif choice == 5:  # a new try starts the group again with kept elements
            own.pending = [_message(n) for n in range(1, own.last_sequence + 1, 2)]
        else:  # only fields
            own.generation += 1
        own.acked_through = own.pending[0].sequence - 1 if own.pending else own.last_sequence
        before = record_to_json(record)
        base = record.revision
        proposal.record.revision = base + 1
        change, _ = adopt(proposal, record)
        if rng.random() < 0.15:
            encoder = RecordEncoder()  # as after a resume: nothing remembered
        delta, data = encoder.encode_change(record, change, base)
        assert delta is not None
        assert apply_delta(before, delta) == data() == record_to_json(record), step


# covers: S-2, R-REC-4, R-STORE-3
@pytest.mark.parametrize("seed", range(16))
def test_stream_entries_changed_in_part_give_the_canonical_bytes_whenever_asked(seed: int) -> None:
    # The encoder keeps the text of each pending element of an entry changed in part and
    # follows it through every splice; the complete bytes, asked for only now and then, join
    # those texts. Whatever the entries went through meanwhile (appends, acks in and out of
    # order, a list replaced whole, an entry removed and added again, a save undone), they
    # must equal record_to_json's, and every delta must fold into them.
    rng = random.Random(seed)
    record, encoder, first = _backlogged(6, size=4)
    ids = [first, "f" * 32]
    sent = {first: 6, ids[1]: 0}
    checked = 0
    for step in range(80):
        proposal = Proposal(record)
        for _ in range(rng.randint(1, 3)):
            entry_id = rng.choice(ids)
            streams = proposal.record.streams
            if entry_id not in streams:
                if rng.random() < 0.5:  # an entry (re)appears
                    streams[entry_id] = StreamRecord(
                        scope=record.root_scope,
                        node_id="tail",
                        key=entry_id[:4],
                        group="load",
                        last_sequence=sent[entry_id],
                        acked_through=sent[entry_id],
                    )
                continue
            own = proposal.stream(entry_id)
            choice = rng.randrange(7)
            if choice <= 2:  # elements appended
                for _ in range(rng.randint(1, 4)):
                    sent[entry_id] += 1
                    own.pending.append(_message(sent[entry_id], size=rng.randint(0, 9)))
                own.last_sequence = sent[entry_id]
            elif choice == 3 and own.pending:  # acks in order
                del own.pending[: rng.randint(1, len(own.pending))]
            elif choice == 4 and len(own.pending) > 2:  # an ack out of order
                del own.pending[rng.randrange(1, len(own.pending))]
            elif choice == 5 and sent[entry_id] >= 3:  # the list replaced by another one
                chosen = sorted(rng.sample(range(1, sent[entry_id] + 1), 3))
                own.pending = [_message(n, size=3) for n in chosen]
            elif rng.random() < 0.3:  # the entry removed
                del proposal.record.streams[entry_id]
                continue
            else:  # a field alone
                own.generation += 1
            own.acked_through = own.pending[0].sequence - 1 if own.pending else own.last_sequence
        base = record.revision
        proposal.record.revision = base + 1
        before = record_to_json(record)
        change, undo = adopt(proposal, record)
        if rng.random() < 0.1:  # the save failed: undone, and the encoder starts afresh
            rollback(undo)
            encoder = RecordEncoder()
            encoder.encode(record)
            continue
        delta, data = encoder.encode_change(record, change, base)
        assert delta is not None and apply_delta(before, delta) == record_to_json(record), step
        if rng.random() < 0.6:
            continue
        assert data() == record_to_json(record), step
        checked += 1
    assert checked >= 10
