"""Durable streams in one process: positions, acks, generations, failures, and what resume
refuses or repairs, with real runs on a memory store and crafted records."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from durable_core import (
    AttemptState,
    CancelToken,
    CheckpointError,
    Codecs,
    CorruptRecordError,
    DurableError,
    Graph,
    In,
    Key,
    MemoryStore,
    NodeFailedError,
    Out,
    Retry,
    RunRecord,
    Runtime,
    StaleDeliveryError,
    StreamFailedError,
    StreamNotResumableError,
    StreamRecord,
    StreamTerminal,
    copy_record,
)
from durable_core.durable.ledger import Proposal
from durable_core.durable.streams import (
    WRITER_GROUP,
    Source,
    ack,
    append,
    fail_sources,
    open_source,
)
from durable_filestore import FileStore
from tests.durable_core.durable.scenarios import FailingStore, SaveFailure, load

COUNT = Key("count", int)
EVENTS = Key("events", int, stream=True, capacity=4)
ACKED = Key("acked", list[int])
TOTAL = Key("total", int)


def stream_graph(
    calls: list[str], *, resumable: bool = True, stop_at: int | None = None, fail_at: int = 0
) -> tuple[Graph, CancelToken]:
    """A producer of ``count`` ints, a reader acking each delivery, a reader of values.

    ``stop_at``: the acking reader cancels the run after that many deliveries (the record then
    stays resumable, as after a crash). ``fail_at``: the producer raises after that element.
    """
    token = CancelToken()
    g = Graph("streams", inputs=[COUNT])

    @g.node("tail", requires=[COUNT], provides=[EVENTS])
    async def tail(rc: Any) -> None:
        w = rc.writer(EVENTS)
        start = w.position or 0
        calls.append(f"tail from {start}")
        for i in range(start, rc.get(COUNT)):
            if resumable:
                await w.send_at(i, i + 1)
            else:
                await w.send(i)
            if fail_at and i + 1 == fail_at:
                raise ValueError("source broke")

    @g.node("load", requires=[EVENTS], provides=[ACKED])
    async def load_(rc: Any) -> None:
        got = []
        async for d in rc.reader(EVENTS).deliveries():
            calls.append(f"load {d.sequence} g{d.generation}")
            got.append(d.value)
            await d.ack()
            if stop_at is not None and len(got) == stop_at:
                token.cancel()
                await asyncio.sleep(10)
        rc.set(ACKED, got)

    @g.node("sum", requires=[EVENTS], provides=[TOTAL])
    def total(rc: Any) -> None:
        values = list(rc.reader(EVENTS))
        calls.append(f"sum read {len(values)}")
        rc.set(TOTAL, sum(values))

    return g, token


def run(store: Any, graph: Graph, token: CancelToken | None = None, count: int = 10) -> Any:
    return Runtime(store).run(graph, run_id="r1", version="v1", inputs={COUNT: count}, cancel=token)


def resume(store: Any, graph: Graph, count: int = 10) -> Any:
    return Runtime(store).resume(graph, run_id="r1", version="v1", inputs={COUNT: count})


def entry(record: RunRecord, group: str) -> StreamRecord:
    (found,) = [e for e in record.streams.values() if e.group == group]
    return found


def rewrite(store: Any, change: Callable[[RunRecord], None]) -> RunRecord:
    """Change the stored record by hand (a crafted record); returns the new record."""
    with store.acquire("r1") as session:
        record = copy_record(session.load())
        change(record)
        record.revision += 1
        session.save(record, record.revision - 1)
        return session.load()


def stopped_run(**options: Any) -> tuple[MemoryStore, list[str]]:
    """A run canceled after 3 acked deliveries: the producer is active, mid-stream."""
    store, calls = MemoryStore(), []
    graph, token = stream_graph(calls, stop_at=3, **options)
    result = run(store, graph, token)
    assert result.status == "canceled"
    return store, calls


# -- the ack front and the mutations -----------------------------------------------------------


def test_sparse_acks_leave_the_front_at_the_first_gap() -> None:
    # covers: S-2
    source = Source("a" * 32, "tail", "events")
    proposal = Proposal(RunRecord(run_id="r1"))
    assert open_source(proposal, source, again=False) == 1
    for sequence in (1, 2, 3, 4):
        append(
            proposal,
            source,
            sequence=sequence,
            data=b"x",
            digest="",
            cursor=str(sequence).encode(),
            resumable=True,
            groups=("load",),
        )
    ack(proposal, source, "load", 1, (1, 2, 4))
    group = proposal.record.streams[source.entry_id("load")]
    assert group.acked_through == 2
    assert [m.sequence for m in group.pending] == [3]
    ack(proposal, source, "load", 1, (4,))  # acking twice changes nothing
    assert group.acked_through == 2
    ack(proposal, source, "load", 1, (3,))
    assert group.acked_through == 4 and group.pending == []
    writer = proposal.record.streams[source.entry_id(WRITER_GROUP)]
    assert (writer.last_sequence, writer.cursor, writer.pending) == (4, b"4", [])


def test_a_delivery_of_another_generation_cannot_ack() -> None:
    # covers: S-2
    source = Source("a" * 32, "tail", "events")
    proposal = Proposal(RunRecord(run_id="r1"))
    open_source(proposal, source, again=False)
    append(
        proposal,
        source,
        sequence=1,
        data=b"",
        digest="",
        cursor=None,
        resumable=True,
        groups=("load",),
    )
    assert open_source(proposal, source, again=True) == 2  # a later process opens it
    with pytest.raises(StaleDeliveryError, match="older generation"):
        ack(proposal, source, "load", 1, (1,))
    with pytest.raises(StaleDeliveryError, match="future generation"):
        ack(proposal, source, "load", 3, (1,))
    ack(proposal, source, "load", 2, (1,))
    assert proposal.record.streams[source.entry_id("load")].acked_through == 1


def test_a_failed_source_refuses_open_send_and_ack_and_failing_again_changes_nothing() -> None:
    # covers: S-5, S-3
    source = Source("a" * 32, "tail", "events")
    proposal = Proposal(RunRecord(run_id="r1"))
    open_source(proposal, source, again=False)
    append(
        proposal,
        source,
        sequence=1,
        data=b"",
        digest="",
        cursor=b"1",
        resumable=True,
        groups=("load",),
    )
    fail_sources(proposal, source.scope, source.node_id)
    before = copy_record(proposal.record)
    fail_sources(proposal, source.scope, source.node_id)  # strictly idempotent
    assert proposal.record == before
    assert {e.terminal for e in proposal.record.streams.values()} == {StreamTerminal.FAILED}
    with pytest.raises(StreamFailedError, match="refuses open"):
        open_source(proposal, source, again=True)
    with pytest.raises(StreamFailedError, match="refuses elements"):
        append(
            proposal,
            source,
            sequence=2,
            data=b"",
            digest="",
            cursor=b"2",
            resumable=True,
            groups=("load",),
        )
    with pytest.raises(StreamFailedError, match="refuses acks"):
        ack(proposal, source, "load", 1, (1,))
    assert proposal.record == before


# -- real runs ---------------------------------------------------------------------------------


def test_a_completed_run_keeps_no_acked_element_and_completes_every_entry() -> None:
    # covers: S-1, S-2
    store, calls = MemoryStore(), []
    graph, _ = stream_graph(calls)
    result = run(store, graph)
    assert result.status == "completed", result.error
    assert result[ACKED] == list(range(10)) and result[TOTAL] == 45
    record = load(store, "r1")
    groups = sorted(e.group for e in record.streams.values())
    assert groups == ["", "load", "sum"]
    for e in record.streams.values():
        assert (e.terminal, e.pending, e.acked_through, e.last_sequence) == (
            StreamTerminal.COMPLETED,
            [],
            10,
            10,
        )
    (output,) = record.scopes[record.root_scope].nodes["tail"].outputs
    assert output.stream is not None and output.data == b"" and output.digest == ""
    assert output.stream.terminal is StreamTerminal.COMPLETED
    assert record.attempts[output.stream.attempt].node_id == "tail"


def test_opening_a_stream_writes_its_producers_root_attempt_in_the_same_save() -> None:
    # covers: S-1, S-3
    # A root attempt is written with the first change that needs it; a stream's writer entry
    # names its producer's root attempt, so the opening save carries both.
    saves: list[tuple[list[AttemptState], bool]] = []

    def watch(record: RunRecord) -> bool:
        tail = [a.state for a in record.attempts.values() if a.node_id == "tail"]
        saves.append((tail, any(e.node_id == "tail" for e in record.streams.values())))
        return False

    graph, _ = stream_graph([])
    result = run(FailingStore(MemoryStore(), fail_on=watch), graph)
    assert result.status == "completed", result.error
    first = next(i for i, (_, opened) in enumerate(saves) if opened)
    assert saves[first] == ([AttemptState.ACTIVE], True)
    assert not any(tail for tail, _ in saves[:first])  # no save of its own
    assert all(len(tail) == 1 for tail, _ in saves[first:])


def test_resume_goes_on_from_the_producers_position_and_each_groups_first_unacked() -> None:
    # covers: S-2, S-3
    store, calls = stopped_run()
    record = load(store, "r1")
    loader, writer = entry(record, "load"), entry(record, WRITER_GROUP)
    assert loader.acked_through == 3 and writer.last_sequence >= 3
    assert writer.resumable and writer.cursor == str(writer.last_sequence).encode()
    calls.clear()
    graph, _ = stream_graph(calls)
    result = resume(store, graph)
    assert result.status == "completed", result.error
    assert calls[0] == f"tail from {writer.last_sequence}"
    # The acking group starts at its first unacked element, with the raised generation; the
    # value reader, which acks only with its confirmation, gets the whole stream again.
    assert next(c for c in calls if c.startswith("load")) == "load 4 g2"
    assert result[ACKED] == list(range(3, 10)) and result[TOTAL] == 45
    final = load(store, "r1")
    assert {e.generation for e in final.streams.values()} == {2}


def test_resume_refuses_a_producer_that_sent_without_positions_before_anything_runs() -> None:
    # covers: S-3
    store, calls = stopped_run(resumable=False)
    before = load(store, "r1")
    calls.clear()
    graph, _ = stream_graph(calls, resumable=False)
    with pytest.raises(StreamNotResumableError) as caught:
        resume(store, graph)
    message = str(caught.value)
    assert "stream 'events' of node 'tail'" in message and "send_at" in message
    assert calls == []
    assert load(store, "r1") == before


class RecordingStore:
    """A memory store that keeps a copy of every record saved."""

    def __init__(self) -> None:
        self.store = MemoryStore()
        self.saved: list[RunRecord] = []

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        session = self.store.acquire(run_id, timeout)
        owner = self

        class Session:
            run_id = session.run_id

            def load(self) -> RunRecord:
                return session.load()

            def save(self, record: RunRecord, expected: int) -> None:
                session.save(record, expected)
                owner.saved.append(copy_record(record))

            def close(self) -> None:
                session.close()

        return Session()

    def close(self) -> None:
        self.store.close()


def test_a_failed_producer_fails_its_root_and_every_stream_in_one_save() -> None:
    # covers: S-5
    store, calls = RecordingStore(), []
    graph, _ = stream_graph(calls, fail_at=5)
    result = run(store, graph)
    assert result.status == "failed"
    root = next(aid for aid, a in store.saved[-1].attempts.items() if a.node_id == "tail")

    def state(record: RunRecord) -> tuple[AttemptState | None, set[StreamTerminal]]:
        attempt = record.attempts.get(root)
        terminals = {e.terminal for e in record.streams.values()}
        return (None if attempt is None else attempt.state), terminals

    first_failed = next(i for i, r in enumerate(store.saved) if state(r)[0] is AttemptState.FAILED)
    assert state(store.saved[first_failed]) == (AttemptState.FAILED, {StreamTerminal.FAILED})
    assert state(store.saved[first_failed - 1]) == (AttemptState.ACTIVE, {StreamTerminal.OPEN})
    # The failure's later saves never move a position, cursor or generation again.
    frozen = {
        k: (e.last_sequence, e.cursor, e.generation)
        for k, e in store.saved[first_failed].streams.items()
    }
    for later in store.saved[first_failed:]:
        assert {
            k: (e.last_sequence, e.cursor, e.generation) for k, e in later.streams.items()
        } == frozen


# -- crafted records: refused on resume, before anything runs or is saved -----------------------


def refused(store: MemoryStore, change: Callable[[RunRecord], None], match: str) -> None:
    crafted = rewrite(store, change)
    calls: list[str] = []
    graph, _ = stream_graph(calls)
    with pytest.raises(CorruptRecordError, match=match):
        resume(store, graph)
    assert calls == []
    assert load(store, "r1") == crafted


def test_resume_refuses_an_entry_naming_a_key_its_node_does_not_provide() -> None:
    # covers: S-3
    store, _ = stopped_run()

    def forge(record: RunRecord) -> None:
        for e in record.streams.values():
            e.node_id = "load"  # 'load' provides no stream 'events'

    refused(store, forge, "forged reference")


def test_resume_refuses_a_descriptor_naming_another_writer_attempt() -> None:
    # covers: S-1, S-3
    store, calls = MemoryStore(), []
    graph, _ = stream_graph(calls)
    run(store, graph)

    def forge(record: RunRecord) -> None:
        other = next(aid for aid, a in record.attempts.items() if a.node_id == "load")
        node = record.scopes[record.root_scope].nodes["tail"]
        node.outputs[0].stream.attempt = other

    refused(store, forge, "the real writer")


def test_resume_refuses_a_future_generation() -> None:
    # covers: S-2, S-3
    store, _ = stopped_run()

    def forge(record: RunRecord) -> None:
        entry(record, "load").generation = 5

    refused(store, forge, "future generation")


def test_resume_refuses_a_failed_writer_whose_streams_are_still_open() -> None:
    # covers: S-5
    store, _ = stopped_run()

    def forge(record: RunRecord) -> None:
        root = next(a for a in record.attempts.values() if a.node_id == "tail")
        root.state = AttemptState.FAILED

    refused(store, forge, "its writer failed")


def test_resume_refuses_failed_terminals_mixed_with_completed_ones_of_one_root() -> None:
    # covers: S-6
    store, _ = stopped_run()

    def forge(record: RunRecord) -> None:
        entry(record, "load").terminal = StreamTerminal.FAILED
        entry(record, "sum").terminal = StreamTerminal.COMPLETED

    refused(store, forge, "mix failed terminals")


# -- repair -------------------------------------------------------------------------------------


def partly_failed(store: Any) -> None:
    def forge(record: RunRecord) -> None:
        entry(record, "load").terminal = StreamTerminal.FAILED  # the root is still active

    rewrite(store, forge)


def test_resume_converges_a_partly_failed_root_in_one_save() -> None:
    # covers: S-6, S-5
    store, _ = stopped_run()
    partly_failed(store)
    before = load(store, "r1")
    calls: list[str] = []
    graph, _ = stream_graph(calls)
    result = resume(store, graph)
    after = load(store, "r1")
    assert after.revision == before.revision + 1  # one CAS, nothing else saved
    root = next(aid for aid, a in after.attempts.items() if a.node_id == "tail")
    assert after.attempts[root].state is AttemptState.FAILED
    assert {e.terminal for e in after.streams.values()} == {StreamTerminal.FAILED}
    assert [(e.last_sequence, e.generation) for e in after.streams.values()] == [
        (e.last_sequence, e.generation) for e in before.streams.values()
    ]
    assert result.status == "failed" and calls == []


@pytest.mark.parametrize("written", [False, True], ids=["not-written", "written"])
def test_a_failing_repair_save_stops_and_the_next_resume_adopts_what_was_stored(
    written: bool, tmp_path: Path
) -> None:
    # covers: S-6, R-RT-2
    real, _ = stopped_run()
    partly_failed(real)
    before = load(real, "r1")
    failing = FailingStore(real, 1, written=written)
    calls: list[str] = []
    graph, _ = stream_graph(calls)
    with pytest.raises(CheckpointError) as caught:
        Runtime(failing).resume(graph, run_id="r1", version="v1", inputs={COUNT: 10})
    assert isinstance(caught.value.__cause__, SaveFailure) and calls == []
    stored = load(real, "r1")
    assert stored.revision == before.revision + (1 if written else 0)
    result = resume(real, graph)
    assert result.status == "failed" and calls == []
    final = load(real, "r1")
    assert {e.terminal for e in final.streams.values()} == {StreamTerminal.FAILED}
    assert final.revision == before.revision + 1  # converged exactly once


# -- completed producers and Sub aliases --------------------------------------------------------

SENT = Key("sent", int)
GOT = Key("got", list[int])


def completed_then_read(calls: list[str], token: CancelToken, stop_at: int | None) -> Graph:
    """The reader starts only after the producer is confirmed (it also requires ``sent``)."""
    g = Graph("completed", inputs=[COUNT])

    @g.node("tail", requires=[COUNT], provides=[EVENTS, SENT])
    async def tail(rc: Any) -> None:
        w = rc.writer(EVENTS)
        for i in range(w.position or 0, rc.get(COUNT)):
            await w.send_at(i, i + 1)
        rc.set(SENT, rc.get(COUNT))

    @g.node("load", requires=[EVENTS, SENT], provides=[GOT])
    async def load_(rc: Any) -> None:
        got = []
        async for d in rc.reader(EVENTS).deliveries():
            calls.append(f"load {d.sequence} g{d.generation}")
            got.append(d.value)
            await d.ack()
            if len(got) == stop_at:
                token.cancel()
                await asyncio.sleep(10)
        rc.set(GOT, got)

    return g


def test_a_completed_producers_unacked_tail_is_rebuilt_and_can_still_be_acked() -> None:
    # covers: S-3, S-1, S-2
    store, calls, token = MemoryStore(), [], CancelToken()
    graph = completed_then_read(calls, token, stop_at=2)
    result = Runtime(store).run(graph, run_id="r1", version="v1", inputs={COUNT: 4}, cancel=token)
    assert result.status == "canceled"
    record = load(store, "r1")
    assert "tail" in record.scopes[record.root_scope].nodes
    assert entry(record, "load").terminal is StreamTerminal.COMPLETED
    assert [m.sequence for m in entry(record, "load").pending] == [3, 4]
    calls.clear()
    graph = completed_then_read(calls, CancelToken(), stop_at=None)
    result = Runtime(store).resume(graph, run_id="r1", version="v1", inputs={COUNT: 4})
    assert result.status == "completed" and result.restored == 1
    assert calls == ["load 3 g2", "load 4 g2"] and result[GOT] == [2, 3]
    final = entry(load(store, "r1"), "load")
    assert (final.acked_through, final.pending, final.generation) == (4, [], 2)


INNER = Key("inner", int, stream=True, capacity=4)


def alias_graph(calls: list[str]) -> Graph:
    """A Sub whose child produces a stream, published to the parent through ``Out``."""
    child = Graph("child", inputs=[COUNT])

    @child.node("make", requires=[COUNT], provides=[INNER])
    async def make(rc: Any) -> None:
        w = rc.writer(INNER)
        for i in range(w.position or 0, rc.get(COUNT)):
            await w.send_at(i, i + 1)

    g = Graph("alias", inputs=[COUNT])
    g.sub("part", child, bindings=[In(COUNT, COUNT), Out(INNER, EVENTS)])

    @g.node("load", requires=[EVENTS], provides=[GOT])
    async def load_(rc: Any) -> None:
        calls.append("load")
        rc.set(GOT, [x async for x in rc.reader(EVENTS)])

    return g


def test_a_sub_alias_keeps_its_source_identity() -> None:
    # covers: S-4, S-1
    store, calls = MemoryStore(), []
    result = Runtime(store).run(alias_graph(calls), run_id="r1", version="v1", inputs={COUNT: 3})
    assert result.status == "completed" and result[GOT] == [0, 1, 2]
    record = load(store, "r1")
    (alias,) = record.scopes[record.root_scope].nodes["part"].outputs
    inner = next(s for s in record.scopes.values() if s.path == "part")
    (own,) = inner.nodes["make"].outputs
    assert alias.stream == own.stream and alias.stream.key == "inner"


def test_a_confirmed_alias_of_a_failed_source_restores_as_a_read_only_failed_endpoint() -> None:
    # covers: S-4
    store, calls = MemoryStore(), []
    Runtime(store).run(alias_graph(calls), run_id="r1", version="v1", inputs={COUNT: 3})

    def fail_source(record: RunRecord) -> None:
        inner_id = next(sid for sid, s in record.scopes.items() if s.path == "part")
        del record.scopes[inner_id].nodes["make"]
        for attempt in record.attempts.values():
            if attempt.node_id == "make":
                attempt.state = AttemptState.FAILED
            if attempt.node_id == "load":
                attempt.state = AttemptState.ACTIVE
        del record.scopes[record.root_scope].nodes["load"]
        for e in record.streams.values():
            e.terminal = StreamTerminal.FAILED

    crafted = rewrite(store, fail_source)
    calls.clear()
    result = Runtime(store).resume(alias_graph(calls), run_id="r1", version="v1", inputs={COUNT: 3})
    assert result.status == "failed" and calls == ["load"]
    assert isinstance(result.error.original, NodeFailedError | StreamFailedError)
    after = load(store, "r1")
    # No generation raised, nothing acked or sent for the failed source.
    assert after.streams == crafted.streams


def test_an_alias_of_a_canceled_source_is_refused() -> None:
    # covers: S-4
    store, calls = MemoryStore(), []
    Runtime(store).run(alias_graph(calls), run_id="r1", version="v1", inputs={COUNT: 3})

    def cancel_source(record: RunRecord) -> None:
        inner_id = next(sid for sid, s in record.scopes.items() if s.path == "part")
        del record.scopes[inner_id].nodes["make"]
        for attempt in record.attempts.values():
            if attempt.node_id == "make":
                attempt.state = AttemptState.FAILED
        for e in record.streams.values():
            e.terminal = StreamTerminal.CANCELED

    crafted = rewrite(store, cancel_source)
    with pytest.raises(CorruptRecordError):
        Runtime(store).resume(alias_graph(calls), run_id="r1", version="v1", inputs={COUNT: 3})
    assert load(store, "r1") == crafted


def test_plain_bodies_send_at_and_ack_durably() -> None:
    # covers: S-2, S-3
    store = MemoryStore()
    g = Graph("plain", inputs=[COUNT])

    @g.node("tail", requires=[COUNT], provides=[EVENTS])
    def tail(rc: Any) -> None:
        w = rc.writer(EVENTS)
        for i in range(w.position or 0, rc.get(COUNT)):
            w.send_at(i, i + 1)

    @g.node("load", requires=[EVENTS], provides=[GOT])
    def load_(rc: Any) -> None:
        got = []
        for n, d in enumerate(rc.reader(EVENTS).deliveries()):
            got.append(d.value)
            d.ack(wait=n % 2 == 0)  # every other ack only queued
        rc.set(GOT, got)

    result = Runtime(store).run(g, run_id="r1", version="v1", inputs={COUNT: 9})
    assert result.status == "completed", result.error
    assert result[GOT] == list(range(9))
    record = load(store, "r1")
    assert entry(record, "load").acked_through == 9
    assert entry(record, WRITER_GROUP).cursor == b"9"


QUICK = Key("quick", int)


def test_a_restored_reader_never_holds_back_a_resumed_producer() -> None:
    # covers: S-3, G-10
    token = CancelToken()
    g = Graph("restored_reader", inputs=[COUNT])

    @g.node("tail", requires=[COUNT], provides=[EVENTS])
    async def tail(rc: Any) -> None:
        w = rc.writer(EVENTS)
        for i in range(w.position or 0, rc.get(COUNT)):
            await w.send_at(i, i + 1)

    @g.node("quick", requires=[EVENTS], provides=[QUICK])
    async def quick(rc: Any) -> None:  # confirmed after one element, restored on resume
        rc.set(QUICK, await rc.reader(EVENTS).receive())

    @g.node("slow", requires=[EVENTS, QUICK], provides=[GOT])
    async def slow(rc: Any) -> None:
        got = []
        async for d in rc.reader(EVENTS).deliveries():
            got.append(d.value)
            await d.ack()
            if len(got) == 2 and not token.canceled:
                token.cancel()
                await asyncio.sleep(10)
        rc.set(GOT, got)

    store = MemoryStore()
    first = Runtime(store).run(g, run_id="r1", version="v1", inputs={COUNT: 30}, cancel=token)
    assert first.status == "canceled"
    resumed = Runtime(store).resume_async(g, run_id="r1", version="v1", inputs={COUNT: 30})
    # With a capacity of 4, a restored reader attached to the stream would block it for good.
    result = asyncio.run(asyncio.wait_for(resumed, 30))
    assert result.status == "completed" and result.restored == 1
    assert result[GOT] == list(range(2, 30))


def test_a_reader_confirmed_before_its_producer_failed_resumes_as_failed_for_good() -> None:
    # covers: S-5, R-NODE-2
    g = Graph("early_reader", inputs=[COUNT])

    @g.node("tail", requires=[COUNT], provides=[EVENTS])
    async def tail(rc: Any) -> None:
        w = rc.writer(EVENTS)
        await w.send_at(0, 1)
        while rc.get(COUNT) > 0:  # until the reader is confirmed
            await asyncio.sleep(0.01)
            if "quick" in done:
                raise ValueError("source broke")

    done: set[str] = set()

    @g.node("quick", requires=[EVENTS], provides=[QUICK])
    async def quick(rc: Any) -> None:
        rc.set(QUICK, await rc.reader(EVENTS).receive())

    class Confirmed:
        def __call__(self, event: Any) -> None:
            if event.kind == "node_confirmed":
                done.add(event.node_id)

    store = MemoryStore()
    first = Runtime(store, observers=[Confirmed()]).run(
        g, run_id="r1", version="v1", inputs={COUNT: 1}
    )
    assert first.status == "failed" and done == {"quick"}
    again = resume(store, g, count=1)
    assert again.status == "failed" and again.error.path == "tail"


def test_decoded_values_are_marked_checked_and_stream_outputs_are_not() -> None:
    # covers: S-1, R-VAL-3
    # The engine skips its second type check only for outputs decode_confirmed decoded with a
    # check of each declared type; a stream descriptor is not such a value.
    from durable_core.codecs import Codecs
    from durable_core.durable.recovery import decode_confirmed

    store, calls = MemoryStore(), []
    graph, _ = stream_graph(calls)
    assert run(store, graph).status == "completed"
    record = load(store, "r1")
    restored = decode_confirmed(graph, record, Codecs.default())
    marks = {node_id: outputs.checked for (_, node_id), outputs in restored.items()}
    assert marks == {"tail": False, "load": True, "sum": True}
    again = resume(store, graph)
    assert again.status == "completed" and again.restored == 3
    assert again[ACKED] == list(range(10)) and again[TOTAL] == 45


# -- a producer whose Retry try fails mid-stream -------------------------------------------------


def retried_producer(calls: list[str], *, fail_once_at: int, stop_at: int | None = None):
    """``tail`` under ``Retry(2)`` raises after element ``fail_once_at`` in its first try only;
    its second try goes on from the saved position. ``load`` acks each delivery and, with
    ``stop_at``, cancels the run after that many (a stop mid-way after the failed try)."""
    token = CancelToken()
    failed: list[bool] = []
    g = Graph("retried", inputs=[COUNT])

    @g.node("tail", requires=[COUNT], provides=[EVENTS], aspects=[Retry(2)])
    async def tail(rc: Any) -> None:
        w = rc.writer(EVENTS)
        calls.append(f"tail from {w.position or 0}")
        for i in range(w.position or 0, rc.get(COUNT)):
            await w.send_at(i, i + 1)
            if i + 1 == fail_once_at and not failed:
                failed.append(True)
                raise ValueError("first try broke")

    @g.node("load", requires=[EVENTS], provides=[ACKED])
    async def load_(rc: Any) -> None:
        got = []
        async for d in rc.reader(EVENTS).deliveries():
            got.append(d.value)
            await d.ack()
            if stop_at is not None and len(got) == stop_at and not token.canceled:
                token.cancel()
                await asyncio.Event().wait()
        rc.set(ACKED, got)

    @g.node("sum", requires=[EVENTS], provides=[TOTAL])
    def total(rc: Any) -> None:
        rc.set(TOTAL, sum(rc.reader(EVENTS)))

    return g, token


def test_a_retry_try_of_a_producer_that_fails_mid_stream_leaves_its_streams_open() -> None:
    # covers: S-5, S-3
    # Only the root attempt's failure fails the streams: a failed Retry try is followed by the
    # next try, which goes on from the saved position, and the readers get every element once.
    store, calls = MemoryStore(), []
    graph, _ = retried_producer(calls, fail_once_at=4)
    result = run(store, graph)
    assert result.status == "completed", result.error
    assert calls == ["tail from 0", "tail from 4"]
    assert result[ACKED] == list(range(10)) and result[TOTAL] == sum(range(10))
    record = load(store, "r1")
    tries = [a for a in record.attempts.values() if a.node_id == "tail" and a.boundary]
    assert sorted(a.state for a in tries) == [AttemptState.CONFIRMED, AttemptState.FAILED]
    assert {e.terminal for e in record.streams.values()} == {StreamTerminal.COMPLETED}


def test_a_retried_producer_resumed_after_its_failed_try_goes_on_from_its_position() -> None:
    # covers: S-5, S-3, S-2
    store, calls = MemoryStore(), []
    graph, token = retried_producer(calls, fail_once_at=4, stop_at=6)
    assert run(store, graph, token).status == "canceled"
    record = load(store, "r1")
    assert StreamTerminal.FAILED not in {e.terminal for e in record.streams.values()}
    calls.clear()
    graph, _ = retried_producer(calls, fail_once_at=0)
    result = resume(store, graph)
    assert result.status == "completed", result.error
    assert result[TOTAL] == sum(range(10))
    assert result[ACKED] == list(range(6, 10))  # the six acked before the stop are not again


# -- an element follows the last one -------------------------------------------------------------


@pytest.mark.parametrize("sequence", [2, 4, 0], ids=["repeated", "gap", "zero"])
def test_an_element_that_does_not_follow_the_last_sequence_is_refused(sequence: int) -> None:
    # covers: S-2, S-3
    # A source's elements are numbered 1, 2, 3, … with no gap and no repeat: an append of any
    # other sequence (a caller that combines the record mutations by hand) changes nothing.
    source = Source("a" * 32, "tail", "events")
    proposal = Proposal(RunRecord(run_id="r1"))
    open_source(proposal, source, again=False)
    for n in (1, 2):
        append(
            proposal,
            source,
            sequence=n,
            data=b"x",
            digest="",
            cursor=str(n).encode(),
            resumable=True,
            groups=("load",),
        )
    before = copy_record(proposal.record)
    with pytest.raises(DurableError, match=f"element {sequence} does not follow element 2"):
        append(
            proposal,
            source,
            sequence=sequence,
            data=b"y",
            digest="",
            cursor=b"9",
            resumable=True,
            groups=("load",),
        )
    assert proposal.record == before


# -- save before delivery ----------------------------------------------------------------------


class GatedStore:
    """A real store that holds the save of ``tail``'s element ``n`` (the first save whose
    record has sent ``n`` elements) until ``gates[n]`` is set; ``saving[n]`` is set once that
    save has started."""

    def __init__(self, store: Any, held: tuple[int, ...]) -> None:
        self.store = store
        self.gates = {n: threading.Event() for n in held}
        self.saving = {n: threading.Event() for n in held}

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        return _GatedSession(self, self.store.acquire(run_id, timeout))

    def open_all(self) -> None:
        for gate in self.gates.values():
            gate.set()

    def close(self) -> None:
        self.store.close()


class _GatedSession:
    def __init__(self, owner: GatedStore, session: Any) -> None:
        self._owner = owner
        self._session = session
        self.run_id = session.run_id

    def load(self) -> RunRecord:
        return self._session.load()

    def save(self, record: RunRecord, expected_revision: int) -> None:
        owner = self._owner
        sent = max(
            (e.last_sequence for e in record.streams.values() if e.node_id == "tail"), default=0
        )
        for n, gate in owner.gates.items():
            if sent == n and not gate.is_set():
                owner.saving[n].set()
                assert gate.wait(60), "the test never opened the gate"
        self._session.save(record, expected_revision)

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> _GatedSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def test_an_element_reaches_no_reader_before_its_own_save_returned(tmp_path: Path) -> None:
    # covers: S-2, S-1
    # Element 1 is saved on its own; element 2 is queued while that save is held, and its own
    # save is held in turn. When the save of element 1 returns, ``sum`` gets element 1 only:
    # the test looks after ``tail`` has let the event loop run every woken task many times
    # over, while the save of element 2 is still held. Once it returns, ``sum`` gets the rest.
    store = GatedStore(FileStore(tmp_path / "store"), held=(1, 2))
    seen: list[int] = []
    queued = threading.Event()  # element 2 is queued behind the held save of element 1
    settled = threading.Event()  # sum had every chance to read what it was handed
    waiting, first_read = asyncio.Event(), asyncio.Event()
    g = Graph("gated", inputs=[COUNT])

    @g.node("tail", requires=[COUNT], provides=[EVENTS])
    async def tail(rc: Any) -> None:
        w = rc.writer(EVENTS)
        await w.open()
        await waiting.wait()
        await w.send_at(0, 1)  # queued; its save is held
        assert await asyncio.to_thread(store.saving[1].wait, 60)
        await w.send_at(1, 2)  # queued behind it: a save of its own
        queued.set()
        await first_read.wait()
        for _ in range(20):
            await asyncio.sleep(0)  # the loop runs every ready task (sum, if handed more)
        settled.set()
        for i in range(2, rc.get(COUNT)):
            await w.send_at(i, i + 1)

    @g.node("sum", requires=[EVENTS], provides=[TOTAL])
    async def total(rc: Any) -> None:
        reader = rc.reader(EVENTS)
        waiting.set()
        async for x in reader:
            seen.append(x)
            first_read.set()
        rc.set(TOTAL, sum(seen))

    looked: list[tuple[str, list[int]]] = []

    def look() -> None:
        try:
            assert store.saving[1].wait(60) and queued.wait(60)
            looked.append(("element 1 held", list(seen)))
            store.gates[1].set()
            assert store.saving[2].wait(60) and settled.wait(60)
            looked.append(("element 2 held", list(seen)))
        finally:
            store.open_all()

    looker = threading.Thread(target=look)
    looker.start()
    try:
        result = Runtime(store).run(g, run_id="r1", version="v1", inputs={COUNT: 4})
    finally:
        store.open_all()
        looker.join()
        store.close()
    # No reader had an element while its save was held, even once the one before was saved.
    assert looked == [("element 1 held", []), ("element 2 held", [0])]
    assert result.status == "completed", result.error
    assert result[TOTAL] == 0 + 1 + 2 + 3 and seen == [0, 1, 2, 3]


# -- A save's bytes follow what changed, not the group's backlog --------------------------------

BLOBS = Key("blobs", bytes, stream=True, capacity=1_000)
SEEN = Key("seen", int)


def _last_save_bytes(store: Any, location: Path) -> int | None:
    """The bytes of the store's last kept delta (None: the last save wrote the whole record)."""
    if isinstance(store, FileStore):
        journals = list(location.glob("*.journal"))
        return journals[0].stat().st_size if journals else None
    import sqlite3

    with sqlite3.connect(location / "runs.sqlite") as db:
        row = db.execute(  # base is decimal TEXT: order by its number
            "SELECT length(delta) FROM durable_deltas ORDER BY length(base) DESC, base DESC"
        ).fetchone()
    return None if row is None else row[0]


