"""Elements and acks saved in batches: a batch writes exactly what its elements and acks would
write one by one, elements sent together share one save, and none reaches a reader before it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from durable_core import Graph, Key, RunRecord, Runtime
from durable_core.durable.ledger import Proposal
from durable_core.durable.proposal import adopt
from durable_core.durable.streams import (
    WRITER_GROUP,
    Source,
    ack,
    append,
    append_many,
    open_source,
)
from durable_core.graph.streams import TURN_EVERY
from durable_core.records.jsonio import record_to_json
from tests.durable_core.durable.scenarios import open_store

SOURCE = Source("a" * 32, "tail", "events")


def opened() -> RunRecord:
    """A committed record whose source is open (its writer entry saved)."""
    record = RunRecord(run_id="r1", revision=1)
    proposal = Proposal(record)
    open_source(proposal, SOURCE, again=False)
    adopt(proposal, record)
    return record


def element(
    sequence: int, groups: tuple[str, ...], *, cursor: bool = True, retain: bool = False
) -> tuple[Any, ...]:
    return (
        sequence,
        str(sequence).encode(),
        f"{sequence:064x}",
        str(sequence).encode() if cursor else None,
        sequence % 3 != 0,
        groups,
        retain,
    )


def saved(elements: list[tuple[Any, ...]], *, batch: bool) -> tuple[bytes, list[str]]:
    """The record's bytes after saving ``elements`` in one batch or one by one, and the order
    in which the save's changes name the entries."""
    record = opened()
    proposal = Proposal(record)
    if batch:
        append_many(proposal, SOURCE, elements)
    else:
        for e in elements:
            append(
                proposal,
                SOURCE,
                sequence=e[0],
                data=e[1],
                digest=e[2],
                cursor=e[3],
                resumable=e[4],
                groups=e[5],
                retain=e[6],
            )
    order = list(proposal.record.streams.changes)  # type: ignore[attr-defined]
    adopt(proposal, record)
    return record_to_json(record), order


ONE = ("load",)
TWO = ("load", "sum")


@pytest.mark.parametrize(
    "elements",
    [
        [element(n, ONE) for n in range(1, 9)],
        [element(n, TWO, cursor=n % 2 == 0) for n in range(1, 9)],
        [element(n, TWO, retain=True) for n in range(1, 300)],
        [element(n, ONE if n < 4 else TWO) for n in range(1, 9)],  # a group joins
        [element(n, TWO if n < 4 else ONE) for n in range(1, 9)],  # a group leaves
        [element(n, ()) for n in range(1, 5)],  # nobody reads yet
    ],
    ids=["one-group", "two-groups-some-cursors", "kept", "joined", "left", "no-group"],
)
def test_a_batch_of_elements_writes_what_each_element_writes_on_its_own(
    elements: list[tuple[Any, ...]],
) -> None:
    # covers: S-2, S-3
    assert saved(elements, batch=True) == saved(elements, batch=False)


@pytest.mark.parametrize(
    "acks",
    [
        [(1, 2, 3, 4)],
        [(1, 2), (3, 4, 5)],
        [(2, 3), (1,)],  # a run that does not start the pending list
        [(1, 3, 5), (2, 4)],  # gaps
        [(1, 1, 2, 2, 3)],  # the same element twice
        [(3, 1, 2)],  # out of order
        [(1, 2), (1, 2)],  # acked twice
    ],
)
def test_acks_leave_what_acking_each_element_on_its_own_leaves(
    acks: list[tuple[int, ...]],
) -> None:
    # covers: S-2
    def fronts(joined: bool) -> tuple[bytes, tuple[int, list[int]]]:
        record = opened()
        proposal = Proposal(record)
        append_many(proposal, SOURCE, [element(n, ONE) for n in range(1, 7)])
        adopt(proposal, record)
        proposal = Proposal(record)
        for sequences in acks:
            for part in [sequences] if joined else [(s,) for s in sequences]:
                ack(proposal, SOURCE, "load", 1, part)
        entry = proposal.record.streams[SOURCE.entry_id("load")]
        front = (entry.acked_through, [m.sequence for m in entry.pending])
        adopt(proposal, record)
        return record_to_json(record), front

    assert fronts(True) == fronts(False)


class _WriterSaves:
    """A real store whose sessions note, after each save, the writer entry's last sequence."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.lock = threading.Lock()
        self.last: list[int] = []

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        return _WriterSession(self, self.store.acquire(run_id, timeout))

    def close(self) -> None:
        self.store.close()


class _WriterSession:
    def __init__(self, owner: _WriterSaves, session: Any) -> None:
        self._owner = owner
        self._session = session
        self.run_id = session.run_id

    def load(self) -> RunRecord:
        return self._session.load()

    def save(self, record: RunRecord, expected_revision: int) -> None:
        self._session.save(record, expected_revision)
        writer = next((e for e in record.streams.values() if e.group == WRITER_GROUP), None)
        with self._owner.lock:
            self._owner.last.append(0 if writer is None else writer.last_sequence)

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> _WriterSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_elements_sent_together_share_one_save_and_reach_readers_after_it(
    kind: str, tmp_path: Path
) -> None:
    # covers: S-2, G-10
    count = 100
    assert count < TURN_EVERY  # sent without a turn of the event loop in between
    events = Key("events", int, stream=True, capacity=TURN_EVERY)
    got = Key("got", list[int])
    store = _WriterSaves(open_store(kind, tmp_path))
    seen: list[tuple[int, int]] = []
    g = Graph("batches")

    @g.node("tail", provides=[events])
    async def tail(rc: Any) -> None:
        w = rc.writer(events)
        for i in range(count):
            await w.send_at(i, i + 1)

    @g.node("load", requires=[events], provides=[got])
    async def load_(rc: Any) -> None:
        async for d in rc.reader(events).deliveries():
            with store.lock:
                seen.append((d.sequence, max(store.last, default=0)))
            d.ack()
        rc.set(got, [s for s, _ in seen])

    result = Runtime(store).run(g, run_id="r1", version="v1", inputs={})
    assert result.status == "completed", result.error
    assert result[got] == list(range(1, count + 1))
    # Every element was saved before the first one was delivered, in one save.
    assert all(last >= sequence for sequence, last in seen)
    assert seen[0][1] == count
    assert next(n for n in store.last if n > 0) == count
    store.close()
