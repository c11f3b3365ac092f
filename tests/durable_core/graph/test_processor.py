"""Processor nodes in the engine: one transaction per message, per-message Retry, batches,
stop and finish, and the seam calls a checkpointer sees (S-7, S-8, G-12)."""

import asyncio
import gc
import threading
import time
import weakref

import attrs
import pytest

from durable_core import (
    CancelToken,
    Checkpointer,
    Graph,
    GraphError,
    Key,
    Managed,
    MessageAttempt,
    MessageFailedError,
    NodeFailedError,
    Retry,
    RetryExhaustedError,
    SlotError,
    Stream,
    StreamState,
    Timeout,
    Values,
    execute,
)
from durable_core.graph.processor import HOP_SECONDS


@attrs.frozen
class Tally:
    count: int = 0
    total: int = 0
    seen: tuple[int, ...] = ()

    def add(self, n: int) -> "Tally":
        return Tally(self.count + 1, self.total + n, (*self.seen, n))


@attrs.define
class Box:  # a mutable state, to show that a failed try's in-place changes are not kept
    items: list[int] = attrs.Factory(list)


NUMBERS = Key("numbers", int, stream=True, capacity=4)
LIMIT = Key("limit", int)
TOTALS = Key("totals", Tally)
FIRST = Key("first", int)
EVENS = Key("evens", int, stream=True, capacity=2)
COLLECTED = Key("collected", list)


def producer_graph(name="g"):
    """A graph whose one node sends 1 … ``LIMIT`` to ``NUMBERS``."""
    g = Graph(name, inputs=[LIMIT])

    @g.node("produce", requires=[LIMIT], provides=[NUMBERS])
    async def produce(rc):
        writer = rc.writer(NUMBERS)
        for n in range(1, rc.get(LIMIT) + 1):
            await writer.send(n)

    return g


def numbers_graph(name="g", **processor_options):
    g = producer_graph(name)

    @g.node("collect", requires=[EVENS], provides=[COLLECTED])
    async def collect(rc):
        rc.set(COLLECTED, [n async for n in rc.reader(EVENS)])

    return g


class Recorder(Checkpointer):
    """Records the processor seam calls; optional answers for open_processor/begin_message."""

    def __init__(self, managed=None, spent=None):
        self.calls = []
        self.managed = managed
        self.spent = spent or {}  # sequence -> tries already spent before "this run"

    async def open_processor(self, attempt, processor, input):
        assert input is None or input.key == NUMBERS
        self.calls.append(("open", processor.id))
        return self.managed

    async def begin_message(self, attempt, message):
        spent = self.spent.get(message.sequence, 0)
        if spent >= message.index:
            message = attrs.evolve(message, index=spent + 1)
        self.calls.append(("begin", message.sequence, message.index, message.limit))
        return message

    async def fail_message(self, message, error):
        self.calls.append(("fail", message.sequence, message.index, type(error).__name__))

    async def commit_messages(self, attempt, commit):
        self.calls.append(
            (
                "commit",
                tuple(m.sequence for m in commit.messages),
                commit.state,
                dict(commit.values.ready),
                {k: list(v) for k, v in commit.sends.items()},
                commit.stopped,
                commit.final,
            )
        )


def add_tally(g, **options):
    @g.processor(
        "tally",
        input=NUMBERS,
        state=Tally,
        initial=Tally(),
        provides=[TOTALS, FIRST, EVENS],
        **options,
    )
    def tally(rc, state, n):
        if n == 1:
            rc.set(FIRST, n)
        if n % 2 == 0:
            rc.writer(EVENS).send(n)
        return state.add(n)

    @tally.finish
    def finish(rc, state):
        rc.set(TOTALS, state)

    return tally


def handler_of(kind, body):
    """``body`` as a processor's handler of ``kind``: a plain function, or an async one that
    calls it (the two paths of the message loop: hops to a thread, and awaited tries)."""
    if kind == "def":
        return body

    async def handler(rc, state, n):
        return body(rc, state, n)

    return handler


KINDS = ["def", "async"]


