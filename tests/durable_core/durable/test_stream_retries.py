"""Durable streams read again by a retried reader: file and SQLite stores, across restarts.

A new try of a Sub node is a new scope: its readers of a parent's stream are new groups, which
read the stream from its first element, and a processor there starts from its initial state
(a failed try voids everything under it, R-ATT-4). The writer keeps the elements for such groups
in its own entry until no Sub node that could start a try is left; confirming a reader changes
only its own scope's entries. A reader with a Retry of its own stays one group: what a failed
try received and did not acknowledge reaches the next try.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from durable_core import AttemptState, CancelToken, Graph, In, Key, Out, Retry, Runtime
from durable_core.durable.streams import KEPT_PREFIX, KEPT_SIZE, WRITER_GROUP, Source, kept_history
from durable_core.records import RunRecord, StreamRecord
from tests import ROOT
from tests.durable_core.durable.scenarios import load, open_store
from tests.durable_core.durable.stream_retries_child import (
    CHILD_IN,
    CHILD_TOTAL,
    COUNT,
    NUMBERS,
    RUN,
    SEEN,
    TOTAL,
    WHOLE,
    add_source,
    fail_first,
    sub_graph,
    summing_child,
)

CHILD = "tests.durable_core.durable.stream_retries_child"
STORES = ["file", "sqlite"]
WITH_POSTGRES = [*STORES, pytest.param("postgres", marks=pytest.mark.postgres)]


def open_any(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """A real store of ``kind``; ``postgres`` on the suite's test server."""
    if kind == "postgres":
        return open_store(kind, request.getfixturevalue("postgres_dsn"))
    return open_store(kind, tmp_path)


def entries(record: RunRecord, scope: str | None = None) -> dict[str, StreamRecord]:
    """The stream entries by group (of sources in ``scope`` only, when given)."""
    return {e.group: e for e in record.streams.values() if scope is None or e.scope == scope}


def check_released(record: RunRecord) -> None:
    """A finished run keeps no element for groups to come, and every group acked it all."""
    for entry in record.streams.values():
        assert not entry.group.startswith(KEPT_PREFIX)
        assert entry.pending == []
        assert entry.acked_through == entry.last_sequence


def kept(record: RunRecord, scope: str | None = None) -> list[int]:
    """The sequences the root stream ``numbers`` keeps for groups to come ([] for none)."""
    source = Source(record.root_scope if scope is None else scope, "src", NUMBERS.name)
    history = kept_history(record, source)
    return [] if history is None else [m.sequence for m in history]


@pytest.mark.parametrize("kind", STORES)
def test_a_retried_sub_reads_its_parents_stream_again_from_the_first_element(
    kind: str, tmp_path: Path
) -> None:
    # covers: S-2, S-3, G-9, R-ATT-4
    runs: list[int] = []
    store = open_store(kind, tmp_path)
    result = Runtime(store).run(sub_graph(runs, fail_first), run_id="sub-1", version="1", inputs={})
    assert result.status == "completed"
    assert result[TOTAL] == WHOLE
    assert runs == [1, COUNT]
    check_released(load(store, "sub-1"))
    store.close()


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("stop", ["after the failed try", "in the second try"])
def test_a_retried_sub_resumed_after_a_cancel_reads_the_whole_stream(
    kind: str, stop: str, tmp_path: Path
) -> None:
    # covers: S-2, S-3, G-9, R-ATT-4
    token = CancelToken()
    runs: list[int] = []

    def on_element(run: int, count: int) -> None:
        if run == 1:
            if stop == "after the failed try":
                token.cancel()  # the Retry does not start the second try in this process
            raise ValueError("the reader broke after its first element")
        if count == 10:
            token.cancel()

    store = open_store(kind, tmp_path)
    first = Runtime(store).run(
        sub_graph(runs, on_element), run_id="sub-1", version="1", inputs={}, cancel=token
    )
    assert first.status == "canceled"
    record = load(store, "sub-1")
    writer = entries(record)[WRITER_GROUP]
    assert writer.last_sequence > 0
    # Every element sent is kept for the groups a new try opens.
    assert kept(record) == list(range(1, writer.last_sequence + 1))

    again: list[int] = []
    resumed = Runtime(store).resume(
        sub_graph(again, lambda run, count: None), run_id="sub-1", version="1", inputs={}
    )
    assert resumed.status == "completed"
    assert resumed[TOTAL] == WHOLE
    assert again == [COUNT]  # the whole stream, whatever the first process had read
    check_released(load(store, "sub-1"))
    store.close()