# covers: S-2, R-STORE-3
@pytest.mark.parametrize("kind", ["sqlite", "file"])
def test_an_ack_of_a_long_backlog_saves_the_ack_not_the_backlog(kind: str, tmp_path: Path) -> None:
    from durable_sqlitestore import SQLiteStore

    store = SQLiteStore(tmp_path / "runs.sqlite") if kind == "sqlite" else FileStore(tmp_path)
    sent = asyncio.Event()
    growth: list[int] = []
    g = Graph("backlog", inputs=[COUNT])

    @g.node("tail", requires=[COUNT], provides=[BLOBS])
    async def tail(rc: Any) -> None:
        writer = rc.writer(BLOBS)
        for n in range(rc.get(COUNT)):
            await writer.send(bytes([n % 256]) * 2_048)
        sent.set()

    @g.node("load", requires=[BLOBS], provides=[SEEN])
    async def load_(rc: Any) -> None:
        await sent.wait()
        # Every element received (so saved) and none acked: 400 x 2 KiB pending for this
        # group. Then acked one at a time: the odd ones first, out of order, then the rest.
        deliveries = [delivery async for delivery in rc.reader(BLOBS).deliveries()]
        for delivery in deliveries[1::2] + deliveries[0::2]:
            before = await asyncio.to_thread(_last_save_bytes, store, tmp_path)
            await delivery.ack()  # saved when it returns
            after = await asyncio.to_thread(_last_save_bytes, store, tmp_path)
            if before is not None and after is not None:
                growth.append(after - before if kind == "file" else after)
        rc.set(SEEN, len(deliveries))

    result = Runtime(store).run(g, run_id="r1", version="v1", inputs={COUNT: 400})
    assert result.status == "completed", result.error
    assert result[SEEN] == 400
    # Each ack's save is a small delta; writing the group's entry whole would have been up
    # to 400 x 2.7 KB of base64 (and the store would then have folded at nearly every save).
    assert len(growth) > 300, len(growth)
    assert max(growth) < 1_500, sorted(growth)[-5:]