# covers: S-7, S-8
def test_each_message_commits_its_state_values_and_sends_together():
    g = numbers_graph()
    add_tally(g)
    cp = Recorder()
    result = execute(g, {LIMIT: 4}, checkpointer=cp)
    assert result.status == "completed", result.error
    assert result[TOTALS] == Tally(4, 10, (1, 2, 3, 4))
    assert result[FIRST] == 1 and result[COLLECTED] == [2, 4]
    commits = [c for c in cp.calls if c[0] == "commit"]
    assert commits == [
        ("commit", (1,), Tally(1, 1, (1,)), {"first": 1}, {}, False, False),
        ("commit", (2,), Tally(2, 3, (1, 2)), {"first": 1}, {"evens": [(1, 2)]}, False, False),
        ("commit", (3,), Tally(3, 6, (1, 2, 3)), {"first": 1}, {}, False, False),
        (
            "commit",
            (4,),
            Tally(4, 10, (1, 2, 3, 4)),
            {"first": 1},
            {"evens": [(2, 4)]},
            False,
            False,
        ),
        (
            "commit",
            (),
            Tally(4, 10, (1, 2, 3, 4)),
            {"first": 1, "totals": result[TOTALS]},
            {},
            False,
            True,
        ),
    ]
    assert cp.calls[0] == ("open", "tally")


# covers: S-8
def test_readers_see_sends_only_after_their_commit_returned():
    g = Graph("g", inputs=[LIMIT])
    received = []

    @g.node("produce", requires=[LIMIT], provides=[NUMBERS])
    async def produce(rc):
        writer = rc.writer(NUMBERS)
        for n in range(1, rc.get(LIMIT) + 1):
            await writer.send(n)

    @g.node("collect", requires=[EVENS], provides=[COLLECTED])
    async def collect(rc):
        async for n in rc.reader(EVENS):
            received.append(n)
        rc.set(COLLECTED, list(received))

    add_tally(g)

    class Watch(Recorder):
        async def commit_messages(self, attempt, commit):
            sent = [element for _, element in commit.sends.get("evens", ())]
            for _ in range(3):
                assert not set(sent) & set(received)  # none of it is visible yet
                await asyncio.sleep(0.005)  # readers run meanwhile
            await super().commit_messages(attempt, commit)

    result = execute(g, {LIMIT: 6}, checkpointer=Watch())
    assert result.status == "completed", result.error
    assert result[COLLECTED] == [2, 4, 6]


# covers: S-7
def test_a_failed_try_discards_its_staged_work_and_the_retry_starts_from_the_committed_state():
    g = numbers_graph()
    failures = []

    @g.processor(
        "tally", input=NUMBERS, state=Box, initial=Box(), provides=[EVENS, FIRST], retry=Retry(3)
    )
    def tally(rc, state, n):
        state.items.append(n)  # in place, on purpose
        if n % 2 == 0:
            rc.writer(EVENS).send(n)
        if n == 2 and len(failures) < 2:
            rc.set(FIRST, 99)
            failures.append(n)
            raise ValueError("flaky")
        return state

    @tally.finish
    def finish(rc, state):
        rc.set(FIRST, state.items[0])

    cp = Recorder()
    result = execute(g, {LIMIT: 3}, checkpointer=cp)
    assert result.status == "completed", result.error
    assert result[COLLECTED] == [2]  # the failed tries' sends never reached the reader
    assert result[FIRST] == 1  # the failed try's set was discarded
    final = [c for c in cp.calls if c[0] == "commit"][-1]
    assert final[2] == Box([1, 2, 3])  # in-place changes of failed tries were not kept
    assert [c for c in cp.calls if c[0] in ("begin", "fail") and c[1] == 2] == [
        ("begin", 2, 1, 3),
        ("fail", 2, 1, "ValueError"),
        ("begin", 2, 2, 3),
        ("fail", 2, 2, "ValueError"),
        ("begin", 2, 3, 3),
    ]


# covers: S-7
def test_a_message_whose_budget_is_spent_fails_the_node_and_loses_its_uncommitted_batch():
    g = numbers_graph()

    @g.processor(
        "tally",
        input=NUMBERS,
        state=Tally,
        initial=Tally(),
        provides=[EVENS],
        retry=Retry(2),
        commit_every=3,
        max_delay=60,
    )
    def tally(rc, state, n):
        if n == 5:
            raise KeyError("bad message")
        return state.add(n)

    cp = Recorder()
    result = execute(g, {LIMIT: 9}, checkpointer=cp)
    assert result.status == "failed"
    assert isinstance(result.error, NodeFailedError) and result.error.path == "tally"
    assert isinstance(result.error.__cause__, KeyError)
    # the poison message is named, with the tries it spent
    assert isinstance(result.error, MessageFailedError)
    assert (result.error.key, result.error.sequence, result.error.tries) == ("numbers", 5, 2)
    assert str(result.error) == (
        "node 'tally' failed on message 5 of 'numbers' after 2 tries: KeyError: 'bad message'"
    )
    assert isinstance(result.error.original, KeyError)
    commits = [c[1] for c in cp.calls if c[0] == "commit"]
    assert commits == [(1, 2, 3)]  # message 4 was staged with 5 and never committed
    assert [c for c in cp.calls if c[0] == "fail"] == [
        ("fail", 5, 1, "KeyError"),
        ("fail", 5, 2, "KeyError"),
    ]


