"""Saves: copy, compare-and-swap, adopt on success (R-RT-1); any save error stops the run
(R-RT-2); nothing is published before its save; confirmations share saves (group commit).

Failing saves come from :class:`FailingStore`, a wrapper that delegates every call to a real
store and raises on one save (optionally after the real store wrote it).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from durable_core import (
    AttemptState,
    CheckpointError,
    EventKind,
    Graph,
    Key,
    MemoryStore,
    NotFoundError,
    RecoveryEvent,
    Retry,
    Runtime,
    execute,
    record_to_json,
)
from durable_core.durable.ledger import Ledger, Proposal, begin_attempt, new_id
from tests.durable_core.durable.scenarios import (
    OUT,
    SEED,
    CallLog,
    FailingStore,
    RecordingStore,
    SaveFailure,
    chain5,
    load,
    open_store,
    stored_bytes,
)

STORES = ["memory", "file", "sqlite"]


def reference(tmp_path: Path) -> dict[str, Any]:
    return execute(chain5(CallLog(tmp_path / "reference.log")), {SEED: 4}).values


def confirms(node: str) -> Any:
    """A predicate: the proposed record confirms ``node`` (in the root scope)."""
    return lambda record: node in record.scopes[record.root_scope].nodes


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("written", [False, True], ids=["not-written", "written"])
def test_a_failing_save_stops_the_run_and_resume_continues_from_what_was_stored(
    kind: str, written: bool, tmp_path: Path
) -> None:
    # covers: R-RT-1, R-RT-2, E-1
    real = open_store(kind, tmp_path / "store")
    log = CallLog(tmp_path / "calls.log")
    failing = FailingStore(real, confirms("n3"), written=written)
    events: list[RecoveryEvent] = []
    with pytest.raises(CheckpointError, match="may or may not have been written") as caught:
        Runtime(failing, observers=[events.append]).run(
            chain5(log), run_id="r1", version="v1", inputs={SEED: 4}
        )
    assert isinstance(caught.value.__cause__, SaveFailure)
    saves_at_failure = failing.saves
    assert log.calls() == ["n1", "n2", "n3"]  # nothing after the failing save ran
    confirmed = [e.node_id for e in events if e.kind is EventKind.NODE_CONFIRMED]
    assert confirmed == ["n1", "n2"]  # no event for the change whose save failed
    # not a node failure: the record stays resumable, and the history says the run stopped
    assert events[-1].kind is EventKind.RUN_FINISHED and events[-1].status == "stopped"

    record = load(real, "r1")
    assert failing.failed == [record.revision + (0 if written else 1)]
    assert failing.saves == saves_at_failure
    nodes = sorted(record.scopes[record.root_scope].nodes)
    assert nodes == (["n1", "n2", "n3"] if written else ["n1", "n2"])

    result = Runtime(real).resume(chain5(log), run_id="r1", version="v1", inputs={SEED: 4})
    assert result.status == "completed"
    assert result.result.values == reference(tmp_path)
    assert log.count("n1") == log.count("n2") == 1
    assert log.count("n3") == (1 if written else 2)
    assert log.count("n4") == log.count("n5") == 1
    real.close()


@pytest.mark.parametrize("written", [False, True], ids=["not-written", "written"])
def test_every_save_of_a_run_may_fail_and_resume_always_completes_correctly(
    written: bool, tmp_path: Path
) -> None:
    # covers: R-RT-1, R-RT-2, R-RT-3, R-ATT-4
    counting = FailingStore(MemoryStore(), fail_on=0)
    Runtime(counting).run(
        chain5(CallLog(tmp_path / "count.log")), run_id="r1", version="v1", inputs={SEED: 4}
    )
    total = counting.saves
    assert total == 6  # the first record, one confirmation per node (with its root attempt)
    expected = reference(tmp_path)
    for nth in range(1, total + 1):
        real = MemoryStore()
        log = CallLog(tmp_path / f"calls-{nth}.log")
        failing = FailingStore(real, fail_on=nth, written=written)
        with pytest.raises(CheckpointError):
            Runtime(failing).run(chain5(log), run_id="r1", version="v1", inputs={SEED: 4})
        assert failing.saves == nth  # nothing was saved (or retried) after the failure
        runtime = Runtime(real)
        if nth == 1 and not written:
            with pytest.raises(NotFoundError):  # never turned into a new run (R-RT-3)
                runtime.resume(chain5(log), run_id="r1", version="v1", inputs={SEED: 4})
            result = runtime.run(chain5(log), run_id="r1", version="v1", inputs={SEED: 4})
        else:
            result = runtime.resume(chain5(log), run_id="r1", version="v1", inputs={SEED: 4})
        assert result.status == "completed", (nth, result.error)
        assert result.result.values == expected, nth
        for node in ("n1", "n2", "n3", "n4", "n5"):
            assert 1 <= log.count(node) <= 2, (nth, log.calls())
        final = load(real, "r1")
        assert all(a.state is AttemptState.CONFIRMED for a in final.attempts.values()), nth


class _RaisingSession:
    """A session of a real MemoryStore whose saves raise from the second one on."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.run_id = session.run_id
        self.calls = 0

    def load(self) -> Any:
        return self.session.load()

    def save(self, record: Any, expected_revision: int) -> None:
        self.calls += 1
        if self.calls > 1:
            raise SaveFailure("no space left on device")
        self.session.save(record, expected_revision)

    def close(self) -> None:
        self.session.close()


