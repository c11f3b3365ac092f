"""Streams: one producer, reading groups in order, back-pressure, end and failure (G-10)."""

import asyncio
import contextlib
import functools
import itertools
import threading
import time

import pytest

from durable_core import (
    Graph,
    In,
    Key,
    NodeFailedError,
    Out,
    Retry,
    SlotError,
    Stream,
    execute,
)
from durable_core.graph.checkpoint import AckFuture
from durable_core.graph.waits import sleep_until
from tests.bounded import returns_within
from tests.durable_core.graph.support import MemoryCheckpointer

START = Key("start", int)
LINES = Key("lines", str, stream=True, capacity=4)
COUNT_A, COUNT_S, TOTAL = Key("count_a", int), Key("count_s", int), Key("total", int)


def producer_graph(count, *, sync_producer=False):
    g = Graph("g", inputs=[START])
    if sync_producer:

        @g.node("produce", requires=[START], provides=[LINES])
        def produce(rc):
            writer = rc.writer(LINES)
            for i in range(count):
                writer.send(f"line {i}")

    else:

        @g.node("produce", requires=[START], provides=[LINES])
        async def produce(rc):
            writer = rc.writer(LINES)
            for i in range(count):
                await writer.send(f"line {i}")

    return g


# covers: G-10
@pytest.mark.parametrize("sync_producer", [False, True])
def test_every_reading_group_gets_every_element_in_order(sync_producer):
    got = {"async": [], "sync": []}
    g = producer_graph(50, sync_producer=sync_producer)

    @g.node("read_async", requires=[LINES], provides=[COUNT_A])
    async def read_async(rc):
        async for line in rc.reader(LINES):
            got["async"].append(line)
        rc.set(COUNT_A, len(got["async"]))

    @g.node("read_sync", requires=[LINES], provides=[COUNT_S])
    def read_sync(rc):
        for line in rc.reader(LINES):
            got["sync"].append(line)
        rc.set(COUNT_S, len(got["sync"]))

    result = execute(g, {START: 0}, max_running=4)
    assert result.status == "completed"
    expected = [f"line {i}" for i in range(50)]
    assert got == {"async": expected, "sync": expected}
    assert result[COUNT_A] == result[COUNT_S] == 50
    assert isinstance(result[LINES], Stream) and result[LINES].state == "completed"
    assert result[LINES].sequence == 50


# covers: G-10
def test_back_pressure_bounds_the_buffer_per_group():
    timeline = []
    g = Graph("g", inputs=[START])

    @g.node("produce", requires=[START], provides=[LINES])
    async def produce(rc):
        writer = rc.writer(LINES)
        for i in range(20):
            await writer.send(str(i))
            timeline.append(("sent", i))

    @g.node("read", requires=[LINES], provides=[COUNT_A])
    async def read(rc):
        async for line in rc.reader(LINES):
            timeline.append(("read", int(line)))
            await asyncio.sleep(0.002)

    execute(g, {START: 0})
    sent = received = 0
    for kind, _ in timeline:
        if kind == "sent":
            sent += 1
        else:
            received += 1
        assert sent - received <= LINES.capacity  # never more than capacity ahead of the reader
    assert sent == received == 20


