"""Unbatched processors run the next message while the commit before it is saved (S-8).

With ``commit_every=1`` the processor hands a message's commit to the checkpointer and runs the
next messages while that commit is saved (up to ``UNSAVED_COMMITS`` commits not saved yet); the
commits queued behind a save in flight share the next save, each applied only if the one before
it is. These tests check, on real stores, that this changes nothing a reader or a resume can
see:

- a save failing while the next messages run stops the run with the save's error; nothing
  sent by the failed commit or by a later message reaches a reader, and a resume completes
  with the exact state (the messages that ran behind the failed save run again);
- a process killed with SIGKILL mid-stream, again and again, resumes with every committed
  message applied exactly once, every send delivered exactly once downstream, and per-message
  Retry budgets never refilled (``processor_pipeline_child.py`` is the child process).
"""

from __future__ import annotations

import itertools
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import attrs
import pytest

from durable_core import (
    CancelToken,
    CheckpointError,
    Codecs,
    Graph,
    Key,
    Retry,
    RunRecord,
    Runtime,
)
from durable_core.graph.processor import UNSAVED_COMMITS
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
# Room for every message on both streams: the producer sends them all before the first message
# is processed, and the processor never waits for its reader's acks (which need saves), so that
# message n+1 can run while the commit of message n is being saved.
NUMBERS = Key("numbers", int, stream=True, capacity=64)
TOTAL = Key("total", Sum)
SENT = Key("sent", int, stream=True, capacity=64)
RECEIVED = Key("received", Sum)
MESSAGES = 30


def codecs() -> Codecs:
    registry = Codecs.default()
    registry.register_json(Sum)
    return registry


class Overlap:
    """What the handler tells the failing save: which message runs now."""

    def __init__(self) -> None:
        self.started: dict[int, threading.Event] = {}
        self.lock = threading.Lock()

    def event(self, n: int) -> threading.Event:
        with self.lock:
            return self.started.setdefault(n, threading.Event())


def graph(
    log: CallLog,
    received: CallLog,
    overlap: Overlap | None = None,
    fails: int = 0,
    pause: float = 0.0,
    cancel: tuple[CancelToken, int] | None = None,
) -> Graph:
    """``fails``: a message whose every try raises (0: none); ``pause``: seconds each
    message's handler takes; ``cancel``: a token the handler cancels while it handles the
    given message."""
    g = Graph("pipeline", inputs=[COUNT])

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
        provides=[TOTAL, SENT],
        retry=Retry(2),
        commit_every=1,
    )
    def add(rc, state: Sum, n: int) -> Sum:
        if n == fails:
            raise ValueError("this message can never be handled")
        log.write(f"m{n}")
        if cancel is not None and n == cancel[1]:
            cancel[0].cancel()
        time.sleep(pause)
        if overlap is not None:
            overlap.event(n).set()
        rc.writer(SENT).send(n)
        return Sum(state.count + 1, state.total + n)

    @add.finish
    def finish(rc, state: Sum):
        rc.set(TOTAL, state)

    @g.processor(
        "collect", input=SENT, state=Sum, initial=Sum(), provides=[RECEIVED], commit_every=1
    )
    def collect(rc, state: Sum, n: int) -> Sum:
        received.write(f"r{n}")  # as soon as the element reaches this reader
        return Sum(state.count + 1, state.total + n)

    @collect.finish
    def collected(rc, state: Sum):
        rc.set(RECEIVED, state)

    return g


def acked(record: RunRecord, group: str) -> int:
    return next(s.acked_through for s in record.streams.values() if s.group == group)


