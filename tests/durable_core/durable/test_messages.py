"""Durable processors: each message transaction is one save; a restart goes on from the first
unacknowledged message with exactly the committed state (S-7, S-8, S-9, S-10).

Failing saves come from :class:`FailingStore` (scenarios.py); the handler logs every
message it processes to a side file, so the tests can count how often each was processed.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import attrs
import pytest

from durable_core import (
    CancelToken,
    CheckpointError,
    Codecs,
    CorruptRecordError,
    EventKind,
    Graph,
    In,
    Key,
    MemoryStore,
    NodeFailedError,
    Out,
    RecoveryEvent,
    Retry,
    RetryExhaustedError,
    RunRecord,
    Runtime,
)
from durable_core.durable.messages import container_id
from durable_core.graph.processor import UNSAVED_COMMITS
from durable_core.records.delta import read_delta
from durable_filestore import FileStore
from tests import ROOT
from tests.durable_core.durable.scenarios import (
    CallLog,
    FailingStore,
    SaveFailure,
    load,
    open_store,
)


@attrs.frozen
class Sum:
    count: int = 0
    total: int = 0


COUNT = Key("count", int)
NUMBERS = Key("numbers", int, stream=True, capacity=8)
TOTAL = Key("total", Sum)
FIRST = Key("first", int)
EVENS = Key("evens", int, stream=True, capacity=8)
EVEN_LIST = Key("even_list", list[int])


def codecs() -> Codecs:
    registry = Codecs.default()
    registry.register_json(Sum)
    return registry


@attrs.define
class Plan:
    """What the handler does besides adding up: fail, cancel, stop (by message value)."""

    log: CallLog
    fail: dict[int, int] = attrs.Factory(dict)  # value -> tries that fail (counted in the log)
    cancel_at: int | None = None  # cancel the run while processing this value (nth call)
    cancel_call: int = 1
    stop_at: int | None = None
    token: CancelToken = attrs.Factory(CancelToken)
    indexes: list[tuple[int, int]] = attrs.Factory(list)  # (value, try index) of every call
    ids: list[str] = attrs.Factory(list)  # the try's id of every call


def graph(plan: Plan, *, commit_every: int = 1, attempts: int = 3) -> Graph:
    g = Graph("messages", inputs=[COUNT])

    @g.node("numbers", requires=[COUNT], provides=[NUMBERS])
    async def numbers(rc):
        writer = rc.writer(NUMBERS)
        for n in range((writer.position or 0) + 1, rc.get(COUNT) + 1):
            await writer.send_at(n, n)

    @g.processor(
        "sum",
        input=NUMBERS,
        state=Sum,
        initial=Sum(),
        provides=[TOTAL, FIRST, EVENS],
        retry=Retry(attempts),
        commit_every=commit_every,
        max_delay=60,
    )
    def add(rc, state: Sum, n: int) -> Sum:
        plan.log.write(f"m{n}")
        plan.indexes.append((n, rc.message.index))
        plan.ids.append(rc.message.id)
        if n == plan.cancel_at and plan.log.count(f"m{n}") == plan.cancel_call:
            plan.token.cancel()
        if plan.log.count(f"m{n}") <= plan.fail.get(n, 0):
            raise ValueError(f"message {n} failed on purpose")
        if n == 1:
            rc.set(FIRST, n)
        if n % 2 == 0:
            rc.writer(EVENS).send(n)
        if n == plan.stop_at:
            rc.stop()
        return Sum(state.count + 1, state.total + n)

    @add.finish
    def finish(rc, state: Sum):
        rc.set(TOTAL, state)

    @g.node("evens", requires=[EVENS], provides=[EVEN_LIST])
    async def evens(rc):
        rc.set(EVEN_LIST, [n async for n in rc.reader(EVENS)])

    return g


def run(store: Any, plan: Plan, count: int = 30, resume: bool = False, **options: Any) -> Any:
    runtime = Runtime(store, codecs(), observers=options.pop("observers", ()))
    call = runtime.resume if resume else runtime.run
    return call(
        graph(plan, **options), run_id="r", version="1", inputs={COUNT: count}, cancel=plan.token
    )


def expected(count: int) -> tuple[Sum, list[int]]:
    return Sum(count, count * (count + 1) // 2), list(range(2, count + 1, 2))


def group_entry(record: RunRecord) -> Any:
    return next(s for s in record.streams.values() if s.group == "sum")


# covers: S-7, S-8
@pytest.mark.parametrize("commit_every", [1, 8])
def test_a_canceled_run_resumes_from_the_first_unacked_message_with_the_committed_state(
    commit_every: int, tmp_path: Path
) -> None:
    store = MemoryStore()
    plan = Plan(CallLog(tmp_path / "log"), cancel_at=20)
    first = run(store, plan, commit_every=commit_every)
    assert first.status == "canceled"
    record = load(store, "r")
    acked = group_entry(record).acked_through
    assert 0 < acked < 20
    mg = record.managed[container_id("sum", next(iter(record.managed.values())).parent)]
    assert codecs().decode_value(
        Sum, mg.state.type_id, mg.state.version, mg.state.data, mg.state.digest
    ) == Sum(acked, acked * (acked + 1) // 2)
    before = len(plan.log.calls())
    result = run(store, Plan(plan.log), resume=True, commit_every=commit_every)
    assert result.status == "completed", result.error
    total, evens = expected(30)
    assert result[TOTAL] == total and result[EVEN_LIST] == evens and result[FIRST] == 1
    again = plan.log.calls()[before:]
    assert all(int(m[1:]) > acked for m in again)  # nothing acked was processed again
    assert sorted({int(m[1:]) for m in again}) == list(range(acked + 1, 31))
    final = load(store, "r")
    assert not final.messages and not final.managed  # folded away with the node


# covers: S-8
@pytest.mark.parametrize("written", [False, True], ids=["not-written", "written"])
def test_a_save_failing_at_the_nth_message_never_loses_or_repeats_a_committed_message(
    written: bool, tmp_path: Path
) -> None:
    total, evens = expected(30)
    for nth in range(1, 31):
        real = MemoryStore()
        log = CallLog(tmp_path / f"log-{nth}-{written}")
        acks_nth = lambda record, nth=nth: any(  # noqa: E731 - the save that acks message nth
            s.group == "sum" and s.acked_through >= nth for s in record.streams.values()
        )
        failing = FailingStore(real, acks_nth, written=written)
        with pytest.raises(CheckpointError) as caught:
            run(failing, Plan(log))
        assert isinstance(caught.value.__cause__, SaveFailure)
        stored = group_entry(load(real, "r")).acked_through
        # The failed save holds message nth's commit, and maybe commits queued behind the
        # save before it (they share one save).
        if written:
            assert stored >= nth, nth
        else:
            assert nth - UNSAVED_COMMITS <= stored < nth, nth
        ran_before = [int(m[1:]) for m in log.calls()]
        result = run(real, Plan(log), resume=True)
        assert result.status == "completed", (nth, result.error)
        assert result[TOTAL] == total and result[EVEN_LIST] == evens, nth
        # Up to UNSAVED_COMMITS commits wait behind a save, and one message runs meanwhile.
        assert max(ran_before) <= max(nth, stored) + UNSAVED_COMMITS + 1, nth
        for n in range(1, 31):
            # committed ones ran once; the others ran again on resume if they ran before
            want = 1 if n <= stored else 1 + (n in ran_before)
            assert log.count(f"m{n}") == want, (nth, n, log.calls())


# covers: S-7
def test_a_per_message_budget_is_not_refilled_by_a_restart(tmp_path: Path) -> None:
    store = MemoryStore()
    log = CallLog(tmp_path / "log")
    # Message 7 fails twice (both saved failed); the run is canceled during its third try, which
    # is not a failure and is not saved.
    plan = Plan(log, fail={7: 2}, cancel_at=7, cancel_call=3)
    assert run(store, plan).status == "canceled"
    failed = [m for m in load(store, "r").messages.values() if m.sequence == 7]
    assert sorted((m.index, m.state.value) for m in failed) == [(1, "failed"), (2, "failed")]
    again = Plan(log)
    result = run(store, again, resume=True)
    assert result.status == "completed", result.error
    assert [i for n, i in again.indexes if n == 7] == [3]  # try 3 of 3, not a fresh try 1

    # Spent across two processes: two tries, a restart, and the third try fails too.
    store = MemoryStore()
    log = CallLog(tmp_path / "log2")
    assert run(store, Plan(log, fail={7: 4}, cancel_at=7, cancel_call=3)).status == "canceled"
    again = Plan(log, fail={7: 4})
    result = run(store, again, resume=True)
    assert result.status == "failed"
    assert isinstance(result.error, NodeFailedError) and result.error.path == "sum"
    assert isinstance(result.error.__cause__, ValueError)
    assert [i for n, i in again.indexes if n == 7] == [3]


# covers: S-7
def test_a_budget_spent_before_the_restart_fails_the_node_without_calling_the_handler(
    tmp_path: Path,
) -> None:
    real = MemoryStore()
    log = CallLog(tmp_path / "log")

    def fails_the_node(record: RunRecord) -> bool:  # the save after the budget was spent
        return any(
            a.node_id == "sum" and a.state.value == "failed" for a in record.attempts.values()
        )

    with pytest.raises(CheckpointError):
        run(FailingStore(real, fails_the_node), Plan(log, fail={5: 2}), attempts=2)
    stored = sorted(
        (m.index, m.state.value) for m in load(real, "r").messages.values() if m.sequence == 5
    )
    assert stored == [(1, "failed"), (2, "failed")]
    again = Plan(log)
    result = run(real, again, resume=True, attempts=2)
    assert result.status == "failed"
    assert isinstance(result.error.__cause__, RetryExhaustedError)
    assert all(n != 5 for n, _ in again.indexes) and log.count("m5") == 2


# covers: S-10
def test_values_set_by_committed_messages_are_adopted_not_set_again(tmp_path: Path) -> None:
    store = MemoryStore()
    log = CallLog(tmp_path / "log")
    events: list[RecoveryEvent] = []
    assert run(store, Plan(log, cancel_at=12)).status == "canceled"
    revision = load(store, "r").revision
    result = run(store, Plan(log), resume=True, observers=[events.append])
    assert result.status == "completed", result.error
    assert result[FIRST] == 1 and log.count("m1") == 1  # staged from the container
    resumed = next(e for e in events if e.kind is EventKind.RUN_RESUMED)
    assert resumed.revision == revision  # adoption saved nothing


# covers: S-8
def test_stop_ends_reading_with_the_node_confirmation(tmp_path: Path) -> None:
    store = MemoryStore()
    log = CallLog(tmp_path / "log")
    result = run(store, Plan(log, stop_at=5), count=30)
    assert result.status == "completed", result.error
    assert result[TOTAL] == Sum(5, 15) and result[EVEN_LIST] == [2, 4]
    assert log.calls() == [f"m{n}" for n in range(1, 6)]
    record = load(store, "r")
    assert not record.messages and not record.managed
    entry = group_entry(record)
    assert not entry.pending  # the read obligation ended; nothing pretended to be processed
    restored = run(store, Plan(log), resume=True, count=30)
    assert restored[TOTAL] == Sum(5, 15) and len(log.calls()) == 5


# covers: S-9
def test_a_missing_container_is_refused_before_any_event_or_save(tmp_path: Path) -> None:
    store = MemoryStore()
    log = CallLog(tmp_path / "log")
    assert run(store, Plan(log, cancel_at=10)).status == "canceled"
    with store.acquire("r") as session:
        record = session.load()
        record.managed.clear()
        record.revision += 1
        session.save(record, record.revision - 1)
    before = load(store, "r")
    events: list[RecoveryEvent] = []
    calls = len(log.calls())
    with pytest.raises(CorruptRecordError) as info:
        run(store, Plan(log), resume=True, observers=[events.append])
    assert info.value.rule == "S-9"
    assert events == [] and len(log.calls()) == calls
    assert load(store, "r") == before  # no revision or generation change


# covers: S-8
def test_the_record_stays_bounded_while_messages_are_processed(tmp_path: Path) -> None:
    sizes: list[tuple[int, int]] = []

    def measure(record: RunRecord) -> bool:
        sizes.append((len(record.messages), len(record.managed)))
        return False

    store = FailingStore(MemoryStore(), measure)
    result = run(store, Plan(CallLog(tmp_path / "log")), count=300, commit_every=4)
    assert result.status == "completed", result.error
    assert max(m for m, _ in sizes) <= 4 and max(c for _, c in sizes) == 1


# covers: S-8, S-2
def test_unbatched_messages_cost_about_one_save_each_on_sqlite(tmp_path: Path) -> None:
    """With ``commit_every=1`` each message is its own save; the producer's elements join
    those saves (it refills half a buffer at a time), not one save of their own per message."""
    store = open_store("sqlite", tmp_path)
    try:
        result = run(store, Plan(CallLog(tmp_path / "log")), count=80, commit_every=1)
    finally:
        store.close()
    assert result.status == "completed", result.error
    assert result[TOTAL] == expected(80)[0]
    assert result.saves <= 80 * 1.3 + 10, result.saves  # was about 2 saves per message


# covers: S-8, S-9
@pytest.mark.slow
def test_a_hundred_thousand_messages_leave_no_hundred_thousand_attempts() -> None:
    count, every = 100_000, 1_000
    numbers = Key("numbers", int, stream=True, capacity=256)
    g = Graph("many", inputs=[COUNT])

    @g.node("numbers", requires=[COUNT], provides=[numbers])
    async def produce(rc):
        writer = rc.writer(numbers)
        for n in range((writer.position or 0) + 1, rc.get(COUNT) + 1):
            await writer.send_at(n, n)

    @g.processor(
        "sum",
        input=numbers,
        state=int,
        initial=0,
        provides=[FIRST],
        commit_every=every,
        max_delay=60,
    )
    async def add(rc, state: int, n: int) -> int:
        return state + n

    @add.finish
    def finish(rc, state: int):
        rc.set(FIRST, state)

    seen: list[tuple[int, int, int, int]] = []

    def measure(record: RunRecord) -> bool:
        entry = [s for s in record.streams.values() if s.group == "sum"]
        acked = entry[0].acked_through if entry else 0
        pending = max((len(s.pending) for s in record.streams.values()), default=0)
        seen.append((acked, len(record.messages), len(record.managed), pending))
        return False

    result = Runtime(FailingStore(MemoryStore(), measure)).run(
        g, run_id="many", version="1", inputs={COUNT: count}
    )
    assert result.status == "completed", result.error
    assert result[FIRST] == count * (count + 1) // 2
    assert seen[-1][0] == count  # every message was acknowledged
    assert max(s[1] for s in seen) <= 1  # one message attempt: the container's proof
    assert max(s[2] for s in seen) <= 1  # one container
    # the record holds the unacknowledged elements only: a batch and a full buffer at most
    assert max(s[3] for s in seen) <= every + 256 + 1


# covers: S-7
@pytest.mark.parametrize("kind", ["def", "async"])
def test_a_per_message_budget_survives_a_real_crash_in_the_middle_of_a_try(
    tmp_path: Path, kind: str
) -> None:
    # (an async handler's delivered messages are begun together before the first runs)
    import subprocess
    import sys

    child = "tests.durable_core.durable.messages_child"
    store, log = tmp_path / "runs", tmp_path / "calls.log"

    def start(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", child, mode, str(store), str(log), kind],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )

    crashed = start("run")
    assert crashed.returncode == 17, crashed.stderr  # died during try 2 of message 7
    resumed = start("resume")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.split() == ["completed", "55"]
    calls = [line.split() for line in log.read_text().splitlines()]
    # try 1 failed (saved); try 2 died with the process (never failed: begun again as try 2);
    # try 2 failed; try 3 succeeded. A refilled budget would have started again at try 1.
    assert [i for m, i in calls if m == "m7"] == ["1", "2", "2", "3"]
    for n in range(1, 11):  # the messages committed before the crash were not processed again
        assert sum(1 for m, _ in calls if m == f"m{n}") == (4 if n == 7 else 1), calls


class _DeltaStore:
    """A MemoryStore whose sessions note the delta of every save."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.deltas: list[bytes | None] = []

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        session = self.inner.acquire(run_id, timeout)
        deltas = self.deltas
        save = session.save

        def noting(record: RunRecord, expected_revision: int, encoded: Any = None) -> None:
            deltas.append(None if encoded is None else encoded.delta)
            save(record, expected_revision, encoded)

        session.save = noting
        return session

    def close(self) -> None:
        self.inner.close()