# covers: G-10
def test_a_held_back_producer_resumes_once_half_the_buffer_is_free():
    """A producer waiting on a full buffer is woken when half of it is free, not at the first
    free place: it then sends a run of elements (which share saves in a durable run)."""
    wide = Key("wide", str, stream=True, capacity=8)
    gaps: list[int] = []
    read = [0]
    g = Graph("g", inputs=[START])

    @g.node("produce", requires=[START], provides=[wide])
    async def produce(rc):
        writer = rc.writer(wide)
        for i in range(40):
            await writer.send(str(i))
            gaps.append(i + 1 - read[0])  # elements sent and not read yet

    @g.node("read", requires=[wide], provides=[COUNT_A])
    async def read_(rc):
        async for _ in rc.reader(wide):
            read[0] += 1
            await asyncio.sleep(0.002)

    execute(g, {START: 0})
    assert max(gaps) == wide.capacity
    after_full = [b for a, b in itertools.pairwise(gaps) if a == wide.capacity]
    assert after_full  # the producer was held back
    # Woken with half the buffer free: the next send finds at most half of it taken.
    assert all(gap <= wide.capacity // 2 + 1 for gap in after_full), gaps


# covers: G-10, G-7
def test_async_stream_waits_give_the_slot_back():
    g = producer_graph(30)

    @g.node("read", requires=[LINES], provides=[COUNT_A])
    async def read(rc):
        n = 0
        async for _ in rc.reader(LINES):
            n += 1
        rc.set(COUNT_A, n)

    result = execute(g, {START: 0}, max_running=1)  # producer and reader share one slot
    assert result[COUNT_A] == 30


class _HeldAcks(MemoryCheckpointer):
    """A checkpointer whose acks stay unsaved until the test answers them (``answer``)."""

    def __init__(self) -> None:
        super().__init__()
        self.acks: list[AckFuture] = []

    def queue_ack(self, attempt, key, stream, group, generation, sequences):
        future = AckFuture(loop=asyncio.get_running_loop())
        self.acks.append(future)
        return future

    def answer(self) -> None:
        for future in self.acks:
            if not future.done():
                future.set_result(None)


# covers: G-7, S-2
@pytest.mark.parametrize("wait", ["await", "queued"])
def test_an_async_body_awaiting_its_ack_gives_the_slot_back(wait):
    # One slot. The reader acks its only element, tells "other" so through a stream, then
    # waits: "other" can run only while that wait does not hold the slot, and it is what
    # answers the ack. An ack that is not awaited leaves the reader holding its slot, so
    # "other" runs once the reader ended.
    cp = _HeldAcks()
    g = producer_graph(1)
    signal = Key("signal", int, stream=True)
    order = []

    @g.node("read", requires=[LINES], provides=[COUNT_A, signal])
    async def read(rc):
        async for d in rc.reader(LINES).deliveries():
            future = d.ack()
            await rc.writer(signal).send(1)
            if wait == "await":
                await future
            else:
                await asyncio.sleep(0.05)
        order.append("read ends")
        rc.set(COUNT_A, 1)

    @g.node("other", requires=[signal], provides=[TOTAL])
    async def other(rc):
        async for _ in rc.reader(signal):
            order.append("other runs")
            cp.answer()
        rc.set(TOTAL, 0)

    result = returns_within(lambda: execute(g, {START: 0}, max_running=1, checkpointer=cp), 10)
    assert result.status == "completed", result.error
    assert len(cp.acks) == 1 and cp.acks[0].done()
    if wait == "await":
        assert order == ["other runs", "read ends"]
    else:
        assert order == ["read ends", "other runs"]


# covers: G-7, S-2
def test_a_task_the_body_left_waiting_on_its_ack_takes_no_slot_after_the_body_ended():
    # One slot. The reader's helper task awaits the ack and gives the slot back; the reader
    # returns meanwhile. When the ack is answered, the ended try must not take the slot
    # again: "last" needs it.
    cp = _HeldAcks()
    g = producer_graph(1)
    signal = Key("signal", int, stream=True)
    helpers = []

    @g.node("read", requires=[LINES], provides=[COUNT_A, signal])
    async def read(rc):
        async for d in rc.reader(LINES).deliveries():
            future = d.ack()

            async def wait_for_it(future=future):
                await future

            helpers.append(asyncio.ensure_future(wait_for_it()))
            await asyncio.sleep(0)  # the helper starts waiting while this try runs
            await rc.writer(signal).send(1)
        rc.set(COUNT_A, 1)

    @g.node("other", requires=[signal], provides=[TOTAL])
    async def other(rc):
        async for _ in rc.reader(signal):
            pass
        cp.answer()
        await asyncio.sleep(0.01)  # the helper's wait ends while this holds the slot
        rc.set(TOTAL, 0)

    @g.node("last", requires=[COUNT_A, TOTAL], provides=[])
    async def last(rc):
        await helpers[0]

    result = returns_within(lambda: execute(g, {START: 0}, max_running=1, checkpointer=cp), 10)
    assert result.status == "completed", result.error
    assert helpers[0].done() and cp.acks[0].done()


class _SlowAcks(MemoryCheckpointer):
    """A checkpointer whose acks are answered ``delay`` seconds after they are made."""

    delay = 0.3

    def queue_ack(self, attempt, key, stream, group, generation, sequences):
        loop = asyncio.get_running_loop()
        future = AckFuture(loop=loop)
        loop.call_later(self.delay, lambda: future.done() or future.set_result(None))
        return future


class _Working:
    """Which bodies do work at once: ``with working("name"):`` around the work."""

    def __init__(self) -> None:
        self.now: set[str] = set()
        self.seen: list[frozenset[str]] = []

    @contextlib.contextmanager
    def __call__(self, name):
        self.now.add(name)
        self.seen.append(frozenset(self.now))
        try:
            yield
        finally:
            self.now.discard(name)


def _slow_graph(read, working, aspects=(), pause=0.0):
    """A producer of two elements and a finished flag, the reader ``read``, and two other
    bodies that each work 0.2 s once the producer ended (after ``pause`` seconds without a
    slot)."""
    g = Graph("g", inputs=[START])
    fin = Key("fin", int)
    events = Key("events", int, stream=True)

    @g.node("produce", requires=[START], provides=[events, fin])
    async def produce(rc):
        w = rc.writer(events)
        await w.send(1)
        await w.send(2)
        rc.set(fin, 1)

    body = functools.partial(read, events=events)
    g.add_node("read", body, requires=[events], provides=[COUNT_A], aspects=aspects)
    for name in ("other1", "other2"):

        async def other(rc, name=name):
            if pause:
                await sleep_until(rc, time.time() + pause)
            with working(name):
                await asyncio.sleep(0.2)

        g.add_node(name, other, requires=[fin], provides=[])
    return g


# covers: G-7, S-2
def test_an_ack_awaited_by_a_task_the_body_started_keeps_the_slot():
    # The reader handles its deliveries in tasks of its own, each awaiting its ack when done:
    # the first awaits at once while the second works, so the body keeps its slot, and with
    # one slot no other body works beside it.
    working = _Working()

    async def read(rc, events):
        async def handle(d):
            if d.sequence > 1:  # the first one awaits its ack while this one works
                with working("read"):
                    await asyncio.sleep(0.2)
            await d.ack()

        taken = [d async for d in rc.reader(events).deliveries()]
        await asyncio.gather(*(handle(d) for d in taken))
        rc.set(COUNT_A, len(taken))

    g = _slow_graph(read, working)
    result = returns_within(
        lambda: execute(g, {START: 0}, max_running=1, checkpointer=_SlowAcks()), 10
    )
    assert result.status == "completed", result.error
    assert max(len(s) for s in working.seen) == 1, working.seen


# covers: G-7, S-2
def test_a_bounded_ack_wait_that_times_out_takes_the_slot_back_at_once():
    # The reader gives its slot back while it awaits the ack, bounded by a timeout, then
    # works on. It takes the slot back at once, beyond the limit while another body holds
    # it, so that no further body starts until one ends: it works beside one of the others
    # at most, never both.
    working = _Working()

    async def read(rc, events):
        async for d in rc.reader(events).deliveries():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.05):
                    await d.ack()
            with working("read"):
                await asyncio.sleep(0.3)
            break
        rc.set(COUNT_A, 1)

    g = _slow_graph(read, working)
    result = returns_within(
        lambda: execute(g, {START: 0}, max_running=1, checkpointer=_SlowAcks()), 10
    )
    assert result.status == "completed", result.error
    beside = {name for s in working.seen if "read" in s for name in s - {"read"}}
    assert len(beside) <= 1, working.seen