# covers: S-7
def test_a_budget_spent_before_this_run_fails_the_node_without_calling_the_handler():
    g = numbers_graph()
    called = []

    @g.processor(
        "tally", input=NUMBERS, state=Tally, initial=Tally(), provides=[EVENS], retry=Retry(3)
    )
    def tally(rc, state, n):
        called.append(n)
        return state.add(n)

    cp = Recorder(spent={2: 3})
    result = execute(g, {LIMIT: 3}, checkpointer=cp)
    assert result.status == "failed"
    assert isinstance(result.error.__cause__, RetryExhaustedError)
    assert called == [1]
    cp = Recorder(spent={2: 2})  # one try left: it is try 3 of 3
    called.clear()
    assert execute(g, {LIMIT: 3}, checkpointer=cp).status == "completed"
    assert ("begin", 2, 3, 3) in cp.calls


# covers: S-7
def test_a_restored_state_continues_with_the_messages_the_input_still_holds():
    g = Graph("g", inputs=[NUMBERS])
    add_tally(g)

    @g.node("collect", requires=[EVENS], provides=[COLLECTED])
    async def collect(rc):
        rc.set(COLLECTED, [n async for n in rc.reader(EVENS)])

    cp = Recorder(managed=Managed(Tally(2, 30, (10, 20))))
    unacked = Stream.restore(NUMBERS, StreamState(sequence=9, tails={"tally": ((8, 1), (9, 2))}))
    result = execute(g, {NUMBERS: unacked}, checkpointer=cp)
    assert result.status == "completed", result.error
    assert result[TOTALS] == Tally(4, 33, (10, 20, 1, 2))
    assert [c[1] for c in cp.calls if c[0] == "begin"] == [8, 9]  # the stream's own numbers


# covers: S-7, S-10
def test_an_ended_processor_neither_reads_nor_finishes_again():
    g = numbers_graph()
    ran = []

    @g.processor("tally", input=NUMBERS, state=Tally, initial=Tally(), provides=[TOTALS, EVENS])
    def tally(rc, state, n):
        ran.append(n)
        return state.add(n)

    @tally.finish
    def finish(rc, state):
        ran.append("finish")

    class Ended(Recorder):
        async def begin_node(self, scope, node):
            attempt = await super().begin_node(scope, node)
            if node.id == "tally":
                staged = Values({"totals": Tally(1, 5, (5,))}, frozenset())
                attempt = attrs.evolve(attempt, staged=staged)
            return attempt

    cp = Ended(managed=Managed(Tally(1, 5, (5,)), ended=True))
    result = execute(g, {LIMIT: 3}, checkpointer=cp)
    assert result.status == "completed", result.error
    assert ran == [] and result[TOTALS] == Tally(1, 5, (5,))
    assert result[COLLECTED] == []  # the output stream is still published, empty


# covers: S-8
def test_stop_ends_reading_after_the_message_commits_and_runs_finish():
    g = numbers_graph()

    @g.processor("tally", input=NUMBERS, state=Tally, initial=Tally(), provides=[TOTALS, EVENS])
    def tally(rc, state, n):
        if n == 3:
            rc.stop()
        return state.add(n)

    @tally.finish
    def finish(rc, state):
        with pytest.raises(SlotError, match="not finish"):
            rc.stop()
        rc.set(TOTALS, state)

    cp = Recorder()
    result = execute(g, {LIMIT: 50}, checkpointer=cp)
    assert result.status == "completed", result.error
    assert result[TOTALS] == Tally(3, 6, (1, 2, 3))
    commits = [c for c in cp.calls if c[0] == "commit"]
    assert [(c[1], c[5], c[6]) for c in commits] == [
        ((1,), False, False),
        ((2,), False, False),
        ((3,), True, True),  # the stopping message commits with finish: one transaction
    ]


