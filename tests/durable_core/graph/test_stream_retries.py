"""Streams read again by a retried reader, in one process with ``execute`` (G-8, G-9, G-10).

A new try of a Sub node is a new scope: its readers of a parent's stream are new groups that
read the stream from its first element, and a processor there starts from its initial state (a
failed try's results, its reads included, are void: R-ATT-4). A reader with a Retry of its own
stays one group: what a failed try received and did not acknowledge is the first thing its next
try gets.
"""

from __future__ import annotations

from typing import Any

from durable_core import Graph, In, Key, Out, Retry, execute

NUMBERS = Key("numbers", int, stream=True, capacity=16)
TOTAL = Key("total", int)
CHILD_IN = Key("child_in", int, stream=True, capacity=16)
CHILD_TOTAL = Key("child_total", int)
SEEN = Key("seen", list[int])
COUNT = 100
WHOLE = COUNT * (COUNT + 1) // 2


def add_source(g: Graph) -> None:
    @g.node("src", provides=[NUMBERS])
    async def src(rc: Any) -> None:
        w = rc.writer(NUMBERS)
        for i in range(w.position or 0, COUNT):
            await w.send_at(i + 1, i + 1)


def summing_child(tries: list[int], *, fail_tries: int = 1) -> Graph:
    """A child graph whose ``sum`` reads its stream input; its first ``fail_tries`` runs raise
    after their first element."""
    child = Graph("summing", inputs=[CHILD_IN])

    @child.node("sum", requires=[CHILD_IN], provides=[CHILD_TOTAL])
    async def sum_(rc: Any) -> None:
        tries.append(0)
        total = 0
        async for x in rc.reader(CHILD_IN):
            total += x
            tries[-1] += 1
            if len(tries) <= fail_tries:
                raise ValueError("the reader broke after its first element")
        rc.set(CHILD_TOTAL, total)

    return child


def test_a_retried_sub_reads_its_parents_stream_again_from_the_first_element() -> None:
    # covers: G-9, G-10, G-8
    tries: list[int] = []
    g = Graph("retried_sub")
    add_source(g)
    g.sub(
        "part",
        summing_child(tries),
        bindings=[In(NUMBERS, CHILD_IN), Out(CHILD_TOTAL, TOTAL)],
        aspects=[Retry(2)],
    )
    result = execute(g, {})
    assert result.status == "completed"
    assert result[TOTAL] == WHOLE
    assert tries == [1, COUNT]  # the second try got every element, the first one included


def test_a_processor_in_a_retried_sub_starts_again_from_its_initial_state() -> None:
    # covers: G-9, G-10, S-7
    handled: list[tuple[int, int]] = []  # (try of the Sub, element)
    runs: list[int] = []
    child = Graph("folding", inputs=[CHILD_IN])

    @child.node("begin", provides=[Key("run", int)])
    def begin(rc: Any) -> None:
        runs.append(len(runs) + 1)
        rc.set(Key("run", int), len(runs))

    @child.processor(
        "fold",
        input=CHILD_IN,
        state=int,
        initial=0,
        requires=[Key("run", int)],
        provides=[CHILD_TOTAL],
    )
    def fold(rc: Any, state: int, n: int) -> int:
        run = rc.get(Key("run", int))
        handled.append((run, n))
        if run == 1:
            raise ValueError("every message of the first try fails")
        return state + n

    @fold.finish
    def done(rc: Any, state: int) -> None:
        rc.set(CHILD_TOTAL, state)

    g = Graph("retried_processor")
    add_source(g)
    g.sub(
        "part",
        child,
        bindings=[In(NUMBERS, CHILD_IN), Out(CHILD_TOTAL, TOTAL)],
        aspects=[Retry(2)],
    )
    result = execute(g, {})
    assert result.status == "completed"
    assert result[TOTAL] == WHOLE
    assert [n for run, n in handled if run == 2] == list(range(1, COUNT + 1))


def test_a_sub_in_a_retried_sub_reads_the_stream_again_from_the_first_element() -> None:
    # covers: G-9, G-10, G-8
    tries: list[int] = []
    inner = summing_child(tries)
    OUTER_IN = Key("outer_in", int, stream=True, capacity=16)
    OUTER_TOTAL = Key("outer_total", int)
    outer = Graph("outer", inputs=[OUTER_IN])
    outer.sub("inner", inner, bindings=[In(OUTER_IN, CHILD_IN), Out(CHILD_TOTAL, OUTER_TOTAL)])
    g = Graph("nested")
    add_source(g)
    g.sub(
        "outer",
        outer,
        bindings=[In(NUMBERS, OUTER_IN), Out(OUTER_TOTAL, TOTAL)],
        aspects=[Retry(2)],
    )
    result = execute(g, {})
    assert result.status == "completed"
    assert result[TOTAL] == WHOLE
    assert tries == [1, COUNT]


def test_a_reader_with_its_own_retry_gets_what_a_failed_try_did_not_ack() -> None:
    # covers: G-8, G-10, S-2
    deliveries: list[tuple[int, int]] = []  # (try, sequence)
    g = Graph("own_retry")
    add_source(g)

    @g.node("read", requires=[NUMBERS], provides=[SEEN], aspects=[Retry(2)])
    async def read(rc: Any) -> None:
        seen = []
        async for d in rc.reader(NUMBERS).deliveries():
            deliveries.append((rc.attempt.index, d.sequence))
            if rc.attempt.index == 1 and d.sequence == 3:
                raise ValueError("received 3, acked only 1 and 2")
            seen.append(d.value)
            await d.ack()
        rc.set(SEEN, seen)

    result = execute(g, {})
    assert result.status == "completed"
    assert [s for t, s in deliveries if t == 1] == [1, 2, 3]
    assert [s for t, s in deliveries if t == 2] == list(range(3, COUNT + 1))
    assert result[SEEN] == list(range(3, COUNT + 1))


def test_a_value_reader_with_its_own_retry_reads_everything_again() -> None:
    # covers: G-8, G-10
    counts: list[int] = []
    g = Graph("own_retry_values")
    add_source(g)

    @g.node("sum", requires=[NUMBERS], provides=[TOTAL], aspects=[Retry(2)])
    def sum_(rc: Any) -> None:  # a plain body: iterates values, never acks
        counts.append(0)
        total = 0
        for x in rc.reader(NUMBERS):
            total += x
            counts[-1] += 1
            if len(counts) == 1 and x == 5:
                raise ValueError("broke after 5 elements")
        rc.set(TOTAL, total)

    result = execute(g, {})
    assert result.status == "completed"
    assert result[TOTAL] == WHOLE
    assert counts == [5, COUNT]