# covers: G-7, S-2, G-8
def test_a_task_left_by_a_failed_try_awaiting_its_ack_takes_nothing_from_the_next_try():
    # Try 1 acks, leaves a task that awaits the ack a little later, and fails. That await
    # happens during try 2, which must keep its slot: with one slot, no other body works
    # beside try 2.
    working = _Working()
    tries, left = [], []

    async def read(rc, events):
        tries.append(1)
        if len(tries) == 1:
            async for d in rc.reader(events).deliveries():
                future = d.ack()

                async def later(future=future):
                    await asyncio.sleep(0.05)
                    await future

                left.append(asyncio.ensure_future(later()))
                raise RuntimeError("try 1 fails")
        with working("read"):
            await asyncio.sleep(0.3)
        rc.set(COUNT_A, 1)

    g = _slow_graph(read, working, aspects=[Retry(2)], pause=0.05)
    result = returns_within(
        lambda: execute(g, {START: 0}, max_running=1, checkpointer=_SlowAcks()), 10
    )
    assert result.status == "completed", result.error
    assert len(tries) == 2
    assert max(len(s) for s in working.seen) == 1, working.seen


# covers: G-10
def test_an_empty_stream_and_a_skipped_stream():
    g = Graph("g", inputs=[START])
    EMPTY = Key("empty", str, stream=True)
    NEVER = Key("never", str, stream=True)
    seen = {}

    @g.node("produce", requires=[START], provides=[EMPTY, NEVER])
    async def produce(rc):
        rc.writer(EMPTY)  # asked for a writer, sent nothing: an empty stream

    @g.node("read", requires=[EMPTY, NEVER], provides=[COUNT_A])
    async def read(rc):
        seen["empty"] = [x async for x in rc.reader(EMPTY)]
        seen["never_skipped"] = rc.skipped(NEVER)
        with pytest.raises(SlotError, match="'never' was skipped"):
            rc.reader(NEVER)

    result = execute(g, {START: 0})
    assert result.status == "completed"
    assert seen == {"empty": [], "never_skipped": True}
    assert result.skipped(NEVER) and not result.skipped(EMPTY)