# covers: S-8
@pytest.mark.parametrize("written", [False, True], ids=["not-written", "written"])
@pytest.mark.parametrize("nth", [1, 9, 22])
def test_a_save_failing_while_the_next_message_runs_stops_the_run_and_publishes_nothing_after_it(
    nth: int, written: bool, tmp_path: Path
) -> None:
    real = open_store("sqlite", tmp_path)
    log, received = CallLog(tmp_path / "calls"), CallLog(tmp_path / "received")
    overlap = Overlap()
    ran_behind: list[bool] = []

    def commit_of_nth(record: RunRecord) -> bool:
        """The save acking message ``nth``: it fails once message nth+1 runs (or after 10 s)."""
        if not any(s.group == "sum" and s.acked_through >= nth for s in record.streams.values()):
            return False
        if not ran_behind:
            ran_behind.append(overlap.event(nth + 1).wait(10))
        return True

    failing = FailingStore(real, commit_of_nth, written=written)
    runtime = Runtime(failing, codecs())
    with pytest.raises(CheckpointError) as caught:
        runtime.run(
            graph(log, received, overlap), run_id="p", version="1", inputs={COUNT: MESSAGES}
        )
    assert isinstance(caught.value.__cause__, SaveFailure)
    assert len(failing.failed) == 1  # the run stopped at that save
    # The next message ran while the commit of message nth was being saved.
    assert ran_behind == [True]
    record = load(real, "p")
    # The failed save holds message nth's commit, and maybe commits queued behind the one
    # before it (one save for all of them).
    committed = acked(record, "sum")
    if written:
        assert committed >= nth
    else:
        assert nth - UNSAVED_COMMITS <= committed < nth
    # What reached the reader: only sends of commits saved before (none behind the failure).
    first = [int(r[1:]) for r in received.calls()]
    assert all(n < nth for n in first), first
    ran = [int(m[1:]) for m in log.calls()]
    assert ran == list(range(1, max(ran) + 1))  # in order, each once so far
    # At most UNSAVED_COMMITS commits waited behind the failed save, plus the message running.
    assert max(ran) <= nth + UNSAVED_COMMITS + 1
    before = log.calls()

    result = Runtime(real, codecs()).resume(
        graph(log, received), run_id="p", version="1", inputs={COUNT: MESSAGES}
    )
    assert result.status == "completed", result.error
    total = MESSAGES * (MESSAGES + 1) // 2
    assert result[TOTAL] == Sum(MESSAGES, total)
    assert result[RECEIVED] == Sum(MESSAGES, total)  # every send reached the reader once
    again = [int(m[1:]) for m in log.calls()[len(before) :]]
    assert again == list(range(committed + 1, MESSAGES + 1))  # from the first unacked one
    real.close()


