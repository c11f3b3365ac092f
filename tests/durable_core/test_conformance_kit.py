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

    from durable_core import MemoryStore, record_from_json, record_to_json
    from durable_core.store import validate_save
    from durable_core.testing import StoreConformance, StoreSpec
    from durable_filestore import FileSession, FileStore, run_key


    def in_process(store):
        return StoreSpec(factory=lambda: store, cross_process=False, reason="test double")


    class NoCas(MemoryStore):
        """Overwrites whatever is stored: a plain put, not a Store (R-STORE-5)."""

        def _save(self, session, record, expected_revision):
            validate_save(session.run_id, record, expected_revision)
            with self._lock:
                self._records[session.run_id] = (record.revision, record_to_json(record))


    class NoRevisionCheck(MemoryStore):
        """Compares the stored revision but accepts any new revision and any run id."""

        def _save(self, session, record, expected_revision):
            with self._lock:
                stored = self._records.get(session.run_id)
                if (stored[0] if stored else 0) != expected_revision:
                    from durable_core import ConflictError

                    raise ConflictError("conflict")
                self._records[session.run_id] = (record.revision, record_to_json(record))


    class SharedObjects(MemoryStore):
        """Keeps and hands out the caller's objects instead of copies."""

        def __init__(self):
            super().__init__()
            self.objects = {}

        def _save(self, session, record, expected_revision):
            super()._save(session, record, expected_revision)
            self.objects[session.run_id] = record

        def _load(self, session):
            super()._load(session)
            return self.objects[session.run_id]


    class NoExclusivity(MemoryStore):
        """Hands out any number of sessions per run."""

        def acquire(self, run_id, timeout=None):
            self._owners.pop(run_id, None)
            return super().acquire(run_id, timeout)


    class SlowBusy(MemoryStore):
        """Waits for the owner a while before giving up: BusyError is not "at once"."""

        def acquire(self, run_id, timeout=None):
            if run_id in self._owners:
                time.sleep(0.6)
            return super().acquire(run_id, timeout)


    class NoUnicodeCheck(MemoryStore):
        """Stores records without encoding them (lone surrogates get in)."""

        def __init__(self):
            super().__init__()
            self.objects = {}

        def _save(self, session, record, expected_revision):
            validate_save(session.run_id, record, expected_revision)
            with self._lock:
                stored = self.objects.get(session.run_id)
                if (stored.revision if stored else 0) != expected_revision:
                    from durable_core import ConflictError

                    raise ConflictError("conflict")
                self.objects[session.run_id] = copy.deepcopy(record)
                self._records[session.run_id] = (record.revision, b"{}")

        def _load(self, session):
            from durable_core import NotFoundError

            if session.run_id not in self.objects:
                raise NotFoundError("none")
            return copy.deepcopy(self.objects[session.run_id])


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

        def acquire(self, run_id, timeout=None):
            key = run_key(run_id)
            session = FileSession(self, run_id, key, _NoLock(self.lock_path(run_id)))
            self._sessions.add(session)
            return session


    BROKEN = {
        "nocas": lambda tmp: in_process(NoCas()),
        "norevision": lambda tmp: in_process(NoRevisionCheck()),
        "shared": lambda tmp: in_process(SharedObjects()),
        "noexclusive": lambda tmp: in_process(NoExclusivity()),
        "slowbusy": lambda tmp: in_process(SlowBusy()),
        "nounicode": lambda tmp: in_process(NoUnicodeCheck()),
        "keepsopen": lambda tmp: in_process(KeepsOpen()),
        "unlockedfile": lambda tmp: functools.partial(UnlockedFileStore, str(tmp)),
        "correct": lambda tmp: in_process(MemoryStore()),
    }


    class TestBroken(StoreConformance):
        @pytest.fixture(params=sorted(BROKEN))
        def durable_store_factory(self, tmp_path, request):
            return BROKEN[request.param](tmp_path / "store")
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
    "keepsopen",
    "unlockedfile",
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
    ],
)
def test_kit_catches_a_broken_store(
    kit_results: dict[str, dict[str, str]], broken: str, must_fail: set[str]
) -> None:
    # covers: R-STORE-1, R-STORE-2, R-STORE-3, R-STORE-4, R-STORE-5, B-FILE-5
    outcomes = kit_results[broken]
    failed = {clause for clause, outcome in outcomes.items() if outcome == "failed"}
    assert must_fail <= failed, outcomes


def test_kit_passes_a_correct_store(kit_results: dict[str, dict[str, str]]) -> None:
    # covers: R-STORE-1, R-STORE-2, R-STORE-3, R-STORE-4
    outcomes = kit_results["correct"]
    assert len(outcomes) >= 30
    assert set(outcomes.values()) <= {"passed", "skipped"}, outcomes
    assert list(outcomes.values()).count("passed") >= 25