def test_the_committed_record_advances_only_when_a_save_succeeds() -> None:
    # covers: R-RT-1, R-RT-2
    store = MemoryStore()
    session = _RaisingSession(store.acquire("r1"))
    from durable_core import RunRecord, ScopeRecord

    root = new_id()
    ledger = Ledger(session, None)
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
    committed = ledger.record
    before = record_to_json(committed)
    assert committed.revision == 1 and ledger.saves == 1

    attempt = new_id()
    with pytest.raises(CheckpointError) as caught:
        ledger.commit(lambda p: begin_attempt(p, attempt, parent=root, node_id="a"))
    assert isinstance(caught.value.__cause__, SaveFailure)
    assert ledger.record is committed  # not advanced
    assert record_to_json(committed) == before  # and not changed by the proposal
    assert attempt not in committed.attempts
    assert ledger.error is caught.value

    # Stopped for good: no retry, no further save.
    with pytest.raises(CheckpointError) as again:
        ledger.commit(lambda p: begin_attempt(p, new_id(), parent=root, node_id="b"))
    assert again.value is caught.value
    assert session.calls == 2
    assert session.load().revision == 1
    session.close()


def test_a_proposal_never_changes_the_committed_record() -> None:
    # covers: R-RT-1
    store = MemoryStore()
    graph = chain5(CallLog("/dev/null"))
    Runtime(store).run(graph, run_id="r1", version="v1", inputs={SEED: 4})
    committed = load(store, "r1")
    before = record_to_json(committed)
    proposal = Proposal(committed)
    root = committed.root_scope
    proposal.scope(root).nodes.clear()
    for attempt_id in list(committed.attempts):
        proposal.attempt(attempt_id).state = AttemptState.FAILED
    proposal.record.scopes.clear()
    assert record_to_json(committed) == before
    assert proposal.record.format == 2


def test_a_mutation_that_raises_does_not_sink_the_others_in_its_batch() -> None:
    # covers: R-RT-1
    store = MemoryStore()
    from durable_core import RunRecord, ScopeRecord

    root = new_id()
    with store.acquire("r1") as session:
        ledger = Ledger(session, None)
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
        good = new_id()

        def bad(proposal: Proposal) -> None:
            raise KeyError("no such attempt")

        async def both() -> list[Any]:
            return await asyncio.gather(
                ledger.commit_async(bad),
                ledger.commit_async(lambda p: begin_attempt(p, good, parent=root, node_id="a")),
                return_exceptions=True,
            )

        outcome = asyncio.run(both())
        assert isinstance(outcome[0], KeyError)
        assert outcome[1].value is None and outcome[1].revision == 2
        assert ledger.error is None
        assert good in session.load().attempts


