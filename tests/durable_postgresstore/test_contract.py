"""PostgresStore keeps the Store/Session contract (R-STORE-1…5) on a real server (B-PG-3)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable

import psycopg
import pytest

from durable_core import (
    MAX_REVISION,
    ConflictError,
    CorruptRecordError,
    NotFoundError,
    RunLister,
    RunRecord,
    RunSummary,
    ScopeRecord,
    SessionClosedError,
    Store,
    record_to_json,
)
from durable_postgresstore import PostgresSession, PostgresStore

pytestmark = pytest.mark.postgres


def record(run_id: str, revision: int, **fields) -> RunRecord:
    fields.setdefault("version", "v1")
    return RunRecord(run_id=run_id, revision=revision, **fields)


def put_row(admin, run_id: str, revision: int, data: bytes, fmt: int = 2) -> None:
    admin.execute(
        "INSERT INTO pulse_durable.runs (run_id, revision, format, record, run_key) "
        "VALUES (%s, %s::numeric, %s, %s, sha256(%s))",
        [run_id.encode(), revision, fmt, data, run_id.encode()],
    )


# covers: R-STORE-1, R-STORE-5
def test_the_store_implements_the_protocols(store):
    assert isinstance(store, Store)
    assert isinstance(store, RunLister)
    with store.acquire("r") as session:
        assert isinstance(session, PostgresSession)
        assert session.run_id == "r"


# covers: R-STORE-2
def test_load_without_a_row_is_not_found(store):
    with store.acquire("missing") as session, pytest.raises(NotFoundError, match="no record"):
        session.load()


# covers: R-STORE-2, R-STORE-3, B-PG-3
def test_first_save_expects_zero_then_each_save_expects_the_current_revision(store, admin):
    with store.acquire("run-1") as session:
        first = record("run-1", 1, root_scope="a" * 32, scopes={"a" * 32: ScopeRecord(graph="g")})
        session.save(first, 0)
        assert session.load() == first
        second = record("run-1", 2, definition="d" * 64)
        session.save(second, 1)
        assert session.load() == second
    # The row holds the complete JSON record in BYTEA and the revision as NUMERIC.
    row = admin.execute(
        "SELECT revision, format, record FROM pulse_durable.runs WHERE run_id = %s",
        [b"run-1"],
    ).fetchone()
    assert int(row[0]) == 2 and row[1] == 2
    assert bytes(row[2]) == record_to_json(second)
    assert json.loads(bytes(row[2]))["RunID"] == "run-1"


# covers: R-STORE-2
def test_load_returns_an_isolated_copy(store):
    with store.acquire("copy") as session:
        session.save(record("copy", 1, scopes={"s": ScopeRecord(graph="g")}), 0)
        loaded = session.load()
        loaded.scopes["s"].graph = "changed"
        loaded.version = "changed"
        again = session.load()
        assert again.version == "v1" and again.scopes["s"].graph == "g"
        assert again is not loaded


# covers: R-STORE-3
@pytest.mark.parametrize(
    ("stored", "expected", "proposed", "message"),
    [
        (0, 1, 2, "found no record"),  # expects a record that does not exist
        (1, 0, 1, "found revision 1"),  # first save over an existing record
        (2, 1, 2, "found revision 2"),  # stale expected revision
        (2, 3, 4, "found revision 2"),  # expected revision from the future
    ],
)
def test_a_revision_mismatch_conflicts_and_keeps_the_old_record(
    store, stored, expected, proposed, message
):
    with store.acquire("cas") as session:
        for revision in range(1, stored + 1):
            session.save(record("cas", revision, version=f"v{revision}"), revision - 1)
        with pytest.raises(ConflictError, match=message):
            session.save(record("cas", proposed, version="new"), expected)
        if stored:
            kept = session.load()
            assert kept.revision == stored and kept.version == f"v{stored}"
        else:
            with pytest.raises(NotFoundError):
                session.load()


# covers: R-STORE-3
def test_wrong_revision_or_run_id_in_the_record_conflicts_before_writing(store):
    with store.acquire("mine") as session:
        session.save(record("mine", 1), 0)
        with pytest.raises(ConflictError, match="expected_revision \\+ 1"):
            session.save(record("mine", 3), 1)
        with pytest.raises(ConflictError, match="owns run 'mine'"):
            session.save(record("other", 2), 1)
        with pytest.raises(ConflictError, match="must be an int"):
            session.save(record("mine", 2), "1")  # type: ignore[arg-type]
        with pytest.raises(ConflictError):
            session.save(record("mine", 0), -1)
        assert session.load() == record("mine", 1)


# covers: R-STORE-3, B-PG-3
def test_revisions_are_uint64_and_cannot_overflow(store, admin):
    near = MAX_REVISION - 1
    put_row(admin, "big", near, record_to_json(record("big", near)))
    with store.acquire("big") as session:
        assert session.load().revision == near
        session.save(record("big", MAX_REVISION), near)
        assert session.load().revision == MAX_REVISION
        with pytest.raises(ConflictError, match="overflow"):
            session.save(record("big", MAX_REVISION + 1), MAX_REVISION)
        assert session.load().revision == MAX_REVISION
    # The database refuses an out-of-range revision by itself (CHECK constraint).
    with pytest.raises(psycopg.errors.CheckViolation):
        put_row(admin, "too-big", MAX_REVISION + 1, b"{}")
    with pytest.raises(psycopg.errors.CheckViolation):
        put_row(admin, "zero", 0, b"{}")


# covers: R-STORE-2, E-1
@pytest.mark.parametrize("data", [b"not json", b"\xff\xfe", b'{"RunID": "corrupt", "Unknown": 1}'])
def test_a_corrupt_row_is_corruption_never_not_found(store, admin, data):
    put_row(admin, "corrupt", 1, data)
    with store.acquire("corrupt") as session, pytest.raises(CorruptRecordError):
        session.load()


# covers: R-STORE-2, E-1
def test_a_row_disagreeing_with_its_record_is_corruption(store, admin):
    put_row(admin, "a", 1, record_to_json(record("b", 1)))
    put_row(admin, "c", 5, record_to_json(record("c", 4)))
    with store.acquire("a") as session, pytest.raises(CorruptRecordError, match="run 'b'"):
        session.load()
    with store.acquire("c") as session, pytest.raises(CorruptRecordError, match="revision 5"):
        session.load()


# covers: R-STORE-3, B-FILE-5
def test_a_record_that_cannot_be_encoded_is_refused_before_the_database(store):
    with store.acquire("utf") as session:
        session.save(record("utf", 1), 0)
        with pytest.raises(CorruptRecordError, match="lone surrogate"):
            session.save(record("utf", 2, version="bad \udc80"), 1)
        assert session.load() == record("utf", 1)


# covers: R-STORE-4
def test_close_is_idempotent_and_later_calls_raise(store):
    session = store.acquire("closing")
    session.save(record("closing", 1), 0)
    session.close()
    session.close()
    with pytest.raises(SessionClosedError):
        session.load()
    with pytest.raises(SessionClosedError):
        session.save(record("closing", 2), 1)
    with store.acquire("closing") as again:
        assert again.load().revision == 1


# covers: R-STORE-1
@pytest.mark.parametrize(
    "run_id", ["with space", "名前/../x", "nul\x00inside", "emoji 🦀", "x" * 5000, "'; DROP"]
)
def test_any_unicode_run_id_round_trips(store, run_id):
    with store.acquire(run_id) as session:
        session.save(record(run_id, 1), 0)
        assert session.load().run_id == run_id
    assert [s.run_id for s in store.list_runs()] == [run_id]


# covers: R-STORE-1
@pytest.mark.parametrize("run_id", ["", 7, None, "lone \ud800"])
def test_an_invalid_run_id_is_refused(store, run_id):
    with pytest.raises(CorruptRecordError, match="run id"):
        store.acquire(run_id)


# covers: R-STORE-1
def test_an_invalid_timeout_is_refused(store):
    for bad in (-1, float("nan"), "1"):
        with pytest.raises(ValueError, match="timeout"):
            store.acquire("t", timeout=bad)


# covers: R-STORE-1, E-1
def test_list_runs_gives_metadata_and_lists_unreadable_rows_with_their_error(store, admin):
    for run_id, revisions in (("b", 2), ("a", 1), ("é", 3)):
        with store.acquire(run_id) as session:
            for revision in range(1, revisions + 1):
                session.save(record(run_id, revision), revision - 1)
    put_row(admin, "legacy", 7, record_to_json(record("legacy", 7, format=1)), fmt=1)
    put_row(admin, "broken", 1, b"not json")
    put_row(admin, "moved", 1, record_to_json(record("elsewhere", 1)))
    admin.execute(
        "INSERT INTO pulse_durable.runs VALUES ('\\xff'::bytea, 1, 2, %s, sha256('\\xff'))",
        [record_to_json(record("x", 1))],
    )
    with store.acquire("a"):  # an owned run is listed too
        summaries = store.list_runs()
    assert all(isinstance(s, RunSummary) for s in summaries)
    assert [(s.run_id, s.format, s.revision) for s in summaries if s.ok] == [
        ("a", 2, 1),
        ("b", 2, 2),
        ("legacy", 1, 7),
        ("é", 2, 3),
    ]
    bad = {s.run_id: s for s in summaries if not s.ok}
    assert sorted(bad) == ["", "broken", "moved"]
    assert bad["broken"].error.startswith("CorruptRecordError")
    assert "elsewhere" in bad["moved"].error
    assert "pulse_durable.runs" in bad["broken"].location
    assert "ff" in bad[""].location and "UTF-8" in bad[""].error
    assert summaries[-3:] == [s for s in summaries if not s.ok]  # readable ones first


# covers: R-STORE-4
def test_a_closed_store_refuses_new_sessions(make_store):
    store = make_store()
    store.close()
    store.close()
    with pytest.raises(SessionClosedError, match="closed"):
        store.acquire("r")
    with pytest.raises(SessionClosedError):
        store.list_runs()


def test_the_store_works_as_a_context_manager(postgres_dsn):
    with PostgresStore(postgres_dsn) as store:
        session = store.acquire("ctx")
    with pytest.raises(SessionClosedError):
        session.load()
    assert "closed" in repr(store)


# covers: R-STORE-3, B-PG-3
def test_a_statement_refused_by_the_server_keeps_the_session_and_the_record(store, admin):
    from durable_postgresstore import PostgresStoreError

    with store.acquire("refused") as session:
        session.save(record("refused", 1), 0)
        # Added after the store checked the schema: the server now refuses big records.
        admin.execute(
            "ALTER TABLE pulse_durable.runs ADD CONSTRAINT tiny "
            "CHECK (octet_length(record) < 10) NOT VALID"
        )
        with pytest.raises(PostgresStoreError) as caught:
            session.save(record("refused", 2), 1)
        assert not caught.value.connection_lost
        assert not caught.value.uncertain  # the server refused the statement
        assert caught.value.sqlstate == "23514"  # check_violation
        assert "may or may not" not in str(caught.value)
        admin.execute("ALTER TABLE pulse_durable.runs DROP CONSTRAINT tiny")
        assert session.load() == record("refused", 1)
        session.save(record("refused", 2), 1)
        assert session.load() == record("refused", 2)


# covers: B-PG-3, R-STORE-3
def test_delta_saves_add_rows_fold_when_large_and_rest_as_one_record(store, admin):
    from durable_core import EncodedRecord
    from durable_core.testing import record_delta, sample_record

    records = [sample_record("d", n, marker=f"-{n}-" + "d" * 120) for n in range(1, 81)]
    counts = []
    with store.acquire("d") as session:
        session.save(records[0], 0)
        for previous, current in itertools.pairwise(records):
            delta = record_delta(previous, current)
            session.save(current, previous.revision, EncodedRecord(record_to_json(current), delta))
            (count,) = admin.execute("SELECT count(*) FROM pulse_durable.deltas").fetchone()
            counts.append(count)
            (head,) = admin.execute("SELECT revision FROM pulse_durable.runs").fetchone()
            assert int(head) == current.revision  # the revision column is the CAS head
        assert session.load() == records[-1]
    assert max(counts) > 5 and counts.count(0) > 1  # deltas kept, and folded now and then
    assert admin.execute("SELECT count(*) FROM pulse_durable.deltas").fetchone() == (0,)
    (data,) = admin.execute("SELECT record FROM pulse_durable.runs").fetchone()
    assert bytes(data) == record_to_json(records[-1])  # at rest: the complete record


# covers: B-PG-3, R-STORE-3
def test_closing_writes_the_last_saved_bytes_and_folds_what_is_stored_without_them(store, admin):
    from durable_core import DurableError, EncodedRecord
    from durable_core.testing import record_delta, sample_record

    records = [sample_record("c", n, marker=f"-{n}-" + "c" * 120) for n in range(1, 9)]
    calls: list[int] = []

    def lazy(current: RunRecord) -> Callable[[], bytes]:
        def data() -> bytes:
            calls.append(current.revision)
            return record_to_json(current)

        return data

    def gone() -> bytes:
        raise DurableError("the complete bytes are no longer available")

    def deltas(session: PostgresSession, gone_at_the_end: bool) -> None:
        session.save(records[0], 0)
        for previous, current in itertools.pairwise(records):
            last = current is records[-1]
            made = gone if gone_at_the_end and last else lazy(current)
            delta = record_delta(previous, current)
            session.save(current, previous.revision, EncodedRecord(made, delta))

    # The session wrote every delta: closing writes its last save's bytes, asked for once.
    with store.acquire("c") as session:
        deltas(session, gone_at_the_end=False)
        assert calls == []  # every save after the first wrote only its delta
        assert admin.execute("SELECT count(*) FROM pulse_durable.deltas").fetchone() == (7,)
    assert calls == [8]
    assert admin.execute("SELECT count(*) FROM pulse_durable.deltas").fetchone() == (0,)
    (head, data) = admin.execute("SELECT revision, record FROM pulse_durable.runs").fetchone()
    assert (int(head), bytes(data)) == (8, record_to_json(records[-1]))

    # Bytes no longer available: closing folds the stored deltas (read, applied, checked).
    admin.execute("DELETE FROM pulse_durable.runs")
    with store.acquire("c") as session:
        deltas(session, gone_at_the_end=True)
    assert admin.execute("SELECT count(*) FROM pulse_durable.deltas").fetchone() == (0,)
    (data,) = admin.execute("SELECT record FROM pulse_durable.runs").fetchone()
    assert bytes(data) == record_to_json(records[-1])


# covers: R-STORE-2, R-RT-3, E-1
def test_deltas_without_their_row_are_corrupt_and_never_replaced(store, admin):
    from durable_core import EncodedRecord
    from durable_core.testing import record_delta, sample_record

    records = [sample_record("o", n, marker=f"-{n}-" + "o" * 400) for n in range(1, 5)]
    with store.acquire("o") as session:
        session.save(records[0], 0)
        for previous, current in itertools.pairwise(records):
            delta = record_delta(previous, current)
            session.save(current, previous.revision, EncodedRecord(record_to_json(current), delta))
        session._wrote = False  # closing folds nothing, as a killed owner folds nothing
    admin.execute("DELETE FROM pulse_durable.runs")  # the row removed by hand; deltas remain
    deltas = "SELECT run_key, base, delta FROM pulse_durable.deltas ORDER BY base"
    kept = admin.execute(deltas).fetchall()
    assert len(kept) == 3
    with store.acquire("o") as session:
        with pytest.raises(CorruptRecordError, match="3 saved delta"):
            session.load()
        with pytest.raises(CorruptRecordError, match="saved delta"):
            session.save(sample_record("o", 1), 0)  # a new run never takes their place
    with pytest.raises(CorruptRecordError, match="saved delta"):
        store.peek("o")
    assert admin.execute(deltas).fetchall() == kept
    assert admin.execute("SELECT count(*) FROM pulse_durable.runs").fetchone() == (0,)