# covers: S-8, R-ATT-1
@pytest.mark.parametrize("commit_every", [1, 8])
def test_a_processor_root_attempt_is_written_with_its_first_transaction(
    commit_every: int, tmp_path: Path
) -> None:
    store = _DeltaStore()
    result = run(store, Plan(CallLog(tmp_path / "log")), count=12, commit_every=commit_every)
    assert result.status == "completed", result.error
    record = load(store.inner, "r")
    root = record.scopes[record.root_scope].nodes["sum"].attempt
    deltas = [read_delta(d) for d in store.deltas if d is not None]
    first = next(d for d in deltas if ("Attempts", root) in {path for path, _ in d.set})
    # Not a save of its own: the same save holds the processor's first transaction (or the
    # opening of its output stream, when that comes first).
    assert any(
        path[0] in ("Managed", "Messages")
        # a new stream entry is set whole; an entry changed in place names only its fields
        or (path[0] == "Streams" and len(path) == 2 and value["NodeID"] == "sum")
        for path, value in first.set
    ), first


# -- Refused before anything runs, on real stores ----------------------------------------------
#
# A real processor run on a file store or a SQLite database is stopped after 11 committed
# messages; then one thing is damaged in the stored JSON itself (the record file, or the row),
# and resume must refuse the record before any event, body call or save, leaving every stored
# byte as it was.