# covers: G-10
def test_a_producer_failure_reaches_readers_as_an_error():
    caught = []
    g = Graph("g", inputs=[START])

    @g.node("produce", requires=[START], provides=[LINES])
    async def produce(rc):
        writer = rc.writer(LINES)
        await writer.send("one")
        await writer.send("two")
        await asyncio.sleep(0.05)
        raise OSError("source went away")

    @g.node("read", requires=[LINES], provides=[COUNT_A])
    async def read(rc):
        got = []
        try:
            async for line in rc.reader(LINES):
                got.append(line)
        except NodeFailedError as error:
            caught.append((got, error.path, error.__cause__))
            raise

    result = execute(g, {START: 0})
    assert result.status == "failed"
    assert result.error.path == "produce"  # the run's error is the producer's
    assert len(caught) == 1
    got, path, cause = caught[0]
    assert got == ["one", "two"] and path == "produce"
    assert isinstance(cause, OSError)


# covers: G-10
def test_a_reader_that_stops_early_does_not_hold_the_producer_back():
    g = producer_graph(100)

    @g.node("peek", requires=[LINES], provides=[COUNT_A])
    async def peek(rc):
        reader = rc.reader(LINES)
        rc.set(COUNT_A, len(await reader.receive()))

    @g.node("never_reads", requires=[LINES], provides=[COUNT_S])
    def never_reads(rc):
        rc.set(COUNT_S, 0)

    @g.node("all", requires=[LINES], provides=[TOTAL])
    async def all_(rc):
        rc.set(TOTAL, len([x async for x in rc.reader(LINES)]))

    result = execute(g, {START: 0})
    assert result.status == "completed"
    assert result[TOTAL] == 100


# covers: G-10, G-8
def test_a_retried_producer_continues_its_stream():
    g = Graph("g", inputs=[START])

    @g.node("produce", requires=[START], provides=[LINES], aspects=[Retry(2)])
    async def produce(rc):
        writer = rc.writer(LINES)
        for i in range(writer.position, 6):
            await writer.send(str(i))
            if i == 2 and rc.attempt.index == 1:
                raise ConnectionError("dropped after 3 elements")

    @g.node("read", requires=[LINES], provides=[COUNT_A])
    async def read(rc):
        rc.set(COUNT_A, int("".join([x async for x in rc.reader(LINES)])))

    result = execute(g, {START: 0})
    assert result[COUNT_A] == 12345  # 0..5, each once, in order


