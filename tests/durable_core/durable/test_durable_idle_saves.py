"""Where a durable store's saves run: on the event loop's thread while no body runs (the built-in
file, SQLite and PostgreSQL sessions allow it, ``idle_saves = True``), in the run's save thread
while a body runs. Either way the run and its record are the same; an interruption in the middle
of a save on the loop leaves the committed record exact and stops the ledger."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from durable_scenarios import load, open_store

from durable_core import CheckpointError, Graph, Key, MemoryStore, Runtime, record_to_json
from durable_core.durable.ledger import Ledger, begin_attempt, new_id
from durable_core.records import RunRecord, ScopeRecord
from durable_core.store import kit

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


class _Interrupted:
    """A real MemoryStore session that allows saves on the loop; its ``fail_at``-th revision is
    interrupted (KeyboardInterrupt, as a second Ctrl-C raises on the loop's thread) after the
    inner store wrote it."""

    idle_saves = True

    def __init__(self, inner: Any, fail_at: int) -> None:
        self.inner = inner
        self.run_id = inner.run_id
        self.fail_at = fail_at

    def load(self) -> RunRecord:
        return self.inner.load()

    def save(self, record: RunRecord, expected_revision: int, encoded: Any = None) -> None:
        self.inner.save(record, expected_revision, encoded)
        if record.revision == self.fail_at:
            raise KeyboardInterrupt

    def close(self) -> None:
        self.inner.close()


# covers: R-RT-1, R-RT-2
def test_an_interrupt_during_a_save_on_the_loop_leaves_the_record_exact_and_stops() -> None:
    session = _Interrupted(MemoryStore().acquire("r1"), fail_at=3)
    ledger = Ledger(session, None)
    ledger.save_when(lambda: True)
    root = new_id()
    ledger.create(
        RunRecord(
            run_id="r1",
            version="v1",
            definition="d" * 64,
            inputs="e" * 64,
            root_scope=root,
            scopes={root: ScopeRecord(graph="g", inputs="e" * 64)},
        )
    )

    def begin(node_id: str) -> Any:
        attempt = new_id()
        return ledger.commit_async(
            lambda p: begin_attempt(p, attempt, parent=root, node_id=node_id)
        )

    before: list[bytes] = []

    async def first() -> None:
        await begin("a")  # revision 2, saved on the loop
        before.append(record_to_json(ledger.record))
        await begin("b")  # interrupted: the interrupt leaves the loop, as on the loop's thread

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(first())
    assert record_to_json(ledger.record) == before[0]  # the change was undone
    assert ledger.revision == 2
    assert isinstance(ledger.error, CheckpointError)

    async def later() -> None:
        await begin("c")

    with pytest.raises(CheckpointError, match="may or may not have been written"):
        asyncio.run(later())  # stopped: nothing more is saved
    assert ledger.revision == 2
    assert session.load().revision == 3  # written all the same: resume loads it again