def stored_document(store: Any, kind: str, location: Path) -> tuple[Any, Any]:
    """The stored record's JSON, and a function that writes a changed one back in place."""
    if kind == "file":
        path = Path(store.record_path("r"))
        assert not list(location.glob("*.journal"))  # at rest: one complete record file
        return json.loads(path.read_bytes()), lambda doc: path.write_bytes(json.dumps(doc).encode())
    db = sqlite3.connect(location / "runs.sqlite")
    try:
        assert db.execute("SELECT count(*) FROM durable_deltas").fetchone() == (0,)
        (blob,) = db.execute("SELECT record FROM durable_runs WHERE run_id = 'r'").fetchone()
    finally:
        db.close()

    def write(doc: Any) -> None:
        db = sqlite3.connect(location / "runs.sqlite")
        try:
            db.execute(
                "UPDATE durable_runs SET record = ? WHERE run_id = 'r'",
                (json.dumps(doc).encode(),),
            )
            db.commit()
        finally:
            db.close()

    return json.loads(blob), write


def stored_bytes_of(kind: str, location: Path) -> Any:
    """Every stored byte of the run: the files (not the lock files), or the rows."""
    if kind == "file":
        return sorted((p.name, p.read_bytes()) for p in location.iterdir() if p.suffix != ".lock")
    db = sqlite3.connect(location / "runs.sqlite")
    try:
        return (
            db.execute("SELECT * FROM durable_runs ORDER BY run_id").fetchall(),
            db.execute("SELECT * FROM durable_deltas ORDER BY run_id, base").fetchall(),
        )
    finally:
        db.close()