def test_batches_commit_every_n_messages_and_the_rest_at_the_end():
    g = numbers_graph()
    add_tally(g, commit_every=4, max_delay=60)
    cp = Recorder()
    result = execute(g, {LIMIT: 10}, checkpointer=cp)
    assert result[TOTALS].count == 10 and result[COLLECTED] == [2, 4, 6, 8, 10]
    commits = [c for c in cp.calls if c[0] == "commit"]
    assert [c[1] for c in commits] == [(1, 2, 3, 4), (5, 6, 7, 8), (9, 10)]
    assert [c[6] for c in commits] == [False, False, True]  # the last batch is the final one
    assert commits[0][4] == {"evens": [(1, 2), (2, 4)]}  # (output sequence, element)


def test_a_batch_commits_after_max_delay_when_the_input_is_slow():
    g = Graph("slow", inputs=[LIMIT])

    @g.node("produce", requires=[LIMIT], provides=[NUMBERS])
    async def produce(rc):
        writer = rc.writer(NUMBERS)
        for n in range(1, rc.get(LIMIT) + 1):
            await writer.send(n)
            await asyncio.sleep(0.03)

    @g.processor(
        "tally",
        input=NUMBERS,
        state=Tally,
        initial=Tally(),
        provides=[TOTALS],
        commit_every=1000,
        max_delay=0.01,
    )
    async def tally(rc, state, n):
        return state.add(n)

    cp = Recorder()
    assert execute(g, {LIMIT: 5}, checkpointer=cp).status == "completed"
    commits = [c[1] for c in cp.calls if c[0] == "commit"]
    assert len(commits) >= 4  # far from one batch of 1000: the delay bounds the wait
    assert [s for c in commits for s in c] == [1, 2, 3, 4, 5]


# covers: S-7, S-8
def test_delivered_messages_of_a_slow_async_handler_commit_once_max_delay_passed():
    # The messages already delivered are begun together; max_delay still bounds how long
    # the batch being built waits for its commit, between two of them.
    g = Graph("g", inputs=[NUMBERS])

    @g.processor(
        "tally",
        input=NUMBERS,
        state=int,
        initial=0,
        provides=[TOTALS],
        commit_every=1000,
        max_delay=0.03,
    )
    async def tally(rc, state, n):
        await asyncio.sleep(0.02)
        return state + n

    @tally.finish
    def finish(rc, state):
        rc.set(TOTALS, Tally(0, state))

    cp = Recorder()
    numbers = list(range(1, 9))
    result = execute(g, {NUMBERS: Stream.replay(NUMBERS, numbers)}, checkpointer=cp)
    assert result.status == "completed", result.error
    assert result[TOTALS].total == sum(numbers)
    commits = [c[1] for c in cp.calls if c[0] == "commit"]
    assert 3 <= len(commits) <= 6, commits  # about one per two messages, far from one batch
    assert [s for c in commits for s in c] == numbers


def test_async_handlers_and_no_checkpointer():
    g = numbers_graph()

    @g.processor("tally", input=NUMBERS, state=int, initial=0, provides=[TOTALS, EVENS])
    async def tally(rc, state, n):
        await asyncio.sleep(0)
        if n % 2 == 0:
            rc.writer(EVENS).send(n)  # staged: no await
        return state + n

    @tally.finish
    async def finish(rc, state):
        rc.set(TOTALS, Tally(0, state))

    result = execute(g, {LIMIT: 100})
    assert result[TOTALS].total == 5050 and len(result[COLLECTED]) == 50


def test_a_value_is_set_once_across_messages_and_the_state_must_keep_its_type():
    g = numbers_graph()

    @g.processor("tally", input=NUMBERS, state=int, initial=0, provides=[FIRST, EVENS])
    def tally(rc, state, n):
        rc.set(FIRST, n)
        return state + n

    result = execute(g, {LIMIT: 2})
    assert result.status == "failed"
    assert isinstance(result.error.__cause__, SlotError)
    assert "written once" in str(result.error.__cause__)

    g = numbers_graph()

    @g.processor("tally", input=NUMBERS, state=int, initial=0, provides=[EVENS])
    def forgot(rc, state, n):
        state + n  # forgot to return the new state

    result = execute(g, {LIMIT: 2})
    assert isinstance(result.error.__cause__, SlotError)
    assert "returns the new state" in str(result.error.__cause__)