@pytest.mark.parametrize("kind", STORES)
def test_a_retried_sub_killed_in_its_second_try_resumes_with_the_whole_stream(
    kind: str, tmp_path: Path
) -> None:
    # covers: S-2, S-3, G-9, R-RT-2
    location = tmp_path / "store"
    location.mkdir()
    killed = subprocess.run(
        [sys.executable, "-m", CHILD, "run", kind, str(location), "10"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr
    record = load(open_store(kind, location), "sub-1")
    group = entries(record)["part/sum"]
    assert group.acked_through == 0  # a value reader acks with its confirmation only
    resumed = subprocess.run(
        [sys.executable, "-m", CHILD, "resume", kind, str(location), "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    outcome = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert outcome == {"status": "completed", "total": WHOLE, "runs": [COUNT]}
    check_released(load(open_store(kind, location), "sub-1"))


def processor_graph(
    handled: list[tuple[int, int]], token: CancelToken | None, handler: str = "def"
) -> Graph:
    """``src`` -> Sub ``part`` (``Retry(2)``) whose processor ``fold`` sums its input; every
    message of the Sub's first try fails, and the second try cancels the run after 30.
    ``handler``: ``def`` (a plain handler) or ``async``."""
    child = Graph("folding", inputs=[CHILD_IN])

    @child.node("begin", provides=[RUN])
    def begin(rc: Any) -> None:
        rc.set(RUN, rc.attempt.scope.parent.index if rc.attempt.scope.parent else 1)

    def fold(rc: Any, state: int, n: int) -> int:
        run = rc.get(RUN)
        handled.append((run, n))
        if run == 1:
            raise ValueError("every message of the first try fails")
        if token is not None and n == 30:
            token.cancel()
        return state + n

    async def fold_async(rc: Any, state: int, n: int) -> int:
        return fold(rc, state, n)

    folding = child.processor(
        "fold", input=CHILD_IN, state=int, initial=0, requires=[RUN], provides=[CHILD_TOTAL]
    )(fold_async if handler == "async" else fold)

    @folding.finish
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
    return g


@pytest.mark.parametrize("handler", ["def", "async"])
@pytest.mark.parametrize("kind", WITH_POSTGRES)
def test_a_processor_in_a_retried_sub_folds_the_whole_stream_from_its_initial_state(
    kind: str, handler: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # covers: S-7, S-8, S-9, G-9, R-ATT-4
    handled: list[tuple[int, int]] = []
    token = CancelToken()
    store = open_any(kind, tmp_path, request)
    first = Runtime(store).run(
        processor_graph(handled, token, handler),
        run_id="fold-1",
        version="1",
        inputs={},
        cancel=token,
    )
    assert first.status == "canceled"
    assert [n for run, n in handled if run == 1] == [1]
    assert [n for run, n in handled if run == 2][:30] == list(range(1, 31))
    again: list[tuple[int, int]] = []
    resumed = Runtime(store).resume(
        processor_graph(again, None, handler), run_id="fold-1", version="1", inputs={}
    )
    assert resumed.status == "completed"
    assert resumed[TOTAL] == WHOLE
    assert {run for run, _ in again} == {2}
    check_released(load(store, "fold-1"))
    store.close()


def nested_graph(runs: list[int], on_element: Any) -> Graph:
    """``src`` -> Sub ``outer`` (``Retry(2)``) -> Sub ``inner`` -> ``sum``."""
    outer_in = Key("outer_in", int, stream=True, capacity=16)
    outer_total = Key("outer_total", int)
    outer = Graph("outer", inputs=[outer_in])
    outer.sub(
        "inner",
        summing_child(runs, on_element),
        bindings=[In(outer_in, CHILD_IN), Out(CHILD_TOTAL, outer_total)],
    )
    g = Graph("nested")
    add_source(g)
    g.sub(
        "outer",
        outer,
        bindings=[In(NUMBERS, outer_in), Out(outer_total, TOTAL)],
        aspects=[Retry(2)],
    )
    return g


@pytest.mark.parametrize("kind", STORES)
def test_a_sub_in_a_retried_sub_reads_the_stream_again_across_a_restart(
    kind: str, tmp_path: Path
) -> None:
    # covers: S-2, S-3, G-9, R-SCOPE-2, R-ATT-4
    token = CancelToken()
    runs: list[int] = []

    def on_element(run: int, count: int) -> None:
        fail_first(run, count)
        if count == 20:
            token.cancel()

    store = open_store(kind, tmp_path)
    first = Runtime(store).run(
        nested_graph(runs, on_element), run_id="nest-1", version="1", inputs={}, cancel=token
    )
    assert first.status == "canceled"
    assert runs[0] == 1 and runs[1] >= 20
    again: list[int] = []
    resumed = Runtime(store).resume(
        nested_graph(again, lambda run, count: None), run_id="nest-1", version="1", inputs={}
    )
    assert resumed.status == "completed"
    assert resumed[TOTAL] == WHOLE
    assert again == [COUNT]
    check_released(load(store, "nest-1"))
    store.close()


def own_retry_graph(deliveries: list[tuple[int, int]], token: CancelToken | None) -> Graph:
    """``src`` -> ``read`` (``Retry(2)``, acks each delivery); its first try receives 3 after
    acking 1 and 2, and raises; the second try cancels the run after acking 50."""
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
            if token is not None and d.sequence == 50:
                token.cancel()
        rc.set(SEEN, seen)

    return g


@pytest.mark.parametrize("kind", STORES)
def test_a_reader_with_its_own_retry_gets_what_its_failed_try_did_not_ack(
    kind: str, tmp_path: Path
) -> None:
    # covers: S-2, G-8, R-ATT-4
    deliveries: list[tuple[int, int]] = []
    token = CancelToken()
    store = open_store(kind, tmp_path)
    first = Runtime(store).run(
        own_retry_graph(deliveries, token), run_id="own-1", version="1", inputs={}, cancel=token
    )
    assert first.status == "canceled"
    assert [s for t, s in deliveries if t == 1] == [1, 2, 3]
    # The second try starts with 3, which the first one received and did not ack.
    assert [s for t, s in deliveries if t == 2][:48] == list(range(3, 51))
    acked = entries(load(store, "own-1"))["read"].acked_through
    assert acked >= 50  # the cancel reaches the reader after its ack of 50 at the earliest
    again: list[tuple[int, int]] = []
    resumed = Runtime(store).resume(
        own_retry_graph(again, None), run_id="own-1", version="1", inputs={}
    )
    assert resumed.status == "completed"
    assert again == [(2, s) for s in range(acked + 1, COUNT + 1)]
    assert resumed[SEEN] == list(range(acked + 1, COUNT + 1))
    check_released(load(store, "own-1"))
    store.close()


def inner_source_graph(runs: list[int]) -> Graph:
    """A Sub ``part`` (``Retry(2)``) whose child has its own producer ``make`` and a reader
    ``sum`` of it; the reader's first run raises after its first element."""
    child = Graph("inner_source")
    local = Key("local", int, stream=True, capacity=4)

    @child.node("make", provides=[local])
    async def make(rc: Any) -> None:
        w = rc.writer(local)
        for i in range(w.position or 0, 10):
            await w.send_at(i + 1, i + 1)

    @child.node("sum", requires=[local], provides=[CHILD_TOTAL])
    async def sum_(rc: Any) -> None:
        runs.append(0)
        total = 0
        async for x in rc.reader(local):
            total += x
            if len(runs) == 1:
                raise ValueError("the reader broke after its first element")
        rc.set(CHILD_TOTAL, total)

    g = Graph("inner_source_run")
    g.sub("part", child, bindings=[Out(CHILD_TOTAL, TOTAL)], aspects=[Retry(2)])
    return g


@pytest.mark.parametrize("kind", STORES)
def test_confirming_a_reader_leaves_the_entries_of_a_failed_try_alone(
    kind: str, tmp_path: Path
) -> None:
    # covers: S-2, S-5, R-ATT-4
    runs: list[int] = []
    store = open_store(kind, tmp_path)
    result = Runtime(store).run(inner_source_graph(runs), run_id="in-1", version="1", inputs={})
    assert result.status == "completed"
    assert result[TOTAL] == 55
    record = load(store, "in-1")
    tries = sorted(
        (a.index, attempt_id)
        for attempt_id, a in record.attempts.items()
        if a.node_id == "part" and a.boundary
    )
    (_, failed_try), (_, good_try) = tries
    assert record.attempts[failed_try].state is AttemptState.FAILED
    # The second try's reader was confirmed: its own group acked everything.
    own = entries(record, good_try)["part/sum"]
    assert own.pending == [] and own.acked_through == own.last_sequence
    # The same group of the failed try's source (its scope is the failed try) is void history:
    # the confirmation left it as the failed try did (element 1 at least still pending).
    void = entries(record, failed_try)["part/sum"]
    assert void.pending and void.pending[0].sequence == 1
    store.close()


def acking_sub_graph(deliveries: list[int], token: CancelToken | None) -> Graph:
    """``src`` -> Sub ``part`` (``Retry(2)``) whose child ``load`` acks each delivery; the
    Sub's first try raises after its first element, the second cancels the run after 10."""
    child = Graph("loading", inputs=[CHILD_IN])

    @child.node("load", requires=[CHILD_IN], provides=[CHILD_TOTAL])
    async def load_(rc: Any) -> None:
        first_try = rc.attempt.scope.parent.index == 1
        total = 0
        async for d in rc.reader(CHILD_IN).deliveries():
            deliveries.append(d.sequence)
            if first_try:
                raise ValueError("the reader broke after its first element")
            total += d.value
            await d.ack()
            if token is not None and d.sequence == 10:
                token.cancel()
        rc.set(CHILD_TOTAL, total)

    g = Graph("acking_sub")
    add_source(g)
    g.sub(
        "part",
        child,
        bindings=[In(NUMBERS, CHILD_IN), Out(CHILD_TOTAL, TOTAL)],
        aspects=[Retry(2)],
    )
    return g


@pytest.mark.parametrize("kind", STORES)
def test_an_adopted_sub_try_goes_on_from_its_groups_acks(kind: str, tmp_path: Path) -> None:
    # covers: S-2, G-9, R-SCOPE-2, R-ATT-4
    deliveries: list[int] = []
    token = CancelToken()
    store = open_store(kind, tmp_path)
    first = Runtime(store).run(
        acking_sub_graph(deliveries, token), run_id="ack-1", version="1", inputs={}, cancel=token
    )
    assert first.status == "canceled"
    assert deliveries[:11] == [1, *range(1, 11)]  # the second try started from the first
    acked = entries(load(store, "ack-1"))["part/load"].acked_through
    assert acked >= 10
    again: list[int] = []
    resumed = Runtime(store).resume(
        acking_sub_graph(again, None), run_id="ack-1", version="1", inputs={}
    )
    assert resumed.status == "completed"
    # The adopted second try goes on after what it acked: acked elements never come again.
    assert again == list(range(acked + 1, COUNT + 1))
    assert resumed[TOTAL] == sum(again)
    check_released(load(store, "ack-1"))
    store.close()


@pytest.mark.parametrize("kind", STORES)
def test_a_sub_that_fails_for_good_stops_the_stream_keeping_elements(
    kind: str, tmp_path: Path
) -> None:
    # covers: S-2, S-5, R-ATT-4
    firsts: list[int] = []
    child = Graph("breaking", inputs=[CHILD_IN])

    @child.node("sum", requires=[CHILD_IN], provides=[CHILD_TOTAL])
    async def sum_(rc: Any) -> None:
        async for x in rc.reader(CHILD_IN):
            firsts.append(x)
            raise ValueError("the reader breaks at its first element, in every try")
        rc.set(CHILD_TOTAL, 0)

    g = Graph("failing_sub")
    add_source(g)
    g.sub(
        "part",
        child,
        bindings=[In(NUMBERS, CHILD_IN), Out(CHILD_TOTAL, TOTAL)],
        aspects=[Retry(2)],
    )
    store = open_store(kind, tmp_path)
    result = Runtime(store).run(g, run_id="bad-1", version="1", inputs={})
    assert result.status == "failed"
    assert firsts == [1, 1]  # each try read the stream from its first element
    record = load(store, "bad-1")
    writer = entries(record)[WRITER_GROUP]
    assert writer.last_sequence >= 1
    # No try of the Sub is left to open a group: nothing is kept for one.
    assert kept(record) == []
    assert not any(e.group.startswith(KEPT_PREFIX) for e in record.streams.values())
    store.close()


@pytest.mark.parametrize("kind", STORES)
def test_a_long_stream_is_kept_a_bounded_entry_at_a_time_and_read_again_after_a_restart(
    kind: str, tmp_path: Path
) -> None:
    # covers: S-2, S-3, G-9
    count = 3 * KEPT_SIZE + 10
    token = CancelToken()
    firsts: list[tuple[int, int]] = []  # (run in this process, first element read)
    child = Graph("summing_long", inputs=[CHILD_IN])

    @child.node("sum", requires=[CHILD_IN], provides=[CHILD_TOTAL])
    async def sum_(rc: Any) -> None:
        run = len(firsts) + 1
        total = n = 0
        async for x in rc.reader(CHILD_IN):
            if n == 0:
                firsts.append((run, x))
            total += x
            n += 1
            if run == 1 and x == KEPT_SIZE + 5:
                raise ValueError("the first try breaks in the second kept entry")
            if run == 2 and x == 2 * KEPT_SIZE + 7:
                token.cancel()
        rc.set(CHILD_TOTAL, total)

    g = Graph("long")
    add_source(g, count)
    g.sub(
        "part",
        child,
        bindings=[In(NUMBERS, CHILD_IN), Out(CHILD_TOTAL, TOTAL)],
        aspects=[Retry(2)],
    )
    store = open_store(kind, tmp_path)
    first = Runtime(store).run(g, run_id="long-1", version="1", inputs={}, cancel=token)
    assert first.status == "canceled"
    record = load(store, "long-1")
    sent = entries(record)[WRITER_GROUP].last_sequence
    assert kept(record) == list(range(1, sent + 1))
    chunks = [e for e in record.streams.values() if e.group.startswith(KEPT_PREFIX)]
    assert len(chunks) == (sent - 1) // KEPT_SIZE + 1 >= 3
    assert all(len(e.pending) <= KEPT_SIZE for e in chunks)
    firsts.clear()
    firsts.append((0, 0))  # the resumed reader is the adopted second try: it must not raise
    resumed = Runtime(store).resume(g, run_id="long-1", version="1", inputs={})
    assert resumed.status == "completed"
    assert resumed[TOTAL] == count * (count + 1) // 2
    assert firsts[1:] == [(2, 1)]  # from the first element: a value reader acked nothing
    check_released(load(store, "long-1"))
    store.close()


@pytest.mark.parametrize("kind", STORES)
def test_a_processors_output_read_by_a_retried_sub_is_kept_across_a_restart(
    kind: str, tmp_path: Path
) -> None:
    # covers: S-2, S-8, G-9
    doubled = Key("doubled", int, stream=True, capacity=16)
    token = CancelToken()
    runs: list[int] = []

    def on_element(run: int, count: int) -> None:
        fail_first(run, count)
        if count == 10:
            token.cancel()

    def build(on: Any) -> Graph:
        g = Graph("processor_source")
        add_source(g)

        @g.processor("double", input=NUMBERS, state=int, initial=0, provides=[doubled])
        def double(rc: Any, state: int, n: int) -> int:
            rc.writer(doubled).send(2 * n)  # committed with the message
            return state + 1

        g.sub(
            "part",
            summing_child(runs, on),
            bindings=[In(doubled, CHILD_IN), Out(CHILD_TOTAL, TOTAL)],
            aspects=[Retry(2)],
        )
        return g

    store = open_store(kind, tmp_path)
    first = Runtime(store).run(
        build(on_element), run_id="p-1", version="1", inputs={}, cancel=token
    )
    assert first.status == "canceled"
    record = load(store, "p-1")
    source = Source(record.root_scope, "double", doubled.name)
    sent = record.streams[source.entry_id(WRITER_GROUP)].last_sequence
    history = kept_history(record, source)
    assert history is not None and [m.sequence for m in history] == list(range(1, sent + 1))
    runs.clear()
    resumed = Runtime(store).resume(
        build(lambda run, count: None), run_id="p-1", version="1", inputs={}
    )
    assert resumed.status == "completed"
    assert resumed[TOTAL] == 2 * WHOLE
    assert runs == [COUNT]
    check_released(load(store, "p-1"))
    store.close()


def committing_graph(handled: list[tuple[int, int]], token: CancelToken | None) -> Graph:
    """``src`` -> Sub ``part`` (``Retry(2)``) whose processor ``fold`` commits each message;
    the Sub's first try commits 1 … 5 and fails at 6, the second cancels the run after 20."""
    child = Graph("committing", inputs=[CHILD_IN])

    @child.node("begin", provides=[RUN])
    def begin(rc: Any) -> None:
        rc.set(RUN, rc.attempt.scope.parent.index)

    @child.processor(
        "fold", input=CHILD_IN, state=int, initial=0, requires=[RUN], provides=[CHILD_TOTAL]
    )
    def fold(rc: Any, state: int, n: int) -> int:
        run = rc.get(RUN)
        handled.append((run, n))
        if run == 1 and n == 6:
            raise ValueError("the first try fails after committing five messages")
        if token is not None and run == 2 and n == 20:
            token.cancel()
        return state + n

    @fold.finish
    def done(rc: Any, state: int) -> None:
        rc.set(CHILD_TOTAL, state)

    g = Graph("retried_committing_processor")
    add_source(g)
    g.sub(
        "part",
        child,
        bindings=[In(NUMBERS, CHILD_IN), Out(CHILD_TOTAL, TOTAL)],
        aspects=[Retry(2)],
    )
    return g


@pytest.mark.parametrize("kind", WITH_POSTGRES)
def test_a_processor_whose_failed_try_committed_messages_folds_again_from_the_start(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # covers: S-7, S-8, S-9, G-9, R-ATT-4
    handled: list[tuple[int, int]] = []
    token = CancelToken()
    store = open_any(kind, tmp_path, request)
    first = Runtime(store).run(
        committing_graph(handled, token), run_id="c-1", version="1", inputs={}, cancel=token
    )
    assert first.status == "canceled"
    assert [n for run, n in handled if run == 1] == [1, 2, 3, 4, 5, 6]
    assert [n for run, n in handled if run == 2][:20] == list(range(1, 21))
    again: list[tuple[int, int]] = []
    resumed = Runtime(store).resume(
        committing_graph(again, None), run_id="c-1", version="1", inputs={}
    )
    assert resumed.status == "completed"
    assert resumed[TOTAL] == WHOLE  # the first try's committed messages count for nothing
    assert {run for run, _ in again} == {2}
    check_released(load(store, "c-1"))
    store.close()