def element(sequence: int) -> dict[str, Any]:
    data = str(sequence).encode()  # the JSON codec of an int
    return {
        "Data": base64.b64encode(data).decode(),
        "Digest": hashlib.sha256(data).hexdigest(),
        "Sequence": sequence,
    }


def _no_state(doc: dict[str, Any]) -> None:
    (container,) = doc["Managed"].values()
    container["State"] = None


def _input_entry(doc: dict[str, Any]) -> dict[str, Any]:
    (entry,) = [s for s in doc["Streams"].values() if s["Group"] == "sum"]
    return entry


def _still_pending(doc: dict[str, Any]) -> None:
    entry = _input_entry(doc)
    entry["AckedThrough"] = 10
    entry["Pending"].insert(0, element(11))  # message 11 is confirmed (and acked) already


def _ahead_of_the_front(doc: dict[str, Any]) -> None:
    _input_entry(doc)["AckedThrough"] = 10  # message 11 is confirmed but not acked through


def _another_group(doc: dict[str, Any]) -> None:
    # The confirmed message names the entry of the "evens" reader (a stream "sum" writes),
    # with a Group and a Sequence that agree with that entry: it is not sum's own input.
    (evens,) = [i for i, s in doc["Streams"].items() if s["Group"] == "evens"]
    (message,) = doc["Messages"].values()
    message.update(Stream=evens, Group="evens", Sequence=doc["Streams"][evens]["LastSequence"])