# covers: S-7, S-10
@pytest.mark.parametrize("kind", KINDS)
def test_a_value_set_by_a_message_is_seen_by_the_messages_behind_it(kind):
    # Delivered together, the three messages run in one hop (plain) or one begun run (async).
    g = Graph("g", inputs=[NUMBERS])
    seen = []

    def body(rc, state, n):
        if n == 1:
            rc.set(FIRST, n)
        else:
            seen.append(rc.get(FIRST))
        return state + n

    g.processor("tally", input=NUMBERS, state=int, initial=0, provides=[FIRST], commit_every=10)(
        handler_of(kind, body)
    )
    cp = Recorder()
    result = execute(g, {NUMBERS: Stream.replay(NUMBERS, [1, 2, 3])}, checkpointer=cp)
    assert result.status == "completed", result.error
    assert seen == [1, 1] and result[FIRST] == 1
    assert [c[3] for c in cp.calls if c[0] == "commit"] == [{FIRST.name: 1}]


def test_a_skipped_input_has_no_messages_and_unsent_streams_are_published_empty():
    g = Graph("g", inputs=[LIMIT])

    @g.node("produce", requires=[LIMIT], provides=[NUMBERS])
    def produce(rc):
        rc.skip_node()

    @g.node("collect", requires=[EVENS], provides=[COLLECTED])
    async def collect(rc):
        rc.set(COLLECTED, [n async for n in rc.reader(EVENS)])

    @g.processor(
        "tally",
        input=NUMBERS,
        state=Tally,
        initial=Tally(),
        provides=[TOTALS, EVENS],
        requires=[LIMIT],
    )
    def tally(rc, state, n):  # pragma: no cover - never called
        return state.add(n)

    @tally.finish
    def finish(rc, state):
        rc.set(TOTALS, state.add(rc.get(LIMIT)))

    result = execute(g, {LIMIT: 7})
    assert result[TOTALS] == Tally(1, 7, (7,)) and result[COLLECTED] == []


def test_a_failing_producer_fails_the_processor():
    g = Graph("g", inputs=[LIMIT])

    @g.node("produce", requires=[LIMIT], provides=[NUMBERS])
    async def produce(rc):
        await rc.writer(NUMBERS).send(1)
        raise OSError("disk")

    @g.processor("tally", input=NUMBERS, state=int, initial=0, provides=[FIRST])
    def tally(rc, state, n):
        return state + n

    result = execute(g, {LIMIT: 1})
    assert result.status == "failed" and isinstance(result.error.__cause__, OSError)


def test_a_canceled_plain_handler_is_waited_for_and_sees_canceled():
    g = numbers_graph()
    saw = threading.Event()
    started = threading.Event()

    @g.processor(
        "tally",
        input=NUMBERS,
        state=int,
        initial=0,
        provides=[FIRST, EVENS],
        aspects=[Timeout(0.2)],
    )
    def tally(rc, state, n):
        started.set()
        deadline = time.monotonic() + 60
        while not rc.canceled and time.monotonic() < deadline:
            time.sleep(0.01)
        if rc.canceled:
            saw.set()
        return state

    result = execute(g, {LIMIT: 1})
    assert started.is_set() and saw.is_set()  # execute returned only after the handler ended
    assert result.status == "failed" and isinstance(result.error.__cause__, TimeoutError)


def test_definition_errors():
    g = Graph("g", inputs=[LIMIT])
    with pytest.raises(GraphError, match="stream key"):
        g.processor("p", input=LIMIT, state=int, initial=0)(lambda rc, s, m: s)
    with pytest.raises(GraphError, match="initial state"):
        g.processor("p", input=NUMBERS, state=int, initial="zero")(lambda rc, s, m: s)
    with pytest.raises(GraphError, match="retry=Retry"):
        g.processor("p", input=NUMBERS, state=int, initial=0, aspects=[Retry(2)])
    with pytest.raises(GraphError, match="commit_every"):
        g.processor("p", input=NUMBERS, state=int, initial=0, commit_every=0)(lambda rc, s, m: s)
    with pytest.raises(GraphError, match="max_delay"):
        g.processor("p", input=NUMBERS, state=int, initial=0, max_delay=-1)(lambda rc, s, m: s)
    with pytest.raises(GraphError, match="one stream"):
        g.processor("p", input=NUMBERS, state=int, initial=0, requires=[EVENS])
    with pytest.raises(GraphError, match="generator"):

        @g.processor("p", input=NUMBERS, state=int, initial=0)
        def gen(rc, s, m):
            yield s

    with pytest.raises(GraphError, match="already has a finish"):
        p = g.processor("p2", input=NUMBERS, state=int, initial=0)(lambda rc, s, m: s)
        p.finish(lambda rc, s: None)
        p.finish(lambda rc, s: None)

    wide = Graph("wide", inputs=[NUMBERS], aspects=[Retry(3)])
    wide.processor("p", input=NUMBERS, state=int, initial=0)(lambda rc, s, m: s)
    with pytest.raises(GraphError, match="graph-wide Retry"):
        wide.validate()


