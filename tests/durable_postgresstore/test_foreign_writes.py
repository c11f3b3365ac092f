"""A row rewritten behind its owner's back is never overwritten (the row-version check).

Every test rewrites the run's row with a real ``UPDATE`` on a separate connection, the way an
operator or a stray program would, keeping the revision column as it was.
"""

from __future__ import annotations

import pickle

import pytest

from durable_core import ConflictError, EncodedRecord, RunRecord, record_to_json
from durable_core.testing import record_delta, sample_record
from durable_postgresstore import ForeignWriteError

pytestmark = pytest.mark.postgres


def record(run_id: str, revision: int, version: str = "v1") -> RunRecord:
    return RunRecord(run_id=run_id, revision=revision, version=version)


def rewrite(admin, run_id: str, data: bytes) -> None:
    """An external UPDATE of the record's bytes that keeps its revision."""
    changed = admin.execute(
        "UPDATE pulse_durable.runs SET record = %s WHERE run_key = sha256(%s)",
        [data, run_id.encode()],
    ).rowcount
    assert changed == 1


def stored(admin, run_id: str) -> tuple[int, bytes]:
    revision, data = admin.execute(
        "SELECT revision, record FROM pulse_durable.runs WHERE run_key = sha256(%s)",
        [run_id.encode()],
    ).fetchone()
    return int(revision), bytes(data)


# covers: X-HOST, R-STORE-3
def test_a_save_after_an_external_update_of_the_record_is_refused(store, admin):
    with store.acquire("r") as session:
        session.save(record("r", 1), 0)
        foreign = record_to_json(record("r", 1, "written outside"))
        rewrite(admin, "r", foreign)
        with pytest.raises(ForeignWriteError) as caught:
            session.save(record("r", 2), 1)
        assert isinstance(caught.value, ConflictError)
        assert caught.value.revision == 1
        message = str(caught.value)
        assert "rewritten by something other than this session" in message
        assert "Nothing was written" in message and "load the run again" in message
        # Nothing was overwritten: the row is as the other writer left it.
        assert stored(admin, "r") == (1, foreign)
        # Loading adopts what is stored; the session may then save over it knowingly.
        assert session.load().version == "written outside"
        session.save(record("r", 2, "after looking"), 1)
    assert stored(admin, "r")[0] == 2


# covers: X-HOST, R-STORE-3
def test_the_check_holds_after_a_load_and_on_the_delta_path(store, admin):
    records = [sample_record("d", n, marker=f"-{n}-" + "d" * 200) for n in range(1, 5)]
    with store.acquire("d") as session:
        session.save(records[0], 0)
        session.save(
            records[1],
            1,
            EncodedRecord(record_to_json(records[1]), record_delta(records[0], records[1])),
        )
        (deltas,) = admin.execute("SELECT count(*) FROM pulse_durable.deltas").fetchone()
        assert deltas == 1  # the delta path was taken
        assert session.load().revision == 2  # the version now comes from this load
        # A rewrite of the complete record under the deltas, revision kept.
        foreign = record_to_json(records[0])
        rewrite(admin, "d", foreign)
        with pytest.raises(ForeignWriteError):
            session.save(
                records[2],
                2,
                EncodedRecord(record_to_json(records[2]), record_delta(records[1], records[2])),
            )
        assert admin.execute("SELECT count(*) FROM pulse_durable.deltas").fetchone() == (1,)
        assert stored(admin, "d") == (2, foreign)
        # The same refusal for a save of the complete record.
        with pytest.raises(ForeignWriteError):
            session.save(records[2], 2)
        assert stored(admin, "d") == (2, foreign)
        session.load()  # adopt it (the deltas apply to what is stored), then go on
        session.save(records[2], 2)
        assert stored(admin, "d")[0] == 3


# covers: X-HOST
def test_an_external_update_of_another_column_is_seen_too(store, admin):
    with store.acquire("c") as session:
        session.save(record("c", 1), 0)
        admin.execute(
            "UPDATE pulse_durable.runs SET saved_at = now() WHERE run_key = sha256(%s)",
            [b"c"],
        )
        with pytest.raises(ForeignWriteError):
            session.save(record("c", 2), 1)


# covers: X-HOST, R-STORE-3
def test_what_leaves_the_row_version_alone_never_trips_the_check(store, admin):
    with store.acquire("q") as session:
        session.save(record("q", 1), 0)
        # Readers, row locks, vacuum and freezing rewrite nothing.
        assert store.peek("q").revision == 1
        assert [s.run_id for s in store.list_runs()] == ["q"]
        with admin.transaction():
            admin.execute("SELECT 1 FROM pulse_durable.runs FOR UPDATE").fetchall()
        admin.execute("VACUUM (FREEZE) pulse_durable.runs")
        for n in range(2, 12):
            session.save(record("q", n), n - 1)
        session.restore_times(1_700_000_000.0, None)  # the session's own write
        session.save(record("q", 12), 11)
    # A new session knows the row's version from its first load.
    with store.acquire("q") as session:
        session.load()
        session.save(record("q", 13), 12)
    assert stored(admin, "q")[0] == 13


# covers: X-HOST
def test_a_stale_revision_is_still_an_ordinary_conflict(store, admin):
    with store.acquire("s") as session:
        session.save(record("s", 1), 0)
        admin.execute(
            "UPDATE pulse_durable.runs SET revision = 5 WHERE run_key = sha256(%s)", [b"s"]
        )
        with pytest.raises(ConflictError) as caught:
            session.save(record("s", 2), 1)
        assert not isinstance(caught.value, ForeignWriteError)
        assert "found revision 5" in str(caught.value)


def test_the_error_survives_pickling() -> None:
    error = ForeignWriteError("rewritten", revision=7)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.revision) == (ForeignWriteError, "rewritten", 7)


# covers: X-HOST, R-STORE-3
def test_closing_a_session_does_not_fold_over_a_row_rewritten_after_its_last_save(store, admin):
    records = [sample_record("f", n, marker=f"-{n}-" + "f" * 200) for n in range(1, 3)]
    with store.acquire("f") as session:
        session.save(records[0], 0)
        session.save(
            records[1],
            1,
            EncodedRecord(record_to_json(records[1]), record_delta(records[0], records[1])),
        )
        (deltas,) = admin.execute("SELECT count(*) FROM pulse_durable.deltas").fetchone()
        assert deltas == 1  # closing has deltas to fold
        # Rewritten behind the owner's back after its last save, revision kept.
        admin.execute(
            "UPDATE pulse_durable.runs SET record = record WHERE run_key = sha256(%s)",
            [b"f"],
        )
        before = stored(admin, "f")
    # The fold on close wrote nothing over the foreign row.
    assert stored(admin, "f") == before