DAMAGES = {
    "no-state": (_no_state, "S-7", "Managed", "State", "no state snapshot"),
    "still-pending": (_still_pending, "S-8", "Messages", "Sequence", "still pending"),
    "ahead": (_ahead_of_the_front, "S-8", "Messages", "Sequence", "past the group's AckedThrough"),
    "another-group": (_another_group, "S-7", "Messages", "Stream", "its own input 'numbers'"),
}


# covers: S-7, S-8, S-9
@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_damaged_message_record_is_refused_before_anything_runs(
    kind: str, damage: str, tmp_path: Path
) -> None:
    change, rule, field, leaf, words = DAMAGES[damage]
    location = tmp_path / "store"
    store = open_store(kind, location)
    try:
        log = CallLog(tmp_path / "log")
        assert run(store, Plan(log, cancel_at=12)).status == "canceled"
        record = load(store, "r")
        assert group_entry(record).acked_through == 11 and record.managed  # 11 committed
        doc, write = stored_document(store, kind, location)
        change(doc)
        write(doc)
        before = stored_bytes_of(kind, location)
        events: list[RecoveryEvent] = []
        calls = len(log.calls())
        with pytest.raises(CorruptRecordError) as info:
            run(store, Plan(log), resume=True, observers=[events.append])
        error = info.value
        assert (
            error.rule == rule
            and error.path.startswith(f"$.{field}[")
            and error.path.endswith(f".{leaf}")
        ), (error.rule, error.path)
        assert words in str(error) and "keep this one as evidence" in str(error)
        assert events == [] and len(log.calls()) == calls  # no event, no body call
        assert stored_bytes_of(kind, location) == before  # no save, no revision or generation
    finally:
        store.close()


