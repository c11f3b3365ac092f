"""The conformance kit itself: it passes a correct store and catches broken ones.

Each broken store below breaks one clause of the contract; running the kit against it must fail
exactly the clauses that check it (so no clause of the kit is vacuous).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from xml.etree import ElementTree

import pytest

_BROKEN_STORES = textwrap.dedent(
    '''
    import copy
    import functools
    import time

    import pytest

    from durable_core import ConflictError, MemoryStore, NotFoundError, record_to_json
    from durable_core.store import Capability, MemorySession, validate_save
    from durable_core.store.memory import _MemoryRecord
    from durable_core.testing import StoreConformance, StoreSpec
    from durable_filestore import FileSession, FileStore, run_key


    def in_process(store):
        return StoreSpec(factory=lambda: store, cross_process=False, reason="test double")


    def with_sessions(session_class):
        """A MemoryStore whose sessions are ``session_class``."""

        class Store(MemoryStore):
            def _open_session(self, run_id, timeout, pending):
                return session_class(self, run_id)

        return Store


    class NoCasSession(MemorySession):
        """Overwrites whatever is stored: a plain put, not a Store (R-STORE-5)."""

        def save(self, record, expected_revision, encoded=None):
            validate_save(self.run_id, record, expected_revision)
            stored = _MemoryRecord(record.revision, record_to_json(record))
            self._memory._records[self.run_id] = stored


    class NoRevisionCheckSession(MemorySession):
        """Compares the stored revision but accepts any new revision and any run id."""

        def save(self, record, expected_revision, encoded=None):
            stored = self._memory._records.get(self.run_id)
            if (stored.revision if stored else 0) != expected_revision:
                raise ConflictError("conflict")
            stored = _MemoryRecord(record.revision, record_to_json(record))
            self._memory._records[self.run_id] = stored


    class SharedObjectsSession(MemorySession):
        """Keeps and hands out the caller's objects instead of copies."""

        objects = {}

        def save(self, record, expected_revision, encoded=None):
            super().save(record, expected_revision, encoded)
            self.objects[self.run_id] = record

        def load(self):
            super().load()
            return self.objects[self.run_id]


    class NoExclusivity(MemoryStore):
        """Hands out any number of sessions per run."""

        def acquire(self, run_id, timeout=None):
            self._runs.pop(run_id, None)
            return super().acquire(run_id, timeout)


    class SlowBusy(MemoryStore):
        """Waits for the owner a while before giving up: BusyError is not "at once"."""

        def acquire(self, run_id, timeout=None):
            if run_id in self._runs:
                time.sleep(0.6)
            return super().acquire(run_id, timeout)


    class NoUnicodeCheckSession(MemorySession):
        """Stores records without encoding them (lone surrogates get in)."""

        objects = {}

        def save(self, record, expected_revision, encoded=None):
            validate_save(self.run_id, record, expected_revision)
            stored = self.objects.get((id(self._memory), self.run_id))
            if (stored.revision if stored else 0) != expected_revision:
                raise ConflictError("conflict")
            self.objects[(id(self._memory), self.run_id)] = copy.deepcopy(record)
            self._memory._records[self.run_id] = _MemoryRecord(record.revision, b"{}")

        def load(self):
            stored = self.objects.get((id(self._memory), self.run_id))
            if stored is None:
                raise NotFoundError("none")
            return copy.deepcopy(stored)


    class OverwritesCorruptSession(MemorySession):
        """Compares revisions but never looks at the stored record before replacing it."""

        def _checked_revision(self):
            return self._stored_revision()


    class KeepsOpen(MemoryStore):
        """close() does nothing."""

        def acquire(self, run_id, timeout=None):
            session = super().acquire(run_id, timeout)
            session.close = lambda: None
            return session


    class _NoLock:
        def __init__(self, path):
            self.path = path

        def release(self):
            pass


    class UnlockedFileStore(FileStore):
        """A file store that never takes its OS lock."""

        def _open_session(self, run_id, timeout, pending):
            return FileSession(self, run_id, run_key(run_id), _NoLock(self.lock_path(run_id)))


    BROKEN = {
        "nocas": lambda tmp: in_process(with_sessions(NoCasSession)()),
        "norevision": lambda tmp: in_process(with_sessions(NoRevisionCheckSession)()),
        "shared": lambda tmp: in_process(with_sessions(SharedObjectsSession)()),
        "noexclusive": lambda tmp: in_process(NoExclusivity()),
        "slowbusy": lambda tmp: in_process(SlowBusy()),
        "nounicode": lambda tmp: in_process(with_sessions(NoUnicodeCheckSession)()),
        "overwrites": lambda tmp: in_process(with_sessions(OverwritesCorruptSession)()),
        "keepsopen": lambda tmp: in_process(KeepsOpen()),
        "unlockedfile": lambda tmp: functools.partial(UnlockedFileStore, str(tmp)),
        "historynoscope": lambda tmp: in_process(HistoryWithoutScopes()),
        "historykept": lambda tmp: in_process(with_sessions(HistoryKeptSession)()),
        "historyreversed": lambda tmp: in_process(HistoryReversed()),
        "declareslacks": lambda tmp: in_process(DeclaresWhatItLacks()),
        "wrongtimes": lambda tmp: in_process(WrongSaveTimes()),
        "deletekeeps": lambda tmp: in_process(with_sessions(DeleteKeepsSession)()),
        "peeksfirst": lambda tmp: in_process(PeeksTheFirstRecord()),
        "quickonstore": lambda tmp: in_process(QuickOnTheStore()),
        "inboxforgetskeys": lambda tmp: in_process(InboxForgetsKeys()),
        "inboxanyrun": lambda tmp: in_process(InboxTakesAnyRun()),
        "correct": lambda tmp: in_process(MemoryStore()),
    }


    class HistoryWithoutScopes(MemoryStore):
        """Keys histories by run id alone (a deleted and started-again run inherits one)."""

        def read_history(self, run_id, root_scope):
            with self._records_lock:
                return [entry for _, entry in self._history.get(run_id, ())]


    class HistoryKeptSession(MemorySession):
        """Deletes the record but leaves its history behind."""

        def delete(self):
            kept = list(self._memory._history.get(self.run_id, ()))
            super().delete()
            if kept:
                self._memory._history[self.run_id] = kept


    class HistoryReversed(MemoryStore):
        def read_history(self, run_id, root_scope):
            return super().read_history(run_id, root_scope)[::-1]


    class DeclaresWhatItLacks(MemoryStore):
        """Declares save times and cancel requests, and has neither."""

        capabilities = MemoryStore.capabilities | {
            Capability.SAVE_TIMES,
            Capability.CANCEL_REQUESTS,
        }


    class WrongSaveTimes(MemoryStore):
        """Declares save times and answers a time that is no save's."""

        capabilities = MemoryStore.capabilities | {Capability.SAVE_TIMES}

        def saved_at(self, run_id):
            return 0.0


    class DeleteKeepsSession(MemorySession):
        """Says it deletes, and leaves the record where it was."""

        def delete(self):
            self.close()


    class PeeksTheFirstRecord(MemoryStore):
        """Peeks at the first record it was given, not the last one committed."""

        first = {}

        def peek(self, run_id):
            record = super().peek(run_id)
            return self.first.setdefault((id(self), run_id), record)


    class QuickOnTheStore(MemoryStore):
        """Declares a session's flag on the store class."""

        capabilities = MemoryStore.capabilities | {Capability.QUICK_SAVES}


    class InboxForgetsKeys(MemoryStore):
        """Posts every message, a repeated idempotency key too."""

        def post_message(self, run_id, key, payload, idempotency_key=None):
            return super().post_message(run_id, key, payload, None)


    class InboxTakesAnyRun(MemoryStore):
        """Keeps posts to runs it has no record of."""

        def post_message(self, run_id, key, payload, idempotency_key=None):
            with self._records_lock:
                known = run_id in self._records
            if not known:
                return 1
            return super().post_message(run_id, key, payload, idempotency_key)


    class RawRecords:
        def __init__(self, store, directory):
            self.store = store
            self.directory = directory

        def read(self, run_id):
            if isinstance(self.store, MemoryStore):
                stored = self.store._records.get(run_id)
                return None if stored is None else stored.complete()
            path = self.directory / f"{run_key(run_id)}.json"
            return path.read_bytes() if path.exists() else None

        def write(self, run_id, data, revision):
            if isinstance(self.store, MemoryStore):
                self.store._records[run_id] = _MemoryRecord(revision, data)
            else:
                (self.directory / f"{run_key(run_id)}.json").write_bytes(data)


    class TestBroken(StoreConformance):
        @pytest.fixture(params=sorted(BROKEN))
        def durable_store_factory(self, tmp_path, request):
            return BROKEN[request.param](tmp_path / "store")

        @pytest.fixture
        def durable_raw_records(self, durable_store, tmp_path):
            return RawRecords(durable_store, tmp_path / "store")
    '''
)


@pytest.fixture(scope="module")
def kit_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Run the kit once against every broken store; {store: {clause: outcome}}."""
    directory = tmp_path_factory.mktemp("kit")
    (directory / "test_broken.py").write_text(_BROKEN_STORES, encoding="utf-8")
    report = directory / "report.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--junitxml={report}",
            f"--rootdir={directory}",
            "-o",
            "addopts=",
            "-k",
            _DESELECT,
            str(directory / "test_broken.py"),
        ],
        cwd=directory,
        capture_output=True,
        check=False,
        timeout=300,
    )
    results: dict[str, dict[str, str]] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        name = case.get("name", "")
        clause, _, params = name.partition("[")
        store = next(p for p in params.rstrip("]").split("-") if p in _STORES)
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        previous = results.setdefault(store, {}).get(clause)
        if previous != "failed":  # a clause fails when any of its parameter sets fails
            results[store][clause] = outcome
    return results


_STORES = {
    "nocas",
    "norevision",
    "shared",
    "noexclusive",
    "slowbusy",
    "nounicode",
    "overwrites",
    "keepsopen",
    "unlockedfile",
    "historynoscope",
    "historykept",
    "historyreversed",
    "declareslacks",
    "wrongtimes",
    "deletekeeps",
    "peeksfirst",
    "quickonstore",
    "inboxforgetskeys",
    "inboxanyrun",
    "correct",
}

# Cross-process clauses that an unlocked file store passes anyway: not worth a child process.
_DESELECT = (
    "not (unlockedfile and (byte_identical or stale_owner_in_another or "
    "close_releases_ownership_across))"
)


@pytest.mark.parametrize(
    ("broken", "must_fail"),
    [
        ("nocas", {"test_cas_conflict_keeps_the_old_record", "test_first_save_must_expect_zero"}),
        (
            "norevision",
            {"test_record_revision_must_be_expected_plus_one", "test_run_id_mismatch_is_refused"},
        ),
        ("shared", {"test_load_returns_an_isolated_copy", "test_save_copies_the_record"}),
        (
            "noexclusive",
            {
                "test_second_acquire_in_the_same_store_is_busy_at_once",
                "test_racing_acquires_of_one_run_have_one_winner",
            },
        ),
        ("slowbusy", {"test_second_acquire_in_the_same_store_is_busy_at_once"}),
        ("nounicode", {"test_invalid_utf8_is_refused_before_writing"}),
        ("overwrites", {"test_a_corrupt_record_is_refused_and_never_overwritten"}),
        (
            "keepsopen",
            {
                "test_close_is_idempotent_and_load_save_after_close_raise",
                "test_with_block_closes_the_session",
            },
        ),
        (
            "unlockedfile",
            {
                "test_busy_across_processes_at_once",
                "test_killed_owner_process_releases_ownership",
                "test_second_acquire_from_another_store_object_is_busy_at_once",
            },
        ),
        ("historynoscope", {"test_history_is_kept_per_run_and_per_root_scope"}),
        ("historykept", {"test_a_deleted_runs_history_goes_with_it"}),
        ("historyreversed", {"test_history_is_read_back_in_the_order_appended"}),
        (
            "declareslacks",
            {
                "test_declared_capabilities_are_implemented",
                "test_saved_at_is_when_the_record_was_last_written",
                "test_a_cancel_request_reaches_the_runs_watcher",
            },
        ),
        ("wrongtimes", {"test_saved_at_is_when_the_record_was_last_written"}),
        ("deletekeeps", {"test_delete_removes_the_run_and_closes_the_session"}),
        ("peeksfirst", {"test_peek_reads_the_last_committed_record_without_owning_the_run"}),
        ("quickonstore", {"test_declared_capabilities_are_implemented"}),
        ("inboxforgetskeys", {"test_a_repeated_idempotency_key_returns_the_first_sequence"}),
        ("inboxanyrun", {"test_a_post_to_an_unknown_run_is_refused"}),
    ],
)
def test_kit_catches_a_broken_store(
    kit_results: dict[str, dict[str, str]], broken: str, must_fail: set[str]
) -> None:
    # covers: R-STORE-1, R-STORE-2, R-STORE-3, R-STORE-4, R-STORE-5, B-FILE-5, E-1, X-HIST
    outcomes = kit_results[broken]
    if broken in {"declareslacks", "wrongtimes", "deletekeeps", "peeksfirst", "quickonstore"}:
        # A clause of a capability the broken store does not declare is skipped, never failed.
        assert outcomes["test_restore_times_gives_a_copied_run_its_times"] == "skipped"
    failed = {clause for clause, outcome in outcomes.items() if outcome == "failed"}
    assert must_fail <= failed, outcomes


def test_kit_passes_a_correct_store(kit_results: dict[str, dict[str, str]]) -> None:
    # covers: R-STORE-1, R-STORE-2, R-STORE-3, R-STORE-4
    outcomes = kit_results["correct"]
    assert len(outcomes) >= 30
    assert set(outcomes.values()) <= {"passed", "skipped"}, outcomes
    assert list(outcomes.values()).count("passed") >= 25
    # The clauses of what the memory store declares ran; those of what it lacks were skipped.
    assert outcomes["test_declared_capabilities_are_implemented"] == "passed"
    assert outcomes["test_every_capability_has_clauses"] == "passed"
    assert outcomes["test_peek_reads_the_last_committed_record_without_owning_the_run"] == "passed"
    assert outcomes["test_delete_removes_the_run_and_closes_the_session"] == "passed"
    assert outcomes["test_saves_may_run_on_an_event_loops_thread"] == "passed"
    assert outcomes["test_saved_at_is_when_the_record_was_last_written"] == "skipped"


def test_a_store_that_declares_a_capability_it_lacks_fails_only_where_it_lies(
    kit_results: dict[str, dict[str, str]],
) -> None:
    # covers: R-STORE-1
    outcomes = kit_results["declareslacks"]
    failed = {clause for clause, outcome in outcomes.items() if outcome == "failed"}
    assert failed == {
        "test_declared_capabilities_are_implemented",
        "test_saved_at_is_when_the_record_was_last_written",
        "test_a_cancel_request_reaches_the_runs_watcher",
    }, outcomes
