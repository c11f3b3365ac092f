"""Where the ledger runs a save: on the event loop for a session whose saves are quick
(``Capability.QUICK_SAVES``, the MemoryStore), else in the ledger's save thread. Either way a failed
save leaves the committed record exact, and commits made together share one save."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from durable_core import CheckpointError, MemoryStore, RunRecord, ScopeRecord, record_to_json
from durable_core.durable import ledger as ledger_module
from durable_core.durable.ledger import Ledger, begin_attempt, new_id
from durable_core.store import Capability


class _Session:
    """A real MemoryStore session; notes the thread of every save, fails the ``fail_at``-th
    revision (raising before anything is written), or with ``interrupt`` interrupts it after
    the inner store wrote it (KeyboardInterrupt, as a second Ctrl-C raises on the loop's
    thread)."""

    def __init__(self, inner: Any, quick: bool, fail_at: int = 0, interrupt: bool = False) -> None:
        self.inner = inner
        self.run_id = inner.run_id
        self.fail_at = fail_at
        self.interrupt = interrupt
        self.threads: list[threading.Thread] = []
        self.revisions: list[int] = []

    def load(self) -> RunRecord:
        return self.inner.load()

    def save(self, record: RunRecord, expected_revision: int, encoded: Any = None) -> None:
        self.threads.append(threading.current_thread())
        if record.revision == self.fail_at and not self.interrupt:
            raise OSError("the medium is gone")
        self.inner.save(record, expected_revision, encoded)
        if record.revision == self.fail_at:
            raise KeyboardInterrupt
        self.revisions.append(record.revision)

    def close(self) -> None:
        self.inner.close()


class _QuickSession(_Session):
    capabilities = frozenset({Capability.ENCODED_SAVES, Capability.QUICK_SAVES})


class _SlowSession(_Session):
    capabilities = frozenset({Capability.ENCODED_SAVES})


def _ledger(quick: bool, fail_at: int = 0, interrupt: bool = False) -> tuple[Ledger, _Session]:
    kind = _QuickSession if quick else _SlowSession
    session = kind(MemoryStore().acquire("r1"), quick, fail_at, interrupt)
    ledger = Ledger(session, None)
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
    return ledger, session


def _begin(ledger: Ledger, node_id: str) -> Any:
    attempt = new_id()
    root = ledger.record.root_scope
    return ledger.commit_async(lambda p: begin_attempt(p, attempt, parent=root, node_id=node_id))


@pytest.mark.parametrize("quick", [True, False])
def test_a_quick_session_saves_on_the_loop_and_any_other_in_the_save_thread(quick: bool) -> None:
    # covers: R-RT-1
    ledger, session = _ledger(quick)

    async def main() -> threading.Thread:
        await _begin(ledger, "a")
        await _begin(ledger, "b")
        await ledger.settle()
        return threading.current_thread()

    loop_thread = asyncio.run(main())
    saves = session.threads[1:]  # the first record is created by a plain call
    assert len(saves) == 2
    if quick:
        assert all(thread is loop_thread for thread in saves)
    else:
        assert all(thread is not loop_thread for thread in saves)
        assert {thread.name for thread in saves} == {"durable-save"}
    assert session.load().revision == 3


@pytest.mark.parametrize("quick", [True, False])
def test_a_failed_save_leaves_the_committed_record_exact_and_stops_the_ledger(
    quick: bool,
) -> None:
    # covers: R-RT-1, R-RT-2
    ledger, session = _ledger(quick, fail_at=3)

    async def main() -> None:
        await _begin(ledger, "a")  # revision 2
        before = record_to_json(ledger.record)
        with pytest.raises(CheckpointError, match="revision 3"):
            await _begin(ledger, "b")
        assert record_to_json(ledger.record) == before
        assert ledger.revision == 2
        with pytest.raises(CheckpointError):  # stopped for good: nothing more is saved
            await _begin(ledger, "c")
        assert record_to_json(ledger.record) == before

    asyncio.run(main())
    assert session.revisions == [1, 2]
    assert session.load().revision == 2


@pytest.mark.parametrize("quick", [True, False])
def test_commits_made_in_one_turn_share_one_save(quick: bool) -> None:
    # covers: R-RT-1
    ledger, session = _ledger(quick)

    async def main() -> list[Any]:
        return list(await asyncio.gather(*(_begin(ledger, f"n{i}") for i in range(5))))

    committed = asyncio.run(main())
    assert {c.revision for c in committed} == {2}
    assert ledger.saves == 2 and ledger.changes == 5
    assert len(session.load().attempts) == 5


@pytest.mark.parametrize("alone", [True, False])
def test_a_commit_nothing_could_join_saves_without_a_turn_of_the_loop(alone: bool) -> None:
    # covers: R-RT-1
    ledger, session = _ledger(quick=True)
    ledger.start_when(lambda: alone)

    async def main() -> tuple[bool, int]:
        ran: list[str] = []
        asyncio.get_running_loop().call_soon(ran.append, "turn")
        committed = await _begin(ledger, "a")
        return bool(ran), committed.revision

    turned, revision = asyncio.run(main())
    assert revision == 2 and session.load().revision == 2
    # Told that nothing else is ready, the save starts at once and answers before the loop
    # runs anything; otherwise the loop's turn comes first, as it does for shared saves.
    assert turned is not alone


def test_commits_made_in_one_turn_share_one_save_while_not_alone() -> None:
    # covers: R-RT-1
    ledger, session = _ledger(quick=True)
    asked: list[bool] = []

    def alone() -> bool:
        asked.append(False)
        return False

    ledger.start_when(alone)

    async def main() -> list[Any]:
        return list(await asyncio.gather(*(_begin(ledger, f"n{i}") for i in range(5))))

    committed = asyncio.run(main())
    assert asked  # the commit that starts the save asked
    assert {c.revision for c in committed} == {2}
    assert ledger.saves == 2 and ledger.changes == 5
    assert len(session.load().attempts) == 5


def test_the_save_thread_ends_when_idle_and_starts_again(monkeypatch) -> None:
    monkeypatch.setattr(ledger_module, "_IDLE_SECONDS", 0.05)
    ledger, session = _ledger(quick=False)

    def save_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "durable-save"]

    async def main() -> None:
        await _begin(ledger, "a")
        deadline = time.monotonic() + 60
        while save_threads() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert not save_threads()
        await _begin(ledger, "b")

    asyncio.run(main())
    assert session.load().revision == 3
    assert len({id(thread) for thread in session.threads[1:]}) == 2


# covers: R-RT-1, R-RT-2
def test_an_interrupt_during_a_save_on_the_loop_leaves_the_record_exact_and_stops() -> None:
    ledger, session = _ledger(quick=True, fail_at=3, interrupt=True)
    before: list[bytes] = []

    async def first() -> None:
        await _begin(ledger, "a")  # revision 2, saved on the loop
        before.append(record_to_json(ledger.record))
        await _begin(ledger, "b")  # interrupted: the interrupt leaves the loop, as it would

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(first())
    assert record_to_json(ledger.record) == before[0]  # the change was undone
    assert ledger.revision == 2
    assert isinstance(ledger.error, CheckpointError)

    async def later() -> None:
        await _begin(ledger, "c")

    with pytest.raises(CheckpointError, match="may or may not have been written"):
        asyncio.run(later())  # stopped: nothing more is saved
    assert ledger.revision == 2
    assert session.load().revision == 3  # written all the same: resume loads it again


@pytest.mark.parametrize("quick", [True, False])
def test_the_first_committer_canceled_in_its_group_commit_turn_still_gets_the_batch_saved(
    quick: bool,
) -> None:
    # covers: R-RT-1
    ledger, session = _ledger(quick)

    async def main() -> Any:
        first = asyncio.ensure_future(_begin(ledger, "a"))  # starts the batch after one turn
        second = asyncio.ensure_future(_begin(ledger, "b"))  # joins it
        await asyncio.sleep(0)  # both have made their commit; the first waits for its turn
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        committed = await asyncio.wait_for(second, 10)
        await ledger.settle()
        return committed

    committed = asyncio.run(main())
    assert committed.revision == 2  # one save for both
    assert ledger.saves == 2 and ledger.changes == 2
    assert {a.node_id for a in session.load().attempts.values()} == {"a", "b"}


def _attempt(ledger: Ledger, attempt: str, node_id: str) -> Any:
    root = ledger.record.root_scope
    return lambda p: begin_attempt(p, attempt, parent=root, node_id=node_id)


# covers: S-8
@pytest.mark.parametrize("quick", [True, False], ids=["on-the-loop", "save-thread"])
def test_changes_held_back_behind_a_save_share_the_next_save_in_the_order_queued(
    quick: bool,
) -> None:
    ledger, session = _ledger(quick)
    ids = [new_id() for _ in range(4)]
    seen: list[bool] = []

    def after_second(proposal: Any) -> None:
        seen.append(ids[1] in proposal.record.attempts)  # applied after the one before it
        _attempt(ledger, ids[2], "c")(proposal)

    async def main() -> list[Any]:
        first = ledger.commit_soon(_attempt(ledger, ids[0], "a"))
        second = ledger.commit_soon(_attempt(ledger, ids[1], "b"), after=first)
        third = ledger.commit_soon(after_second, after=second)
        other = ledger.commit_soon(_attempt(ledger, ids[3], "d"))  # joins the first save
        return list(await asyncio.gather(first, second, third, other))

    first, second, third, other = asyncio.run(main())
    # Queued in one turn, they would all share one save; held back, the second and the third
    # wait for the first one's save, then share the next one, in order.
    assert (first.revision, second.revision, third.revision) == (2, 3, 3)
    assert other.revision == 2
    assert seen == [True]
    assert session.revisions == [1, 2, 3]  # 1: the record's creation
    assert all(i in ledger.record.attempts for i in ids)


# covers: S-8
@pytest.mark.parametrize("quick", [True, False], ids=["on-the-loop", "save-thread"])
def test_a_held_change_sharing_a_save_with_the_one_before_it_is_left_out_when_that_one_raised(
    quick: bool,
) -> None:
    ledger, session = _ledger(quick)
    ids = [new_id() for _ in range(4)]

    def bad(proposal: Any) -> None:
        raise KeyError("no such attempt")

    async def main() -> list[Any]:
        first = ledger.commit_soon(_attempt(ledger, ids[0], "a"))
        second = ledger.commit_soon(bad, after=first)
        third = ledger.commit_soon(_attempt(ledger, ids[2], "c"), after=second)
        fourth = ledger.commit_soon(_attempt(ledger, ids[3], "d"), after=third)
        other = ledger.commit_soon(_attempt(ledger, ids[1], "b"), after=first)
        return list(
            await asyncio.wait_for(
                asyncio.gather(first, second, third, fourth, other, return_exceptions=True), 10
            )
        )

    first, second, third, fourth, other = asyncio.run(main())
    assert first.revision == 2
    # The second raised in the save after the first: the two behind it, in that same save,
    # were never applied and fail with its error; a change held behind the first is saved.
    assert isinstance(second, KeyError) and third is second and fourth is second
    assert other.revision == 3
    assert ids[2] not in ledger.record.attempts and ids[3] not in ledger.record.attempts
    assert ids[1] in ledger.record.attempts
    assert session.revisions == [1, 2, 3]
    assert ledger.error is None  # the ledger goes on: only those changes were not made


# covers: S-8
@pytest.mark.parametrize("quick", [True, False], ids=["on-the-loop", "save-thread"])
def test_every_change_held_back_behind_one_that_raised_fails_with_it(quick: bool) -> None:
    ledger, _ = _ledger(quick)
    ids = [new_id() for _ in range(3)]

    def bad(proposal: Any) -> None:
        raise KeyError("no such attempt")

    async def main() -> list[Any]:
        first = ledger.commit_soon(bad)
        chain = [first]
        for i in ids:  # each behind the one before it, none taken yet
            chain.append(ledger.commit_soon(_attempt(ledger, i, "x"), after=chain[-1]))
        return list(await asyncio.wait_for(asyncio.gather(*chain, return_exceptions=True), 10))

    outcomes = asyncio.run(main())
    assert isinstance(outcomes[0], KeyError)
    assert all(outcome is outcomes[0] for outcome in outcomes)  # none left waiting
    assert not any(i in ledger.record.attempts for i in ids)


# covers: S-8
@pytest.mark.parametrize("quick", [True, False], ids=["on-the-loop", "save-thread"])
def test_a_change_held_back_behind_a_failed_save_is_never_applied(quick: bool) -> None:
    ledger, session = _ledger(quick, fail_at=2)
    ids = [new_id() for _ in range(2)]

    async def main() -> list[Any]:
        first = ledger.commit_soon(_attempt(ledger, ids[0], "a"))
        second = ledger.commit_soon(_attempt(ledger, ids[1], "b"), after=first)
        return list(await asyncio.gather(first, second, return_exceptions=True))

    first, second = asyncio.run(main())
    assert isinstance(first, CheckpointError) and second is first
    assert session.revisions == [1]  # nothing after the failed save was tried
    assert not any(i in ledger.record.attempts for i in ids)


@pytest.mark.parametrize("quick", [True, False], ids=["on-the-loop", "save-thread"])
def test_a_change_held_back_behind_a_change_that_raised_fails_with_it(quick: bool) -> None:
    ledger, _ = _ledger(quick)
    later = new_id()

    def bad(proposal: Any) -> None:
        raise KeyError("no such attempt")

    async def main() -> list[Any]:
        first = ledger.commit_soon(bad)
        second = ledger.commit_soon(_attempt(ledger, later, "b"), after=first)
        return list(await asyncio.gather(first, second, return_exceptions=True))

    first, second = asyncio.run(main())
    assert isinstance(first, KeyError) and second is first
    assert later not in ledger.record.attempts
    assert ledger.error is None  # the ledger goes on: only that change was not made
