"""RecordEncoder: successive versions of one record give exactly ``record_to_json``'s bytes."""

from __future__ import annotations

import random

import attrs
import pytest

from durable_core import (
    AttemptRecord,
    AttemptState,
    CorruptRecordError,
    DurableError,
    NodeRecord,
    ValueRecord,
    copy_record,
    record_to_json,
)
from durable_core.durable.proposal import Proposal, adopt, rollback
from durable_core.records.delta import apply_delta
from durable_core.records.encoder import RecordEncoder
from durable_core.testing import sample_record


def test_a_fresh_encoder_gives_the_canonical_bytes() -> None:
    # covers: R-REC-4
    for rich in (False, True):
        record = sample_record("run-1", 7, rich=rich)
        assert RecordEncoder().encode(record) == record_to_json(record)


def _hex(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(32))


@pytest.mark.parametrize("rarely", [False, True])
@pytest.mark.parametrize("forget", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_copy_on_write_versions_encode_like_record_to_json(
    seed: int, forget: bool, rarely: bool
) -> None:
    # covers: R-REC-4, R-RT-1
    # forget: now and then a new encoder takes over, as the first save after a resume does:
    # it remembers nothing of the record, and its delta must still apply to the stored bytes.
    # rarely: the complete bytes are asked for only now and then (as a store that keeps deltas
    # asks), so entries are added and removed between two of them.
    rng = random.Random(seed)
    record = sample_record("run-1", 1)
    encoder = RecordEncoder()
    assert encoder.encode(record) == record_to_json(record)
    stale = None
    for step in range(60):
        proposal = Proposal(record)
        new = proposal.record
        for _ in range(rng.randint(1, 4)):
            choice = rng.randrange(8)
            scope_id = rng.choice(sorted(new.scopes))
            if choice == 0:  # a new attempt
                new.attempts[_hex(rng)] = AttemptRecord(parent=scope_id, node_id=f"n{step}")
            elif choice == 1 and new.attempts:  # an attempt changes state
                attempt_id = rng.choice(sorted(new.attempts))
                proposal.attempt(attempt_id).state = rng.choice(list(AttemptState))
            elif choice == 2:  # a node is confirmed
                node_id = f"node-{step}-{rng.randrange(100)}-é"
                proposal.scope(scope_id).nodes[node_id] = NodeRecord(
                    node_id=node_id,
                    attempt=_hex(rng),
                    outputs=[ValueRecord(name="v", type_id="json:int", version="1")],
                )
            elif choice == 3:  # a scope field changes
                proposal.scope(scope_id).inputs = f"{rng.randrange(10**6):064d}"
            elif choice == 4 and len(new.attempts) > 2:  # an entry disappears
                del new.attempts[rng.choice(sorted(new.attempts))]
            elif choice == 5:  # a map is replaced as a whole, in another order
                items = list(new.attempts.items())
                rng.shuffle(items)
                new.attempts = dict(items)
            elif choice == 6 and new.scopes[scope_id].nodes:  # a node disappears
                nodes = proposal.scope(scope_id).nodes
                del nodes[rng.choice(sorted(nodes))]
            else:  # top-level fields
                new.version = f"v{step}"
        base = record.revision
        new.revision = base + 1
        before = record_to_json(record)
        change, undo = adopt(proposal, record)
        if rng.random() < 0.2:  # the save failed: the committed record is as it was
            rollback(undo)
            assert record_to_json(record) == before
            continue
        if forget and rng.random() < 0.4:
            encoder, stale = RecordEncoder(), None
        delta, data = encoder.encode_change(record, change, base)
        assert delta is not None and apply_delta(before, delta) == record_to_json(record), step
        if rarely and rng.random() < 0.75 and step < 59:
            stale = None
            continue
        assert data() == record_to_json(record), step
        if stale is not None:
            with pytest.raises(DurableError, match="no longer available"):
                stale()
        stale = data


def test_an_encoder_reencodes_a_part_replaced_by_an_equal_looking_new_object() -> None:
    # covers: R-REC-4
    record = sample_record("run-1", 1)
    encoder = RecordEncoder()
    encoder.encode(record)
    changed = copy_record(record)  # every part is a new object
    root = changed.scopes[changed.root_scope]
    changed.scopes[changed.root_scope] = attrs.evolve(root, graph="another")
    assert encoder.encode(changed) == record_to_json(changed)
    assert b'"Graph":"another"' in encoder.encode(changed)


def test_a_record_that_cannot_be_written_raises_naming_the_path() -> None:
    # covers: R-REC-4, B-FILE-5
    record = sample_record("run-1", 1)
    encoder = RecordEncoder()
    encoder.encode(record)
    bad = copy_record(record)
    bad.version = "lone \ud800 surrogate"
    with pytest.raises(CorruptRecordError) as caught:
        encoder.encode(bad)
    assert caught.value.path == "$.Version"
    assert encoder.encode(record) == record_to_json(record)


def test_record_to_json_never_returns_bytes_an_encoder_remembered() -> None:
    # covers: R-STORE-3
    record = sample_record("run-1", 1)
    encoder = RecordEncoder()
    data = encoder.encode(record)
    assert record_to_json(record) == data
    record.version = "edited after encoding"  # a store wrapper may do this before encoding
    assert b'"Version":"edited after encoding"' in record_to_json(record)