@pytest.mark.parametrize("kind", STORES)
def test_outputs_are_published_only_after_their_confirmation_was_saved(
    kind: str, tmp_path: Path
) -> None:
    # covers: R-ATT-2, G-12
    events: list[Any] = []
    lock = threading.Lock()
    store = RecordingStore(open_store(kind, tmp_path / "store"), events, lock, delay=0.02)
    keys = [Key(f"v{i}", int) for i in range(6)]
    g = Graph("ordered", inputs=[keys[0]])
    for i in range(1, 6):

        async def body(rc: Any, i: int = i) -> None:
            with lock:
                events.append(("start", f"n{i}"))
            rc.set(keys[i], rc.get(keys[i - 1]) + i)

        g.add_node(f"n{i}", body, requires=[keys[i - 1]], provides=[keys[i]])
    # a second consumer of n1, so that a node waits on a confirmation shared with others
    side = Key("side", int)

    @g.node("side", requires=[keys[1]], provides=[side])
    def side_body(rc: Any) -> None:
        with lock:
            events.append(("start", "side"))
        rc.set(side, rc.get(keys[1]) * 2)

    result = Runtime(store).run(g, run_id="r1", version="v1", inputs={keys[0]: 0})
    assert result.status == "completed"
    assert result[keys[5]] == 15 and result[side] == 2

    def confirmed_at(node: str) -> int:
        for position, event in enumerate(events):
            if event[0] == "saved" and node in event[2].scopes[event[2].root_scope].nodes:
                return position
        raise AssertionError(f"{node} was never confirmed")

    def started_at(node: str) -> int:
        return events.index(("start", node))

    upstream = {"n2": "n1", "n3": "n2", "n4": "n3", "n5": "n4", "side": "n1"}
    for node, source in upstream.items():
        assert confirmed_at(source) < started_at(node), (node, events)
    # and every body started after its own root attempt was saved active
    for node in ["n1", *upstream]:
        begun = next(
            position
            for position, event in enumerate(events)
            if event[0] == "saved" and any(a.node_id == node for a in event[2].attempts.values())
        )
        assert begun < started_at(node)
    store.close()


@pytest.mark.parametrize("kind", STORES)
def test_confirmations_of_nodes_finishing_together_share_saves(kind: str, tmp_path: Path) -> None:
    # covers: R-RT-1, R-ATT-2
    width = 40
    seed = Key("seed", int)
    g = Graph("wide", inputs=[seed])
    arrived = 0
    release: asyncio.Event | None = None
    outs = [Key(f"o{i}", int) for i in range(width)]
    for i in range(width):

        async def body(rc: Any, i: int = i) -> None:
            nonlocal arrived, release
            if release is None:
                release = asyncio.Event()
            arrived += 1
            if arrived == width:
                release.set()  # every body is released together
            await release.wait()
            rc.set(outs[i], rc.get(seed) + i)

        g.add_node(f"n{i}", body, requires=[seed], provides=[outs[i]])

    real = open_store(kind, tmp_path / "store")
    counting = FailingStore(real, fail_on=0)  # counts saves, never fails
    events: list[RecoveryEvent] = []
    result = Runtime(counting, observers=[events.append]).run(
        g, run_id="r1", version="v1", inputs={seed: 1}, max_running=width
    )
    assert result.status == "completed"
    confirmed = [e for e in events if e.kind is EventKind.NODE_CONFIRMED]
    assert len(confirmed) == width
    confirmation_saves = {e.revision for e in confirmed}
    assert len(confirmation_saves) < width
    started = {e.revision for e in events if e.kind is EventKind.ATTEMPT_STARTED}
    assert len(started) < width
    # the whole run: the first record, the root attempts, the confirmations
    assert counting.saves == result.saves < 1 + 2 * width
    assert load(real, "r1").revision == counting.saves
    real.close()


def test_a_store_error_on_the_first_save_is_uncertain_and_resolved_by_loading(
    tmp_path: Path,
) -> None:
    # covers: R-RT-2, R-RT-3
    real = open_store("file", tmp_path / "store")
    log = CallLog(tmp_path / "calls.log")
    failing = FailingStore(real, fail_on=1, written=True)
    with pytest.raises(CheckpointError, match="first record"):
        Runtime(failing).run(chain5(log), run_id="r1", version="v1", inputs={SEED: 4})
    assert log.calls() == []
    before = stored_bytes(real, "r1")
    # run refuses (the record exists), resume continues it
    with pytest.raises(CheckpointError, match="resume"):
        Runtime(real).run(chain5(log), run_id="r1", version="v1", inputs={SEED: 4})
    assert stored_bytes(real, "r1") == before
    result = Runtime(real).resume(chain5(log), run_id="r1", version="v1", inputs={SEED: 4})
    assert result.status == "completed"
    assert result[OUT] == reference(tmp_path)["out"]
    real.close()


