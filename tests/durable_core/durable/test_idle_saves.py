"""Where a durable store's saves run: on the event loop's thread while no body runs (the built-in
file, SQLite and PostgreSQL sessions allow it, ``Capability.IDLE_SAVES``; a body awaiting its ack
does not count as running), in the run's save thread while a body runs. Either way the run and its
record are the same (an interruption in the middle of a save on the loop: test_save_threads.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from durable_core import Graph, Key, Runtime
from durable_core.records import RunRecord
from durable_core.store import kit
from tests.durable_core.durable.scenarios import load, open_store

KINDS = ["file", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    location = (
        request.getfixturevalue("postgres_dsn")
        if request.param == "postgres"
        else tmp_path / "store"
    )
    opened = open_store(request.param, location)
    yield opened
    opened.close()


@pytest.fixture
def saves(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, frozenset[str]]]:
    """Every save made through a built-in store's session: (thread name, confirmed nodes)."""
    noted: list[tuple[str, frozenset[str]]] = []
    original = kit.BaseSession.save

    def save(self: Any, record: RunRecord, expected_revision: int, encoded: Any = None) -> None:
        nodes = frozenset(n for scope in record.scopes.values() for n in scope.nodes)
        noted.append((threading.current_thread().name, nodes))
        original(self, record, expected_revision, encoded)

    monkeypatch.setattr(kit.BaseSession, "save", save)
    return noted


def _newly_confirmed(noted: list[tuple[str, frozenset[str]]]) -> dict[str, str]:
    """The thread of the save that confirmed each node."""
    where: dict[str, str] = {}
    before: frozenset[str] = frozenset()
    for thread, nodes in noted:
        for node in nodes - before:
            where[node] = thread
        before = nodes
    return where


# covers: R-RT-1, G-7
def test_a_chain_saves_on_the_loop_thread_when_no_body_runs(store: Any, saves: list) -> None:
    keys = [Key(f"k{i}", int) for i in range(4)]
    g = Graph("chain", inputs=[keys[0]])
    for i in range(3):

        async def body(rc: Any, src: Key[int] = keys[i], dst: Key[int] = keys[i + 1]) -> None:
            rc.set(dst, rc.get(src) + 1)

        g.add_node(f"n{i}", body, requires=[keys[i]], provides=[keys[i + 1]])

    result = Runtime(store).run(g, run_id="chain", version="1", inputs={keys[0]: 0})
    assert result.status == "completed" and result[keys[3]] == 3
    loop_thread = threading.current_thread().name  # Runtime.run runs its loop right here
    assert _newly_confirmed(saves) == {"n0": loop_thread, "n1": loop_thread, "n2": loop_thread}
    assert set(load(store, "chain").scopes[load(store, "chain").root_scope].nodes) == {
        "n0",
        "n1",
        "n2",
    }


# covers: R-RT-1, G-7
def test_a_save_made_while_a_body_runs_goes_to_the_save_thread(store: Any, saves: list) -> None:
    seed, fast_out, slow_out = Key("seed", int), Key("fast", int), Key("slow", int)
    g = Graph("pair", inputs=[seed])
    release = asyncio.Event()

    @g.node("slow", requires=[seed], provides=[slow_out])
    async def slow(rc: Any) -> None:
        await release.wait()  # running: it holds its slot until "fast" is confirmed
        rc.set(slow_out, 2)

    @g.node("fast", requires=[seed], provides=[fast_out])
    async def fast(rc: Any) -> None:
        await asyncio.sleep(0.05)
        rc.set(fast_out, 1)

    @g.node("after", requires=[fast_out], provides=[])
    async def after(rc: Any) -> None:
        release.set()

    result = Runtime(store).run(g, run_id="pair", version="1", inputs={seed: 0})
    assert result.status == "completed" and result[fast_out] == 1 and result[slow_out] == 2
    where = _newly_confirmed(saves)
    assert where["fast"] == "durable-save"  # "slow" was running
    assert where["slow"] == threading.current_thread().name  # nothing else ran
    nodes = load(store, "pair").scopes[load(store, "pair").root_scope].nodes
    assert set(nodes) == {"slow", "fast", "after"}


def _noting(
    monkeypatch: pytest.MonkeyPatch, measure: Callable[[RunRecord], int]
) -> list[tuple[str, int]]:
    """Every save made through a built-in store's session from now on: (thread name,
    ``measure(record)``)."""
    noted: list[tuple[str, int]] = []
    original = kit.BaseSession.save

    def save(self: Any, record: RunRecord, expected_revision: int, encoded: Any = None) -> None:
        noted.append((threading.current_thread().name, measure(record)))
        original(self, record, expected_revision, encoded)

    monkeypatch.setattr(kit.BaseSession, "save", save)
    return noted