def _confirms_sum(record: RunRecord) -> bool:
    return "sum" in record.scopes[record.root_scope].nodes


# covers: S-8
def test_a_failing_confirmation_save_surfaces_once_as_the_runs_checkpoint_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    # commit_every=1: the final transaction that waits for the confirmation sends nothing, so
    # no output stream reads the failure of its future.
    real = FileStore(tmp_path / "store")
    failing = FailingStore(real, _confirms_sum)
    log = CallLog(tmp_path / "log")
    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        with pytest.raises(CheckpointError) as caught:
            run(failing, Plan(log), count=10)
        gc.collect()  # a future left unread reports itself when it is collected
    assert isinstance(caught.value.__cause__, SaveFailure)
    assert len(failing.failed) == 1  # the confirmation's save, and only it
    assert "never retrieved" not in caplog.text
    assert "never retrieved" not in capfd.readouterr().err
    result = run(real, Plan(log), count=10, resume=True)
    assert result.status == "completed", result.error
    assert result[TOTAL] == expected(10)[0] and result[EVEN_LIST] == expected(10)[1]


# covers: S-7, S-8
@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_processor_in_a_sub_reading_its_parents_stream_resumes_exactly(
    kind: str, tmp_path: Path
) -> None:
    # Its messages name the parent's source, read as group "part/sum": its own input group.
    numbers = Key("nums", int, stream=True, capacity=4)
    inside = Key("inside", int, stream=True, capacity=4)
    total, child_total = Key("tot", int), Key("child_tot", int)
    token, seen = CancelToken(), []

    def build() -> Graph:
        child = Graph("child", inputs=[inside])

        @child.processor("sum", input=inside, state=int, initial=0, provides=[child_total])
        def add(rc, state: int, n: int) -> int:
            seen.append(n)
            if n == 7 and seen.count(7) == 1:
                token.cancel()
            return state + n

        @add.finish
        def finish(rc, state: int):
            rc.set(child_total, state)

        g = Graph("main", inputs=[COUNT])

        @g.node("src", requires=[COUNT], provides=[numbers])
        async def src(rc):
            writer = rc.writer(numbers)
            for n in range((writer.position or 0) + 1, rc.get(COUNT) + 1):
                await writer.send_at(n, n)

        g.sub("part", child, bindings=[In(numbers, inside), Out(child_total, total)])
        return g

    store = open_store(kind, tmp_path / "store")
    try:
        first = Runtime(store).run(
            build(), run_id="r", version="1", inputs={COUNT: 20}, cancel=token
        )
        assert first.status == "canceled"
        (message,) = load(store, "r").messages.values()
        assert message.group == "part/sum" and message.state.value == "confirmed"
        done = len(seen)
        result = Runtime(store).resume(build(), run_id="r", version="1", inputs={COUNT: 20})
        assert result.status == "completed", result.error
        assert result[total] == 210  # 1..20, each exactly once in the state
        assert min(seen[done:]) > message.sequence  # nothing acknowledged was processed again
    finally:
        store.close()


# covers: S-7
@pytest.mark.parametrize("commit_every", [1, 100])
def test_every_try_has_its_own_id_and_a_retried_message_a_new_one(
    tmp_path: Path, commit_every: int
) -> None:
    ids: list[str] = []
    for folder in ("one", "two"):  # two runs: their ids differ too
        plan = Plan(CallLog(tmp_path / f"log-{folder}"), fail={97: 1, 194: 1, 291: 1})
        store = open_store("sqlite", tmp_path / folder)
        try:
            result = run(store, plan, count=300, commit_every=commit_every)
        finally:
            store.close()
        assert result.status == "completed", result.error
        assert len(plan.ids) == 300 + 3
        assert sorted(n for n, index in plan.indexes if index == 2) == [97, 194, 291]
        ids += plan.ids
    assert all(len(mid) == 32 and int(mid, 16) >= 0 and mid == mid.lower() for mid in ids)
    assert len(set(ids)) == len(ids)  # across batches, retries and the two runs