def test_the_processor_parameters_are_part_of_the_fingerprint():
    def build(attempts, every=1):
        g = Graph("g", inputs=[NUMBERS])
        g.processor(
            "p", input=NUMBERS, state=int, initial=0, retry=Retry(attempts), commit_every=every
        )(lambda rc, s, m: s)
        return g.fingerprint()

    assert build(3) == build(3)
    assert build(3) != build(4)
    assert build(3) != build(3, every=10)
    g = Graph("g", inputs=[NUMBERS])
    p = g.processor("p", input=NUMBERS, state=int, initial=0)(lambda rc, s, m: s)
    assert g.nodes["p"].processor is p and g.nodes["p"].requires == (NUMBERS,)
    stream = Stream.replay(NUMBERS, [1, 2, 3])
    assert execute(g, {NUMBERS: stream}).status == "completed"


def test_a_checkpointer_answer_of_the_wrong_type_stops_the_run():
    g = numbers_graph()
    add_tally(g)

    class Wrong(Checkpointer):
        async def begin_message(self, attempt, message):
            return "not a message attempt"

    result = execute(g, {LIMIT: 2}, checkpointer=Wrong())
    assert result.status == "failed" and isinstance(result.error, TypeError)

    class Broken(Checkpointer):
        async def commit_messages(self, attempt, commit):
            raise OSError("disk full")

    result = execute(g, {LIMIT: 2}, checkpointer=Broken())
    assert result.status == "failed" and isinstance(result.error, OSError)
    assert MessageAttempt  # exported for checkpointer authors


# covers: S-7, S-8
def test_a_plain_handler_runs_the_delivered_messages_in_one_hop_to_its_thread():
    # Message 1's handler blocks the event loop until message 2's handler has run: only a
    # hop that runs both without going back to the loop lets the run go on.
    g = Graph("g", inputs=[NUMBERS])
    loops = []
    have_loop = threading.Event()
    second = threading.Event()
    waited = []

    @g.node("spy", provides=[LIMIT])
    async def spy(rc):
        loops.append(asyncio.get_running_loop())
        have_loop.set()
        rc.set(LIMIT, 0)

    @g.processor("tally", input=NUMBERS, state=int, initial=0, commit_every=10)
    def tally(rc, state, n):
        if n == 1:
            assert have_loop.wait(30)
            loops[0].call_soon_threadsafe(lambda: waited.append(second.wait(10)))
        if n == 2:
            second.set()
        return state + n

    result = execute(g, {NUMBERS: Stream.replay(NUMBERS, [1, 2, 3])})
    assert result.status == "completed", result.error
    assert waited == [True]


class HopRecorder(Recorder):
    """A Recorder that also notes each handler call, in the order of the seam calls."""

    def handled(self, n):
        self.calls.append(("handle", n))

    def order(self):
        """("handle", n) and ("commit", messages) in the order they came, the final commit
        (with no message left) aside."""
        return [(c[0], c[1]) for c in self.calls if c[0] == "handle" or (c[0] == "commit" and c[1])]


# covers: S-7, S-8
def test_a_hop_runs_the_messages_of_several_commits_and_each_commits_on_its_own():
    # commit_every=1: message 1's handler blocks the event loop until message 2's handler has
    # run, so message 2 must run in the same hop, before message 1 is committed.
    g = Graph("g", inputs=[NUMBERS])
    loops = []
    have_loop = threading.Event()
    second = threading.Event()
    waited = []
    cp = HopRecorder()

    @g.node("spy", provides=[LIMIT])
    async def spy(rc):
        loops.append(asyncio.get_running_loop())
        have_loop.set()
        rc.set(LIMIT, 0)

    @g.processor(
        "tally", input=NUMBERS, state=int, initial=0, provides=[FIRST, EVENS], commit_every=1
    )
    def tally(rc, state, n):
        cp.handled(n)
        if n == 1:
            rc.set(FIRST, n)
            assert have_loop.wait(30)
            loops[0].call_soon_threadsafe(lambda: waited.append(second.wait(10)))
        if n == 2:
            second.set()
            with pytest.raises(SlotError):  # set by message 1, not committed yet
                rc.set(FIRST, n)
        if n % 2 == 0:
            rc.writer(EVENS).send(n)
        return state + n

    result = execute(g, {NUMBERS: Stream.replay(NUMBERS, [1, 2, 3, 4])}, checkpointer=cp)
    assert result.status == "completed", result.error
    assert waited == [True]
    order = cp.order()
    assert order.index(("handle", 2)) < order.index(("commit", (1,)))
    commits = [c for c in cp.calls if c[0] == "commit"]
    # Each message on its own, in order, with its own state, values and sends.
    assert [(c[1], c[2], c[4], c[6]) for c in commits] == [
        ((1,), 1, {}, False),
        ((2,), 3, {EVENS.name: [(1, 2)]}, False),
        ((3,), 6, {}, False),
        ((4,), 10, {EVENS.name: [(2, 4)]}, False),
        ((), 10, {}, True),
    ]
    assert all(c[3] == {FIRST.name: 1} for c in commits)