@pytest.fixture
def acks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every save: (thread name, the acked front of the reading group ``consume``)."""
    return _noting(
        monkeypatch,
        lambda record: max(
            (s.acked_through for s in record.streams.values() if s.group == "consume"), default=0
        ),
    )


def _add_producer(g: Graph, count: Key[int], events: Key[int]) -> None:
    """Add node ``produce``: it sends ``count`` elements to ``events`` (resumable)."""

    @g.node("produce", requires=[count], provides=[events])
    async def produce(rc: Any) -> None:
        w = rc.writer(events)
        for i in range(w.position or 0, rc.get(count)):
            await w.send_at(i, i + 1)


def _reading_graph(wait: bool) -> tuple[Graph, Key[int], Key[int]]:
    """A producer that sends 5 elements and ends, and a reader that takes them all, then
    acks each (``wait``: awaiting it)."""
    count, done = Key("count", int), Key("done", int)
    events = Key("events", int, stream=True, capacity=8)
    g = Graph("acks", inputs=[count])

    _add_producer(g, count, events)

    @g.node("consume", requires=[events], provides=[done])
    async def consume(rc: Any) -> None:
        taken = [d async for d in rc.reader(events).deliveries()]  # the producer has ended
        for d in taken:
            if wait:
                await d.ack()
            else:
                d.ack()
                await asyncio.sleep(0.02)  # running: its acks are saved meanwhile
        rc.set(done, len(taken))

    return g, count, done


# covers: S-2, R-RT-1
@pytest.mark.parametrize("wait", [True, False], ids=["await", "queued"])
def test_acks_awaited_by_the_only_running_body_save_on_the_loop_thread(
    store: Any, acks: list, wait: bool
) -> None:
    # A reader awaiting its ack does nothing meanwhile, so with nothing else running the ack
    # is saved on the loop; acks queued without waiting are saved while the reader runs on.
    g, count, done = _reading_graph(wait)
    result = Runtime(store).run(g, run_id="acks", version="1", inputs={count: 5})
    assert result.status == "completed" and result[done] == 5
    moved = [
        (thread, front)
        for (thread, front), (_, before) in zip(acks[1:], acks[:-1], strict=True)
        if front > before
    ]
    fronts = [front for _, front in moved]
    # Awaited, one ack a save; queued, acks made while a save is in flight share the next.
    assert fronts == [1, 2, 3, 4, 5] if wait else fronts == sorted(set(fronts)) and fronts[-1] == 5
    loop_thread = threading.current_thread().name
    expected = loop_thread if wait else "durable-save"
    assert {thread for thread, _ in moved} == {expected}
    stored = load(store, "acks").streams.values()
    assert [s.acked_through for s in stored if s.group == "consume"] == [5]


@pytest.fixture
def sends(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every save: (thread name, the last sequence sent on stream ``events``)."""
    return _noting(
        monkeypatch,
        lambda record: max(
            (s.last_sequence for s in record.streams.values() if s.key == "events"), default=0
        ),
    )


def _sending_beside_a_running_body() -> tuple[Graph, Key[int], Key[int]]:
    """A producer of 40 elements (capacity 8: several saves of elements), a reader acking each,
    and a body that runs (holds its slot) until the reader is done."""
    count, done, other = Key("count", int), Key("done", int), Key("other", int)
    events = Key("events", int, stream=True, capacity=8)
    g = Graph("sends", inputs=[count])
    finished = asyncio.Event()

    _add_producer(g, count, events)

    @g.node("consume", requires=[events], provides=[done])
    async def consume(rc: Any) -> None:
        seen = 0
        async for d in rc.reader(events).deliveries():
            d.ack()
            seen += 1
        rc.set(done, seen)
        finished.set()

    @g.node("busy", requires=[count], provides=[other])
    async def busy(rc: Any) -> None:
        await finished.wait()  # running all along: holds its slot
        rc.set(other, 1)

    return g, count, done


# covers: S-1, S-2, R-RT-1
@pytest.mark.parametrize("quick", [True, False], ids=["quick-saves", "slow-saves"])
def test_elements_are_saved_on_the_loop_thread_while_bodies_run_when_saves_are_quick(
    store: Any, sends: list, monkeypatch: pytest.MonkeyPatch, quick: bool
) -> None:
    # Readers wait for every element save, so while saves take less than the interpreter's
    # switch interval they are made on the loop even though a body runs; slower saves (here:
    # every save, against a switch interval of 0) go to the save thread, as other saves do.
    if not quick:
        monkeypatch.setattr("durable_core.durable.ledger.sys.getswitchinterval", lambda: 0.0)
    g, count, done = _sending_beside_a_running_body()
    result = Runtime(store).run(g, run_id="sends", version="1", inputs={count: 40})
    assert result.status == "completed" and result[done] == 40
    element_saves = [
        thread
        for (thread, sent), (_, before) in zip(sends[1:], sends[:-1], strict=True)
        if sent > before
    ]
    assert len(element_saves) >= 3  # capacity 8: the producer waited for room between them
    expected = threading.current_thread().name if quick else "durable-save"
    assert set(element_saves) == {expected}
    stored = [s for s in load(store, "sends").streams.values() if s.group == "consume"]
    assert [(s.last_sequence, s.acked_through) for s in stored] == [(40, 40)]