# covers: G-10, G-9
def test_streams_cross_sub_boundaries_in_both_directions():
    CHILD_IN = Key("child_lines", str, stream=True, capacity=4)
    CHILD_OUT = Key("upper", str, stream=True, capacity=4)
    UPPER = Key("upper_lines", str, stream=True, capacity=4)
    child = Graph("child", inputs=[CHILD_IN])

    @child.node("shout", requires=[CHILD_IN], provides=[CHILD_OUT])
    async def shout(rc):
        writer = rc.writer(CHILD_OUT)
        async for line in rc.reader(CHILD_IN):
            await writer.send(line.upper())

    g = producer_graph(20)
    g.sub("child", child, bindings=[In(LINES, CHILD_IN), Out(CHILD_OUT, UPPER)])

    @g.node("collect", requires=[UPPER], provides=[TOTAL])
    async def collect(rc):
        lines = [x async for x in rc.reader(UPPER)]
        assert lines == [f"LINE {i}" for i in range(20)]
        rc.set(TOTAL, len(lines))

    result = execute(g, {START: 0}, max_running=2)
    assert result.status == "completed"
    assert result[TOTAL] == 20


# covers: G-10
def test_a_stream_as_root_input_and_element_types():
    g = Graph("g", inputs=[LINES])

    @g.node("count", requires=[LINES], provides=[TOTAL])
    def count(rc):
        rc.set(TOTAL, sum(1 for _ in rc.reader(LINES)))

    result = execute(g, {LINES: Stream.replay(LINES, ["a", "b", "c"])})
    assert result[TOTAL] == 3

    bad = producer_graph(0)

    @bad.node("x", requires=[START], provides=[Key("nums", int, stream=True)])
    async def x(rc):
        await rc.writer(Key("nums", int, stream=True)).send("not an int")

    result = execute(bad, {START: 0})
    assert result.status == "failed"
    assert isinstance(result.error.__cause__, SlotError)


# covers: G-10
def test_stream_keys_are_not_values():
    g = Graph("g", inputs=[START])

    @g.node("produce", requires=[START], provides=[LINES])
    def produce(rc):
        with pytest.raises(SlotError, match="is a stream"):
            rc.set(LINES, "x")
        rc.writer(LINES).send("x")
        with pytest.raises(SlotError, match="already written"):
            rc.skip(LINES)

    @g.node("read", requires=[LINES], provides=[TOTAL])
    def read(rc):
        with pytest.raises(SlotError, match="is a stream"):
            rc.get(LINES)
        rc.set(TOTAL, len(list(rc.reader(LINES))))

    result = execute(g, {START: 0})
    assert result.status == "completed" and result[TOTAL] == 1


# covers: G-10, G-6
def test_canceling_a_run_unblocks_plain_bodies_waiting_on_a_stream():
    g = Graph("g", inputs=[START])

    received = threading.Event()

    @g.node("produce", requires=[START], provides=[LINES])
    async def produce(rc):
        await rc.writer(LINES).send("only one")
        # fail once the reader got the element and waits on the stream for the next one
        deadline = time.monotonic() + 60
        while not received.is_set():
            assert time.monotonic() < deadline, "the reader never got the element"
            await asyncio.sleep(0.005)
        raise RuntimeError("stop")

    @g.node("read", requires=[LINES], provides=[TOTAL])
    def read(rc):
        for _ in rc.reader(LINES):
            received.set()

    # a reader left waiting would never return: the bound fails the test instead of hanging
    result = returns_within(lambda: execute(g, {START: 0}))
    assert result.status == "failed" and result.error.path == "produce"


# covers: G-10, G-8, S-3
def test_send_at_positions_survive_a_retry_and_deliveries_carry_sequences():
    g = Graph("g", inputs=[START])
    starts = []

    @g.node("produce", requires=[START], provides=[LINES], aspects=[Retry(2)])
    async def produce(rc):
        writer = rc.writer(LINES)
        starts.append(writer.position)
        for i in range(writer.position, 6):
            await writer.send_at(str(i), i + 1)
            if i == 2 and rc.attempt.index == 1:
                raise ConnectionError("dropped after 3 elements")

    kept = []

    @g.node("read", requires=[LINES], provides=[COUNT_A])
    async def read(rc):
        async for d in rc.reader(LINES).deliveries():
            kept.append((d.sequence, d.value, d.generation))
            await d.ack()
        rc.set(COUNT_A, len(kept))

    result = execute(g, {START: 0})
    assert result[COUNT_A] == 6
    assert starts == [0, 3]
    assert kept == [(i + 1, str(i), 1) for i in range(6)]
