"""The clauses of the optional capability ``Capability.INBOX`` (X-INBOX-1, X-WAIT).

:class:`InboxClauses` is one of the groups of :class:`~durable_core.testing.StoreConformance`;
its clauses run for a store that declares ``Capability.INBOX``
(:class:`~durable_core.store.inbox.RunInbox`) and skip for the others. They prove that:

- posting needs no ownership and never blocks the owner (a post while another session owns the
  run, and a post while the owner is in the middle of saving, in another process too);
- two posters at once (threads, and processes when the store is cross-process) all succeed
  with distinct sequences, none lost;
- a reader that takes messages in while posters post, each read after the last sequence it
  took (as a run's intake does), misses none: a read never returns a message while an
  earlier one that is kept is left out;
- a post to a run without a record is refused, and keeps nothing;
- a repeated idempotency key is a no-op that returns the first sequence, also after the
  messages were dropped;
- sequences go on after a drop, never reused; the record and its revision never change;
- waiting notes are kept, listed and removed; a deleted run's inbox goes with it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from durable_core.errors import ConfigError, NotFoundError
from durable_core.store import Store
from durable_core.store.capabilities import Capability
from durable_core.testing.conformance.base import needs
from durable_core.testing.records import sample_record

__all__ = ["INBOX_CLAUSES", "InboxClauses"]

INBOX_CLAUSES = (
    "test_a_post_needs_no_ownership_and_never_changes_the_record",
    "test_a_post_to_an_unknown_run_is_refused",
    "test_a_repeated_idempotency_key_returns_the_first_sequence",
    "test_sequences_go_on_after_a_drop",
    "test_two_posters_at_once_both_succeed_with_distinct_sequences",
    "test_posters_in_two_processes_all_succeed",
    "test_a_reader_taking_messages_in_while_posters_post_misses_none",
    "test_waiting_notes_are_kept_and_removed",
    "test_a_deleted_runs_inbox_goes_with_it",
)
"""The clauses of ``Capability.INBOX`` (its entry in ``CAPABILITY_CLAUSES``)."""

_POSTERS = 4
_POSTS = 25
_READER_POSTS = 300


def _post_child(factory: Callable[[], Store], name: str, start: Any, count: int) -> None:
    """A child process posting ``count`` messages to run ``shared`` (inbox ``box``)."""
    store: Any = factory()
    try:
        start.wait(60)
        for number in range(count):
            store.post_message("shared", "box", f"{name}:{number}".encode(), f"{name}-{number}")
    finally:
        store.close()


class InboxClauses:
    """The clauses of ``Capability.INBOX``, run when the store declares it."""

    @pytest.fixture
    def durable_inbox_store(self, durable_store: Store) -> Any:
        """The store under test when it declares ``Capability.INBOX``; skips otherwise."""
        needs(durable_store, Capability.INBOX)
        return durable_store

    @staticmethod
    def _stored(store: Any, run_id: str) -> None:
        with store.acquire(run_id) as session:
            session.save(sample_record(run_id, 1), 0)

    def test_a_post_needs_no_ownership_and_never_changes_the_record(
        self, durable_inbox_store: Any
    ) -> None:
        # covers: X-INBOX-1
        store = durable_inbox_store
        self._stored(store, "r")
        with store.acquire("r") as session:  # owned while posting
            started = time.monotonic()
            first = store.post_message("r", "box", b'{"n": 1}')
            second = store.post_message("r", "box", b'{"n": 2}')
            assert time.monotonic() - started < 5
            assert (first, second) == (1, 2)
            assert session.load() == sample_record("r", 1)
            session.save(sample_record("r", 2), 1)  # the owner's revision is still the stored one
        messages = store.read_messages("r", "box")
        assert [(m.sequence, m.payload) for m in messages] == [(1, b'{"n": 1}'), (2, b'{"n": 2}')]
        assert store.last_sequence("r", "box") == 2
        assert store.inbox_keys("r") == ["box"]
        assert store.read_messages("r", "other") == []
        assert store.last_sequence("r", "other") == 0

    def test_a_post_to_an_unknown_run_is_refused(self, durable_inbox_store: Any) -> None:
        # covers: X-INBOX-1
        store = durable_inbox_store
        with pytest.raises(NotFoundError):
            store.post_message("nobody", "box", b"{}")
        assert store.read_messages("nobody", "box") == []
        with pytest.raises(ConfigError):
            self._stored(store, "r")
            store.post_message("r", "a/b", b"{}")
        with pytest.raises(ConfigError):
            store.post_message("r", "box", b"{}", "")

    def test_a_repeated_idempotency_key_returns_the_first_sequence(
        self, durable_inbox_store: Any
    ) -> None:
        # covers: X-INBOX-1
        store = durable_inbox_store
        self._stored(store, "r")
        assert store.post_message("r", "box", b"1", "k-1") == 1
        assert store.post_message("r", "box", b"2", "k-2") == 2
        assert store.post_message("r", "box", b"again", "k-1") == 1
        assert store.post_message("r", "other", b"x", "k-1") == 1  # per inbox
        assert [m.payload for m in store.read_messages("r", "box")] == [b"1", b"2"]
        assert store.read_messages("r", "box")[0].idempotency_key == "k-1"
        store.drop_messages("r", "box", 2)
        assert store.post_message("r", "box", b"again", "k-2") == 2  # still known
        assert store.post_message("r", "box", b"3") == 3  # never reused
        assert [m.sequence for m in store.read_messages("r", "box", after=2)] == [3]
        assert [m.sequence for m in store.read_messages("r", "box", limit=1)][:1] in ([2], [3])

    def test_sequences_go_on_after_a_drop(self, durable_inbox_store: Any) -> None:
        # covers: X-INBOX-1
        store = durable_inbox_store
        self._stored(store, "r")
        for n in range(5):
            store.post_message("r", "box", str(n).encode())
        store.drop_messages("r", "box", 5)
        assert all(m.sequence > 4 for m in store.read_messages("r", "box"))
        assert store.post_message("r", "box", b"next") == 6
        assert store.read_messages("r", "box", after=5)[0].payload == b"next"

    def test_two_posters_at_once_both_succeed_with_distinct_sequences(
        self, durable_inbox_store: Any
    ) -> None:
        # covers: X-INBOX-1
        store = durable_inbox_store
        self._stored(store, "shared")
        start = threading.Event()
        results: dict[str, list[int]] = {}

        errors: list[BaseException] = []

        def post(name: str) -> None:
            start.wait(10)
            try:
                results[name] = [
                    store.post_message("shared", "box", f"{name}:{n}".encode())
                    for n in range(_POSTS)
                ]
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=post, args=(f"t{i}",)) for i in range(_POSTERS)]
        for thread in threads:
            thread.start()
        with store.acquire("shared") as session:  # the owner saves meanwhile, never blocked
            start.set()
            for revision in range(1, 6):
                session.save(sample_record("shared", revision + 1), revision)
        for thread in threads:
            thread.join(60)
        assert not errors, errors
        sequences = sorted(s for found in results.values() for s in found)
        assert sequences == list(range(1, _POSTERS * _POSTS + 1))
        payloads = {m.payload for m in store.read_messages("shared", "box")}
        assert len(payloads) == _POSTERS * _POSTS

    def test_posters_in_two_processes_all_succeed(
        self, durable_inbox_store: Any, durable_store_spec: Any
    ) -> None:
        # covers: X-INBOX-1
        if not durable_store_spec.cross_process:
            pytest.skip(f"in-process store: {durable_store_spec.reason or 'cross_process=False'}")
        import multiprocessing

        store = durable_inbox_store
        self._stored(store, "shared")
        context = multiprocessing.get_context("spawn")
        start = context.Event()
        children = [
            context.Process(
                target=_post_child, args=(durable_store_spec.factory, name, start, _POSTS)
            )
            for name in ("p", "q")
        ]
        for child in children:
            child.start()
        with store.acquire("shared") as session:
            start.set()
            for revision in range(1, 4):
                session.save(sample_record("shared", revision + 1), revision)
        for child in children:
            child.join(120)
            assert child.exitcode == 0
        messages = store.read_messages("shared", "box")
        assert [m.sequence for m in messages] == list(range(1, 2 * _POSTS + 1))
        assert sorted(m.payload for m in messages) == sorted(
            f"{name}:{n}".encode() for name in ("p", "q") for n in range(_POSTS)
        )
        # the children's keys are known: posting them again changes nothing
        assert store.post_message("shared", "box", b"dup", "p-3") in range(1, 2 * _POSTS + 1)
        assert store.last_sequence("shared", "box") == 2 * _POSTS

    def test_a_reader_taking_messages_in_while_posters_post_misses_none(
        self, durable_inbox_store: Any
    ) -> None:
        # covers: X-INBOX-1, X-INBOX-2
        store = durable_inbox_store
        self._stored(store, "shared")
        posts = _READER_POSTS
        errors: list[BaseException] = []

        def post(name: str) -> None:
            try:
                for n in range(posts):
                    store.post_message("shared", "box", f"{name}:{n}".encode(), f"{name}-{n}")
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=post, args=(f"t{i}",)) for i in range(2)]
        for thread in threads:
            thread.start()
        taken: list[int] = []
        while True:  # an intake's loop: each read after the last sequence taken in
            posting = any(thread.is_alive() for thread in threads)
            found = store.read_messages("shared", "box", after=taken[-1] if taken else 0)
            taken.extend(m.sequence for m in found)
            if not posting and not found:
                break
        for thread in threads:
            thread.join(60)
        assert not errors, errors
        assert taken == list(range(1, 2 * posts + 1))

    def test_waiting_notes_are_kept_and_removed(self, durable_inbox_store: Any) -> None:
        # covers: X-WAIT
        store = durable_inbox_store
        self._stored(store, "w")
        assert store.waiting_notes() == {}
        note = '{"run_id": "w", "until": 12.5, "inboxes": ["box"]}'
        store.set_waiting("w", note)
        assert store.waiting_notes() == {"w": note}
        assert store.waiting_note("w") == note
        assert store.waiting_note("other") is None
        store.set_waiting("w", None)
        store.set_waiting("w", None)  # idempotent
        assert store.waiting_notes() == {}
        with pytest.raises(ValueError):
            store.set_waiting("w", "not json")

    def test_a_deleted_runs_inbox_goes_with_it(self, durable_inbox_store: Any) -> None:
        # covers: X-INBOX-1
        from durable_core.store.capabilities import capabilities

        store = durable_inbox_store
        if Capability.DELETE not in capabilities(store):
            pytest.skip("the store's sessions cannot delete runs")
        self._stored(store, "gone")
        store.post_message("gone", "box", b"old", "k")
        store.set_waiting("gone", '{"run_id": "gone"}')
        store.acquire("gone").delete()
        assert store.read_messages("gone", "box") == []
        assert store.waiting_notes() == {}
        with pytest.raises(NotFoundError):
            store.post_message("gone", "box", b"new")
        self._stored(store, "gone")  # the same id started again: a fresh inbox
        assert store.post_message("gone", "box", b"new", "k") == 1
        assert [m.payload for m in store.read_messages("gone", "box")] == [b"new"]