# covers: S-2, C-1
def test_an_int_element_is_saved_as_its_codec_encodes_it_whatever_its_size() -> None:
    import hashlib

    values = [0, -7, 42, 10**599 - 1, -(10**599) + 1, 10**600, -(10**700)]
    numbers = Key("numbers", int, stream=True, capacity=len(values) + 1)
    token, seen = CancelToken(), []
    g = Graph("ints")

    @g.node("produce", provides=[numbers])
    async def produce(rc: Any) -> None:
        w = rc.writer(numbers)
        for i, value in enumerate(values[w.position or 0 :], start=w.position or 0):
            await w.send_at(value, i + 1)

    @g.node("read", requires=[numbers])
    async def read(rc: Any) -> None:
        async for d in rc.reader(numbers).deliveries():
            seen.append(d.value)
            if len(seen) == len(values) and token is not None:
                token.cancel()  # nothing acked: every element stays pending in the record
                await asyncio.sleep(10)
            elif len(seen) > len(values):
                await d.ack()

    store = MemoryStore()
    result = Runtime(store).run(g, run_id="r1", version="v1", inputs={}, cancel=token)
    assert result.status == "canceled"
    codec = Codecs.default().lookup(int)
    with store.acquire("r1") as session:
        pending = entry(session.load(), "read").pending
    assert [p.data for p in pending] == [codec.encode(v) for v in values]
    assert [p.digest for p in pending] == [hashlib.sha256(p.data).hexdigest() for p in pending]
    token = None  # the resumed reader acks what it reads again
    result = Runtime(store).resume(g, run_id="r1", version="v1", inputs={})
    assert result.status == "completed", result.error
    assert seen[len(values) :] == values and [type(v) for v in seen[len(values) :]] == [
        type(v) for v in values
    ]