# covers: S-8
def test_commits_queued_behind_a_save_share_the_next_one_and_each_save_holds_whole_messages(
    tmp_path: Path,
) -> None:
    real = open_store("sqlite", tmp_path)
    log, received = CallLog(tmp_path / "calls"), CallLog(tmp_path / "received")
    acked_by_save: list[int] = []
    states: list[tuple[int, Sum]] = []

    def check(record: RunRecord) -> bool:
        """Note what each save of the run holds; slow every save down (never fails)."""
        entries = [s for s in record.streams.values() if s.group == "sum"]
        if entries:
            acked_by_save.append(entries[0].acked_through)
            for managed in record.managed.values():
                if managed.node_id == "sum" and managed.state is not None:
                    state = managed.state
                    states.append(
                        (
                            entries[0].acked_through,
                            codecs().decode_value(
                                Sum, state.type_id, state.version, state.data, state.digest
                            ),
                        )
                    )
        time.sleep(0.003)  # the handler gets ahead of the saves
        return False

    store = FailingStore(real, check)
    result = Runtime(store, codecs()).run(
        graph(log, received), run_id="p", version="1", inputs={COUNT: MESSAGES}
    )
    assert result.status == "completed", result.error
    total = MESSAGES * (MESSAGES + 1) // 2
    assert result[TOTAL] == Sum(MESSAGES, total) and result[RECEIVED] == Sum(MESSAGES, total)
    # Every save holds whole messages: the state it writes is that of every message it acks.
    assert states and all(state == Sum(n, n * (n + 1) // 2) for n, state in states), states
    steps = [b - a for a, b in itertools.pairwise(acked_by_save) if b != a]
    assert all(0 < step <= UNSAVED_COMMITS for step in steps), acked_by_save
    # Commits that waited behind a save shared the next one.
    assert any(step > 1 for step in steps), acked_by_save
    assert [int(m[1:]) for m in log.calls()] == list(range(1, MESSAGES + 1))
    real.close()


# covers: S-7, S-8
@pytest.mark.parametrize("kind", ["memory", "sqlite", "file"])
def test_a_processor_failing_for_good_behind_waiting_commits_keeps_every_one_before_it(
    kind: str, tmp_path: Path
) -> None:
    failing_message = 12
    log, received = CallLog(tmp_path / "calls"), CallLog(tmp_path / "received")
    g = graph(log, received, fails=failing_message)

    def slow(record: RunRecord) -> bool:
        time.sleep(0.002)  # the handler gets ahead of the saves
        return False

    real = open_store(kind, tmp_path)
    result = Runtime(FailingStore(real, slow), codecs()).run(
        g, run_id="f", version="1", inputs={COUNT: MESSAGES}
    )
    assert result.status == "failed", result.error
    assert f"message {failing_message} " in str(result.error), result.error
    record = load(real, "f")
    # Every message before the failing one was committed, whatever waited for a save when
    # the node failed; its tries are saved failed, and the node's root attempt too.
    assert acked(record, "sum") == failing_message - 1
    (managed,) = [m for m in record.managed.values() if m.node_id == "sum"]
    state = managed.state
    assert codecs().decode_value(
        Sum, state.type_id, state.version, state.data, state.digest
    ) == Sum(failing_message - 1, (failing_message - 1) * failing_message // 2)
    tries = [
        m for m in record.messages.values() if m.group == "sum" and m.sequence == failing_message
    ]
    assert sorted(m.index for m in tries) == [1, 2]
    assert all(m.state.value == "failed" for m in tries)
    assert {a.node_id: a.state.value for a in record.attempts.values()}["sum"] == "failed"
    assert [int(m[1:]) for m in log.calls()] == list(range(1, failing_message))
    again = Runtime(real, codecs()).resume(g, run_id="f", version="1", inputs={COUNT: MESSAGES})
    assert again.status == "failed" and "failed for good" in str(again.error)
    real.close()


# covers: S-8
def test_a_failed_save_stops_a_slow_handler_at_the_next_commit(tmp_path: Path) -> None:
    nth = 4
    real = open_store("sqlite", tmp_path)
    log, received = CallLog(tmp_path / "calls"), CallLog(tmp_path / "received")

    def acks_nth(record: RunRecord) -> bool:
        if any(s.group == "sum" and s.acked_through >= nth for s in record.streams.values()):
            time.sleep(0.05)  # fails while message nth+1 runs (its handler takes 0.2 s)
            return True
        return False

    # Each handler takes far longer than a save: the failure is known before the next
    # message's commit, which stops the run then (not once UNSAVED_COMMITS commits wait).
    with pytest.raises(CheckpointError):
        Runtime(FailingStore(real, acks_nth), codecs()).run(
            graph(log, received, pause=0.2), run_id="p", version="1", inputs={COUNT: MESSAGES}
        )
    ran = [int(m[1:]) for m in log.calls()]
    assert ran == list(range(1, max(ran) + 1)) and nth + 1 <= max(ran) <= nth + 2, ran
    assert acked(load(real, "p"), "sum") == nth - 1
    real.close()


# covers: S-7, S-8
@pytest.mark.parametrize("kind", ["memory", "sqlite", "file"])
def test_a_cancel_while_a_hop_runs_the_next_commits_keeps_exactly_the_messages_before_it(
    kind: str, tmp_path: Path
) -> None:
    # The handler is fast: one hop runs the messages of several commits, and the cancel
    # comes while it handles message 17, in the middle of such a hop.
    at = 17
    log, received = CallLog(tmp_path / "calls"), CallLog(tmp_path / "received")
    token = CancelToken()
    real = open_store(kind, tmp_path)
    result = Runtime(real, codecs()).run(
        graph(log, received, cancel=(token, at)),
        run_id="c",
        version="1",
        inputs={COUNT: MESSAGES},
        cancel=token,
    )
    assert result.status == "canceled", result.error
    assert acked(load(real, "c"), "sum") == at - 1  # each message before it committed
    assert [int(m[1:]) for m in log.calls()] == list(range(1, at + 1))
    result = Runtime(real, codecs()).resume(
        graph(log, received), run_id="c", version="1", inputs={COUNT: MESSAGES}
    )
    assert result.status == "completed", result.error
    total = MESSAGES * (MESSAGES + 1) // 2
    assert result[TOTAL] == Sum(MESSAGES, total)
    assert result[RECEIVED] == Sum(MESSAGES, total)  # every send delivered once downstream
    ran = [int(m[1:]) for m in log.calls()]
    assert ran == [*range(1, at + 1), *range(at, MESSAGES + 1)]  # only message 17 again
    real.close()


# -- SIGKILL mid-stream ---------------------------------------------------------------------

CHILD = "tests.durable_core.durable.processor_pipeline_child"
KILLS = 6


def start(mode: str, kind: str, store: Path | str, logs: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", CHILD, mode, kind, str(store), str(logs)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def lines(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines() if line]


def kill_mid_stream(proc: subprocess.Popen[str], calls: Path, rng: random.Random) -> bool:
    """SIGKILL ``proc`` after a random number of further handler calls; False when it ended
    first."""
    target = len(lines(calls)) + rng.randint(3, 40)
    deadline = time.monotonic() + 60
    while len(lines(calls)) < target:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.communicate()
            return False
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    return proc.returncode == -signal.SIGKILL


# covers: S-7, S-8
@pytest.mark.parametrize(
    "kind", ["sqlite", "file", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_killed_unbatched_processor_resumes_with_each_message_and_send_applied_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from tests.durable_core.durable.processor_pipeline_child import (
        FAILING,
    )
    from tests.durable_core.durable.processor_pipeline_child import (
        MESSAGES as N,
    )

    rng = random.Random(f"pipeline-{kind}")
    store, logs = tmp_path / "store", tmp_path / "logs"
    store.mkdir()
    logs.mkdir()
    if kind == "postgres":  # the child opens the store at this location: the server's DSN
        store = request.getfixturevalue("postgres_dsn")
    calls = logs / "calls"
    kills = 0
    mode = "run"
    while kills < KILLS:
        proc = start(mode, kind, store, logs)
        mode = "resume"
        if not kill_mid_stream(proc, calls, rng):
            break
        kills += 1
    assert kills == KILLS, "the run ended before every kill landed"
    done = start("resume", kind, store, logs)
    out, err = done.communicate(timeout=300)
    assert done.returncode == 0, err[-3000:]
    status, total, count, received, received_count = out.split()
    assert status == "completed"
    # Each message applied exactly once to the state, each send applied once downstream.
    assert (int(count), int(total)) == (N, N * (N + 1) // 2)
    assert (int(received_count), int(received)) == (N, N * (N + 1) // 2)
    # Budgets: a message failing its first try is never given try 1 again after a restart
    # once that failure was saved; its try indexes never go down.
    tries: dict[int, list[int]] = {}
    for name, index in lines(calls):
        tries.setdefault(int(name[1:]), []).append(int(index))
    for n, indexes in tries.items():
        assert indexes == sorted(indexes), (n, indexes)
        if n % FAILING == 0:
            assert indexes[-1] >= 2, (n, indexes)  # succeeded only on a later try
    assert sorted(tries) == list(range(1, N + 1))