# covers: S-7, S-8
def test_a_handler_slower_than_a_hop_commits_each_message_before_the_next_runs():
    g = Graph("g", inputs=[NUMBERS])
    cp = HopRecorder()

    @g.processor("tally", input=NUMBERS, state=int, initial=0, commit_every=1)
    def tally(rc, state, n):
        cp.handled(n)
        time.sleep(HOP_SECONDS * 2)
        return state + n

    result = execute(g, {NUMBERS: Stream.replay(NUMBERS, [1, 2, 3, 4])}, checkpointer=cp)
    assert result.status == "completed", result.error
    steps = [(("handle", n), ("commit", (n,))) for n in (1, 2, 3, 4)]
    assert cp.order() == [step for pair in steps for step in pair]


# covers: S-7, S-8
def test_a_cancel_inside_a_hop_commits_the_messages_before_it_and_drops_its_own():
    g = Graph("g", inputs=[NUMBERS])
    cp = HopRecorder()
    token = CancelToken()

    @g.processor("tally", input=NUMBERS, state=int, initial=0, commit_every=1)
    def tally(rc, state, n):
        cp.handled(n)
        if n == 4:
            token.cancel()
        return state + n

    numbers = Stream.replay(NUMBERS, list(range(1, 9)))
    result = execute(g, {NUMBERS: numbers}, checkpointer=cp, cancel=token)
    assert result.status == "canceled"
    commits = [c for c in cp.calls if c[0] == "commit"]
    assert [(c[1], c[2]) for c in commits] == [((1,), 1), ((2,), 3), ((3,), 6)]  # no final
    assert [c[1] for c in cp.calls if c[0] == "handle"] == [1, 2, 3, 4]


# covers: S-7, S-8
@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_try_inside_a_hop_discards_only_its_own_work(kind):
    # (an async handler's messages are begun together too, then run one after another)
    g = Graph("g", inputs=[NUMBERS])
    tries = []

    def body(rc, state, n):
        tries.append((n, rc.message.index))
        state.items.append(n)  # in place: a failed try's change must not be kept
        if n == 1:
            rc.set(FIRST, n)
        if n == 3 and rc.message.index == 1:
            raise ValueError("once")
        return state

    g.processor(
        "tally",
        input=NUMBERS,
        state=Box,
        initial=Box(),
        provides=[FIRST],
        retry=Retry(2),
        commit_every=10,
    )(handler_of(kind, body))

    cp = Recorder()
    result = execute(g, {NUMBERS: Stream.replay(NUMBERS, [1, 2, 3, 4, 5])}, checkpointer=cp)
    assert result.status == "completed", result.error
    assert tries == [(1, 1), (2, 1), (3, 1), (3, 2), (4, 1), (5, 1)]
    begins = [c[1:3] for c in cp.calls if c[0] == "begin"]
    assert sorted(begins) == [(1, 1), (2, 1), (3, 1), (3, 2), (4, 1), (5, 1)]
    assert begins.index((3, 2)) > begins.index((5, 1))  # 4 and 5 keep the tries begun first
    assert [c for c in cp.calls if c[0] == "fail"] == [("fail", 3, 1, "ValueError")]
    commits = [c for c in cp.calls if c[0] == "commit"]
    assert [c[1] for c in commits] == [(1, 2, 3, 4, 5)]
    assert commits[0][2] == Box([1, 2, 3, 4, 5]) and commits[0][3] == {FIRST.name: 1}