def test_a_failing_save_cancels_the_bodies_that_are_running(tmp_path: Path) -> None:
    # covers: R-RT-2, G-6
    seed, fast_out, slow_out = Key("seed", int), Key("fast", int), Key("slow", int)
    g = Graph("two", inputs=[seed])
    outcome: list[str] = []

    @g.node("fast", requires=[seed], provides=[fast_out])
    async def fast(rc: Any) -> None:
        rc.set(fast_out, 1)

    @g.node("slow", requires=[seed], provides=[slow_out])
    async def slow(rc: Any) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            outcome.append("canceled")
            raise
        rc.set(slow_out, 2)

    real = open_store("file", tmp_path / "store")
    failing = FailingStore(real, confirms("fast"))
    with pytest.raises(CheckpointError) as caught:  # "slow" lasts 60 s unless canceled
        Runtime(failing).run(g, run_id="r1", version="v1", inputs={seed: 0})
    assert isinstance(caught.value.__cause__, SaveFailure)
    assert outcome == ["canceled"]
    assert failing.saves == len(failing.failed) + 1  # the first record (root attempts wait)
    record = load(real, "r1")
    assert record.scopes[record.root_scope].nodes == {}
    assert record.attempts == {}  # neither node got past its body: nothing of them is saved
    real.close()


def test_the_root_attempt_id_is_a_stable_idempotency_key_across_a_restart(
    tmp_path: Path,
) -> None:
    # covers: R-REC-3, R-ATT-4
    seed, charged = Key("seed", int), Key("charged", str)
    g = Graph("payment", inputs=[seed])
    keys_seen: list[str] = []

    @g.node("charge", requires=[seed], provides=[charged], aspects=[Retry(2)])
    def charge(rc: Any) -> None:
        keys_seen.append(rc.attempt.root.id)
        rc.set(charged, f"charged with key {rc.attempt.root.id}")

    real = open_store("sqlite", tmp_path / "store")
    with pytest.raises(CheckpointError):  # the confirmation of "charge" is lost
        Runtime(FailingStore(real, confirms("charge"))).run(
            g, run_id="r1", version="v1", inputs={seed: 0}
        )
    result = Runtime(real).resume(g, run_id="r1", version="v1", inputs={seed: 0})
    assert result.status == "completed"
    assert len(keys_seen) == 2 and keys_seen[0] == keys_seen[1]
    record = load(real, "r1")
    node = record.scopes[record.root_scope].nodes["charge"]
    assert node.attempt == keys_seen[0]
    real.close()


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_value_no_codec_encodes_names_its_node_and_leaves_the_run_resumable(
    kind: str, tmp_path: Path
) -> None:
    # covers: R-RT-2, E-1
    ratio = Key("ratio", dict[str, float])
    done = Key("done", float)
    bad = {"value": float("nan")}
    graph = Graph("ratios")

    @graph.node("measure", provides=[ratio])
    def measure(rc):
        rc.set(ratio, dict(bad))

    @graph.node("report", requires=[ratio], provides=[done])
    def report(rc):
        rc.set(done, rc.get(ratio)["value"])

    store = open_store(kind, tmp_path / "store")
    events: list[RecoveryEvent] = []
    with pytest.raises(Exception) as caught:
        Runtime(store, observers=[events.append]).run(graph, run_id="r", version="1", inputs={})
    message = str(caught.value)
    assert type(caught.value).__name__ == "CodecError"
    assert "node 'measure'" in message and "key 'ratio'" in message
    assert "stays resumable" in message and "resume" in message
    finished = events[-1]
    assert finished.kind is EventKind.RUN_FINISHED and finished.status == "stopped"
    assert "measure" not in load(store, "r").scopes[load(store, "r").root_scope].nodes
    bad["value"] = 0.5  # the fix
    result = Runtime(store).resume(graph, run_id="r", version="1", inputs={})
    assert result.status == "completed" and result[done] == 0.5
    store.close()