# covers: S-7
@pytest.mark.parametrize("kind", KINDS)
def test_a_spent_budget_behind_a_hop_fails_after_the_messages_before_it(kind):
    g = Graph("g", inputs=[NUMBERS])
    ran = []

    def body(rc, state, n):
        ran.append(n)
        return state + n

    g.processor("tally", input=NUMBERS, state=int, initial=0, retry=Retry(2), commit_every=10)(
        handler_of(kind, body)
    )

    cp = Recorder(spent={3: 2})
    result = execute(g, {NUMBERS: Stream.replay(NUMBERS, [1, 2, 3, 4])}, checkpointer=cp)
    assert result.status == "failed"
    assert isinstance(result.error.__cause__, RetryExhaustedError)
    assert ran == [1, 2]
    assert not [c for c in cp.calls if c[0] == "commit"]


# covers: S-7
@pytest.mark.parametrize("kind", KINDS)
def test_stop_inside_a_hop_ends_it_after_its_message(kind):
    g = Graph("g", inputs=[NUMBERS])
    ran = []

    def body(rc, state, n):
        ran.append(n)
        if n == 2:
            rc.stop()
        return state + n

    g.processor("tally", input=NUMBERS, state=int, initial=0, commit_every=10)(
        handler_of(kind, body)
    )

    cp = Recorder()
    result = execute(g, {NUMBERS: Stream.replay(NUMBERS, [1, 2, 3, 4])}, checkpointer=cp)
    assert result.status == "completed", result.error
    assert ran == [1, 2]
    commits = [c for c in cp.calls if c[0] == "commit"]
    assert [(c[1], c[2], c[5], c[6]) for c in commits] == [((1, 2), 3, True, True)]


# covers: S-7
def test_first_tries_are_the_objects_the_class_itself_makes():
    attempt, key = object(), Key("numbers", int, stream=True)
    deliveries = ((4, 1), (5, 2))
    made = MessageAttempt.first_tries(["a" * 32, "b" * 32], attempt, key, deliveries, 3, "entry")
    expected = [
        MessageAttempt("a" * 32, attempt, key, 4, 1, 1, 3, "entry"),
        MessageAttempt("b" * 32, attempt, key, 5, 2, 1, 3, "entry"),
    ]
    for got, want in zip(made, expected, strict=True):
        assert type(got) is MessageAttempt
        assert attrs.asdict(got, recurse=False) == attrs.asdict(want, recurse=False)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made[0].index = 2  # type: ignore[misc]
    with pytest.raises(ValueError):  # an id for each delivery, no fewer
        MessageAttempt.first_tries(["a" * 32], attempt, key, deliveries, 3, "entry")


# covers: S-7, S-8
@pytest.mark.parametrize("checkpointer", [None, "default"])
def test_a_plain_handler_keeps_nothing_of_the_hops_it_ran(checkpointer):
    # Each hop to the worker thread runs a new closure over its messages and its first state:
    # nothing may hold on to it once the hop is done, or every message of a long input stays
    # in memory until the node ends.
    @attrs.frozen
    class Count:
        n: int = 0

    seen: list = []
    alive_at_end: list[int] = []
    g = producer_graph("hops")

    @g.processor("count", input=NUMBERS, state=Count, initial=Count(), commit_every=4)
    def count(rc, state, n):
        seen.append(weakref.ref(state))
        return Count(state.n + 1)

    @count.finish
    def finish(rc, state):
        gc.collect()
        alive_at_end.append(sum(ref() is not None for ref in seen[1:-8]))  # not ``initial``

    cp = Checkpointer() if checkpointer else None
    result = execute(g, {LIMIT: 200}, checkpointer=cp)
    assert result.status == "completed", result.error
    assert len(seen) == 200
    assert alive_at_end == [0]


# covers: S-8
def test_a_cancel_that_comes_as_the_awaited_save_is_answered_is_not_lost():
    # The processor waits for the oldest of its unsaved commits; the node is canceled in the
    # same turn of the loop as that save is answered. The wait must end canceled all the
    # same: a lost cancel would let the canceled node go on reading.
    from collections import deque

    from durable_core.graph.messageloop import MessageLoop

    async def main():
        loop = asyncio.get_running_loop()
        waiting = object.__new__(MessageLoop)
        save = loop.create_future()
        waiting.unsaved = deque([save])
        task = asyncio.ensure_future(waiting.saved())
        await asyncio.sleep(0)  # the task waits for the save
        task.cancel()
        save.set_result(None)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()

    asyncio.run(main())
