"""Stream records that ``resume`` refuses before anything runs, on real file and SQLite stores.

Each test runs a real graph until it stops, damages one field of the stored record through the
store's own file or row, and resumes: the resume raises a typed error before any recovery event,
body or save, and every stored byte stays as it was. The last tests cover failures known only by
implication (a Sub try over a failed child, whose own failure was never saved): the stream plan
treats that try as failed, as ``resume`` does.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from durable_core import (
    AttemptState,
    CancelToken,
    CodecError,
    Codecs,
    CorruptRecordError,
    DurableError,
    Graph,
    In,
    Key,
    Out,
    Retry,
    RunRecord,
    Runtime,
    StreamTerminal,
)
from durable_core.durable.streams import Source
from durable_core.records.fields import INT_MAX
from tests.durable_core.durable.scenarios import FailingStore, SaveFailure, load, open_store

KINDS = ["file", "sqlite"]

COUNT = Key("count", int)
EVENTS = Key("events", int, stream=True, capacity=4)
ACKED = Key("acked", list[int])
TOTAL = Key("total", int)

Document = dict[str, Any]


class Stored:
    """A real store with the means to read and change its stored bytes directly."""

    def __init__(self, kind: str, location: Path) -> None:
        self.kind = kind
        self.location = location
        self.store = open_store(kind, location)

    def close(self) -> None:
        self.store.close()

    def raw(self) -> dict[str, bytes]:
        """Every stored byte of the store (lock files aside): the files of the directory, or
        every row of the database."""
        if self.kind == "file":
            return {
                p.name: p.read_bytes()
                for p in sorted(self.location.iterdir())
                if p.is_file() and not p.name.endswith(".lock")
            }
        db = sqlite3.connect(f"file:{self.location / 'runs.sqlite'}?mode=ro", uri=True)
        try:
            rows: dict[str, bytes] = {}
            for table in ("durable_runs", "durable_deltas"):
                for row in db.execute(f"SELECT * FROM {table} ORDER BY 1, 2"):
                    rows[f"{table}:{row[0]}:{row[1]}"] = repr(row).encode()
            return rows
        finally:
            db.close()

    def tamper(self, change: Callable[[Document], None], run_id: str = "r1") -> None:
        """Edit the stored JSON for real: in the record file, or in the SQLite row."""
        if self.kind == "file":
            path = Path(self.store.record_path(run_id))
            assert not path.with_suffix(".journal").exists()  # at rest: one complete record
            document = json.loads(path.read_bytes())
            change(document)
            path.write_bytes(json.dumps(document).encode())
            return
        db = sqlite3.connect(self.location / "runs.sqlite")
        try:
            assert not db.execute("SELECT count(*) FROM durable_deltas").fetchone()[0]
            (blob,) = db.execute(
                "SELECT record FROM durable_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            document = json.loads(blob)
            change(document)
            db.execute(
                "UPDATE durable_runs SET record = ? WHERE run_id = ?",
                (json.dumps(document).encode(), run_id),
            )
            db.commit()
        finally:
            db.close()


@pytest.fixture(params=KINDS)
def stored(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    opened = Stored(request.param, tmp_path / "store")
    yield opened
    opened.close()


class Events:
    """A runtime observer: the recovery events it saw; ``confirmed`` is set once ``node``
    was confirmed."""

    def __init__(self, node: str = "") -> None:
        self.seen: list[Any] = []
        self.node = node
        self.confirmed = threading.Event()

    def __call__(self, event: Any) -> None:
        self.seen.append(event)
        if event.kind == "node_confirmed" and event.node_id == self.node:
            self.confirmed.set()


def stream_graph(
    calls: list[str], token: CancelToken | None = None, tail_done: Events | None = None
) -> Graph:
    """``tail`` sends ``count`` ints with positions; ``load`` acks each delivery and, given a
    token, stops the run after 3 (after 1 once ``tail`` is confirmed, given ``tail_done``);
    ``sum`` reads values."""
    g = Graph("streams", inputs=[COUNT])

    @g.node("tail", requires=[COUNT], provides=[EVENTS])
    async def tail(rc: Any) -> None:
        calls.append("tail")
        w = rc.writer(EVENTS)
        for i in range(w.position or 0, rc.get(COUNT)):
            await w.send_at(i, i + 1)

    @g.node("load", requires=[EVENTS], provides=[ACKED])
    async def load_(rc: Any) -> None:
        calls.append("load")
        got = []
        async for d in rc.reader(EVENTS).deliveries():
            got.append(d.value)
            await d.ack()
            if token is not None and not token.canceled:
                if tail_done is not None:
                    await asyncio.to_thread(tail_done.confirmed.wait, 60)
                if tail_done is not None or len(got) == 3:
                    token.cancel()
                    await asyncio.Event().wait()  # canceled: the node stays active
        rc.set(ACKED, got)

    @g.node("sum", requires=[EVENTS], provides=[TOTAL])
    def total(rc: Any) -> None:
        calls.append("sum")
        rc.set(TOTAL, sum(rc.reader(EVENTS)))

    return g


def mid_stream(stored: Stored) -> list[str]:
    """A run stopped while ``tail`` is still sending (``load`` holds it back after 3 of 20
    elements): its source is active."""
    calls: list[str] = []
    token = CancelToken()
    result = Runtime(stored.store).run(
        stream_graph(calls, token), run_id="r1", version="v1", inputs={COUNT: 20}, cancel=token
    )
    assert result.status == "canceled"
    record = load(stored.store, "r1")
    assert "tail" not in record.scopes[record.root_scope].nodes
    assert writer(record).last_sequence >= 3
    return calls


def producer_done(stored: Stored) -> list[str]:
    """A run stopped after ``tail`` was confirmed, while ``load`` still reads: a completed
    source whose stream output is a descriptor."""
    calls: list[str] = []
    token = CancelToken()
    done = Events("tail")
    result = Runtime(stored.store, observers=[done]).run(
        stream_graph(calls, token, done), run_id="r1", version="v1", inputs={COUNT: 3}, cancel=token
    )
    assert result.status == "canceled"
    record = load(stored.store, "r1")
    nodes = record.scopes[record.root_scope].nodes
    assert "tail" in nodes and "load" not in nodes
    return calls


def writer(record: RunRecord) -> Any:
    (found,) = [e for e in record.streams.values() if e.group == "" and e.node_id == "tail"]
    return found


def entries(document: Document, **match: str) -> list[Document]:
    return [
        e
        for e in document["Streams"].values()
        if all(e[name] == value for name, value in match.items())
    ]


def descriptor(document: Document) -> Document:
    (value,) = document["Scopes"][document["RootScope"]]["Nodes"]["tail"]["Outputs"]
    return value


def refused(
    stored: Stored,
    calls: list[str],
    change: Callable[[Document], None],
    error: type[DurableError] = CorruptRecordError,
    match: str = "",
    count: int = 20,
) -> DurableError:
    """Damage the stored record with ``change``, resume: ``error`` before any event, body or
    save, and every stored byte as it was."""
    stored.tamper(change)
    before = stored.raw()
    ran = list(calls)
    events = Events()
    with pytest.raises(error, match=match) as caught:
        Runtime(stored.store, observers=[events]).resume(
            stream_graph(calls), run_id="r1", version="v1", inputs={COUNT: count}
        )
    assert events.seen == []
    assert calls == ran
    assert stored.raw() == before
    return caught.value


# -- reading groups --------------------------------------------------------------------------


def test_a_lost_reading_group_of_a_completed_source_is_refused(stored: Stored) -> None:
    # covers: S-2, S-1
    calls = producer_done(stored)

    def drop(document: Document) -> None:
        (gone,) = [k for k, e in document["Streams"].items() if e["Group"] == "load"]
        del document["Streams"][gone]

    caught = refused(stored, calls, drop, match="reading group 'load'", count=3)
    assert "has no entry" in str(caught) and "keep this one as evidence" in str(caught)
    assert caught.rule == "S-2" and caught.path is not None and "Streams" in caught.path


def test_a_lost_reading_group_of_an_active_source_is_refused(stored: Stored) -> None:
    # covers: S-2, S-3
    calls = mid_stream(stored)

    def drop(document: Document) -> None:
        (gone,) = [k for k, e in document["Streams"].items() if e["Group"] == "sum"]
        del document["Streams"][gone]

    refused(stored, calls, drop, match="reading group 'sum'")


def test_a_group_of_an_older_generation_than_its_source_is_refused(stored: Stored) -> None:
    # covers: S-2
    calls = mid_stream(stored)

    def newer_writer(document: Document) -> None:
        (entry,) = entries(document, Group="")
        entry["Generation"] = 2

    caught = refused(stored, calls, newer_writer, match="an older generation")
    assert "generation 1 differs from its source's 2" in str(caught)


# -- the writer's cursor ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cursor", "problem"),
    [
        (b"{not json", "JSONDecodeError"),
        (b"\xff\xfe7", "UnicodeDecodeError"),
        ('"position 7"'.encode("utf-16"), "UnicodeDecodeError"),  # JSON, but not UTF-8
        (b"NaN", "NaN is not a JSON value"),
    ],
)
def test_a_writer_cursor_that_is_not_utf8_json_is_refused(
    stored: Stored, cursor: bytes, problem: str
) -> None:
    # covers: S-3, S-2
    calls = mid_stream(stored)

    def damage(document: Document) -> None:
        (entry,) = entries(document, Group="")
        entry["Cursor"] = base64.b64encode(cursor).decode()

    caught = refused(stored, calls, damage, match="Cursor")
    assert problem in str(caught) and caught.path is not None and caught.path.endswith(".Cursor")


# -- stream descriptors ----------------------------------------------------------------------


@pytest.mark.parametrize(("field", "value"), [("TypeID", "json:str"), ("Version", "2")])
def test_a_descriptor_of_another_element_codec_is_refused_as_a_codec_error(
    stored: Stored, field: str, value: str
) -> None:
    # covers: S-1, R-VAL-3, C-1
    calls = producer_done(stored)

    def damage(document: Document) -> None:
        descriptor(document)[field] = value

    caught = refused(stored, calls, damage, CodecError, match="codec", count=3)
    assert "'tail'" in str(caught) and "events" in str(caught)


@attrs.frozen
class Reading:
    value: int


READINGS = Key("readings", Reading, stream=True, capacity=4)


def test_a_descriptor_whose_codec_version_changed_since_is_refused(tmp_path: Path) -> None:
    # covers: S-1, R-VAL-3, C-1
    def registry(version: str) -> Codecs:
        codecs = Codecs.default()
        codecs.register_json(Reading, version=version)
        return codecs

    calls: list[str] = []
    token = CancelToken()
    done = Events("make")
    g = Graph("readings")

    @g.node("make", provides=[READINGS])
    async def make(rc: Any) -> None:
        calls.append("make")
        for i in range(3):
            await rc.writer(READINGS).send_at(Reading(i), i + 1)

    @g.node("use", requires=[READINGS], provides=[TOTAL])
    async def use(rc: Any) -> None:
        calls.append("use")
        async for d in rc.reader(READINGS).deliveries():
            await d.ack()
            if not token.canceled:
                await asyncio.to_thread(done.confirmed.wait, 60)
                token.cancel()
                await asyncio.Event().wait()
        rc.set(TOTAL, 0)

    stored = Stored("sqlite", tmp_path / "store")
    try:
        first = Runtime(stored.store, registry("1"), observers=[done]).run(
            g, run_id="r1", version="v1", inputs={}, cancel=token
        )
        assert first.status == "canceled"
        before, ran, events = stored.raw(), list(calls), Events()
        with pytest.raises(CodecError, match="version") as caught:
            Runtime(stored.store, registry("2"), observers=[events]).resume(
                g, run_id="r1", version="v1", inputs={}
            )
        assert "'make'" in str(caught.value) and "readings" in str(caught.value)
        assert events.seen == [] and calls == ran and stored.raw() == before
    finally:
        stored.close()


@pytest.mark.parametrize("terminal", ["", "failed", "canceled"])
def test_a_descriptor_terminal_other_than_its_writers_is_refused(
    stored: Stored, terminal: str
) -> None:
    # covers: S-1
    calls = producer_done(stored)

    def damage(document: Document) -> None:
        descriptor(document)["Stream"]["Terminal"] = terminal

    caught = refused(stored, calls, damage, match="Terminal", count=3)
    assert caught.path is not None and caught.path.endswith(".Terminal")


@pytest.mark.parametrize(("group", "terminal"), [("", ""), ("load", ""), ("", "canceled")])
def test_an_entry_of_a_confirmed_writer_that_is_not_completed_is_refused(
    stored: Stored, group: str, terminal: str
) -> None:
    # covers: S-1
    # A producer's confirmation completes every entry of its streams in the same save: an
    # entry still open (or canceled) beside a confirmed writer is not a record Durable wrote.
    calls = producer_done(stored)

    def damage(document: Document) -> None:
        (entry,) = entries(document, NodeID="tail", Group=group)
        entry["Terminal"] = terminal

    caught = refused(stored, calls, damage, match="its writer is confirmed", count=3)
    assert caught.rule == "S-1" and "not all completed" in str(caught)


def test_a_descriptor_capacity_other_than_its_keys_is_refused(stored: Stored) -> None:
    # covers: S-1
    calls = producer_done(stored)

    def damage(document: Document) -> None:
        descriptor(document)["Stream"]["Capacity"] = 5

    caught = refused(stored, calls, damage, match="Capacity 5", count=3)
    assert "capacity 4" in str(caught)


# -- counters at the top of their range ------------------------------------------------------


def test_an_active_source_at_the_largest_generation_is_refused(stored: Stored) -> None:
    # covers: S-2
    calls = mid_stream(stored)

    def damage(document: Document) -> None:
        for entry in entries(document, NodeID="tail"):
            entry["Generation"] = INT_MAX

    caught = refused(stored, calls, damage, match="cannot continue")
    assert "new run id" in str(caught) and caught.path is not None
    assert caught.path.endswith(".Generation")


def test_a_completed_source_at_the_largest_generation_is_refused(stored: Stored) -> None:
    # covers: S-2
    calls = producer_done(stored)

    def damage(document: Document) -> None:
        for entry in entries(document, NodeID="tail"):
            entry["Generation"] = INT_MAX

    refused(stored, calls, damage, match="cannot continue", count=3)


def test_an_active_source_at_the_largest_sequence_is_refused(stored: Stored) -> None:
    # covers: S-2, S-3
    calls = mid_stream(stored)

    def damage(document: Document) -> None:
        (entry,) = entries(document, Group="")
        entry["LastSequence"] = entry["AckedThrough"] = INT_MAX

    caught = refused(stored, calls, damage, match="cannot continue")
    assert caught.path is not None and caught.path.endswith(".LastSequence")


# -- a source under a failed Sub try -----------------------------------------------------------

INNER = Key("inner", int, stream=True, capacity=4)
SUM = Key("sum", int)


def retried_sub(calls: list[str], token: CancelToken | None = None) -> Graph:
    """``part`` (Retry 2) runs ``make`` (a stream) and ``use`` (its reader): ``use`` fails in
    try 1; in try 2 it stops the run, given a token, once it read everything."""
    child = Graph("part", inputs=[COUNT])

    @child.node("make", requires=[COUNT], provides=[INNER])
    async def make(rc: Any) -> None:
        calls.append("make")
        w = rc.writer(INNER)
        for i in range(w.position or 0, rc.get(COUNT)):
            await w.send_at(i, i + 1)

    @child.node("use", requires=[INNER], provides=[SUM])
    async def use(rc: Any) -> None:
        calls.append("use")
        values = [x async for x in rc.reader(INNER)]
        if calls.count("use") == 1:
            raise ValueError("try 1 breaks")
        if token is not None and not token.canceled:
            token.cancel()
            await asyncio.Event().wait()
        rc.set(SUM, sum(values))

    g = Graph("outer", inputs=[COUNT])
    g.sub("part", child, bindings=[In(COUNT, COUNT), Out(SUM, TOTAL)], aspects=[Retry(2)])
    return g


def test_a_descriptor_naming_a_source_under_a_failed_try_is_refused(stored: Stored) -> None:
    # covers: S-4, S-1, R-ATT-5
    calls: list[str] = []
    token = CancelToken()
    first = Runtime(stored.store).run(
        retried_sub(calls, token), run_id="r1", version="v1", inputs={COUNT: 3}, cancel=token
    )
    assert first.status == "canceled" and calls.count("make") == 2
    record = load(stored.store, "r1")
    tries = sorted(
        (a.index, aid) for aid, a in record.attempts.items() if a.node_id == "part" and a.boundary
    )
    (_, failed_try), (_, live_try) = tries
    assert record.attempts[failed_try].state is AttemptState.FAILED
    old_make = next(
        aid
        for aid, a in record.attempts.items()
        if a.node_id == "make" and a.parent == failed_try and not a.boundary
    )

    def forge(document: Document) -> None:
        (value,) = document["Scopes"][live_try]["Nodes"]["make"]["Outputs"]
        value["Stream"].update(
            Scope=failed_try,
            Attempt=old_make,
            SourceID=Source(failed_try, "make", "inner").source_id,
        )

    stored.tamper(forge)
    before, ran, events = stored.raw(), list(calls), Events()
    with pytest.raises(CorruptRecordError, match="failed attempt") as caught:
        Runtime(stored.store, observers=[events]).resume(
            retried_sub(calls), run_id="r1", version="v1", inputs={COUNT: 3}
        )
    assert caught.value.rule == "S-4"
    assert events.seen == [] and calls == ran and stored.raw() == before


# -- failures known only by implication ------------------------------------------------------


def producer_in_broken_try(calls: list[str], *, resumable: bool) -> Graph:
    """``part`` (Retry 2) runs ``make``, which sends elements and, in try 1, waits; ``boom``
    reads one element and fails in try 1."""
    child = Graph("part", inputs=[COUNT])

    @child.node("make", requires=[COUNT], provides=[INNER])
    async def make(rc: Any) -> None:
        calls.append("make")
        w = rc.writer(INNER)
        for i in range(w.position or 0, rc.get(COUNT)):
            await (w.send_at(i, i + 1) if resumable else w.send(i))
        if calls.count("make") == 1:
            await asyncio.Event().wait()  # try 1: still producing when the try breaks

    @child.node("boom", requires=[INNER], provides=[SUM])
    async def boom(rc: Any) -> None:
        calls.append("boom")
        reader = rc.reader(INNER)
        if calls.count("boom") == 1:
            await reader.receive()
            raise ValueError("try 1 breaks")
        rc.set(SUM, sum([x async for x in reader]))

    g = Graph("outer", inputs=[COUNT])
    g.sub("part", child, bindings=[In(COUNT, COUNT), Out(SUM, TOTAL)], aspects=[Retry(2)])
    return g


def try_failure_saved(record: RunRecord) -> bool:
    return any(
        a.node_id == "part" and a.boundary and a.state is AttemptState.FAILED
        for a in record.attempts.values()
    )


def broken_try(stored: Stored, *, resumable: bool) -> tuple[list[str], RunRecord]:
    """A run that stopped after ``boom``'s failure was saved and before the failure of the
    Sub try (its save fails): ``make`` is still active in that try."""
    calls: list[str] = []
    failing = FailingStore(stored.store, try_failure_saved)
    try:
        result = Runtime(failing).run(
            producer_in_broken_try(calls, resumable=resumable),
            run_id="r1",
            version="v1",
            inputs={COUNT: 3},
        )
        assert result.status == "failed"
    except SaveFailure:
        pass
    except DurableError as exc:
        assert isinstance(exc.__cause__, SaveFailure) or "SaveFailure" in str(exc)
    record = load(stored.store, "r1")
    assert not try_failure_saved(record)
    boom = [a for a in record.attempts.values() if a.node_id == "boom"]
    assert [a.state for a in boom] == [AttemptState.FAILED]
    (source,) = [e for e in record.streams.values() if e.node_id == "make" and e.group == ""]
    assert source.terminal is StreamTerminal.OPEN and source.last_sequence >= 1
    return calls, record


def test_a_non_resumable_producer_in_a_try_failed_by_implication_does_not_block_resume(
    stored: Stored,
) -> None:
    # covers: S-3, R-ATT-4, R-SCOPE-2
    calls, record = broken_try(stored, resumable=False)
    (source,) = [e for e in record.streams.values() if e.node_id == "make" and e.group == ""]
    assert not source.resumable
    result = Runtime(stored.store).resume(
        producer_in_broken_try(calls, resumable=False), run_id="r1", version="v1", inputs={COUNT: 3}
    )
    assert result.status == "completed", result.error
    assert result[TOTAL] == 3 and calls.count("make") == 2


def test_the_repair_never_writes_into_a_try_failed_by_implication(stored: Stored) -> None:
    # covers: S-6, R-ATT-4, R-ATT-5
    calls, record = broken_try(stored, resumable=True)
    (try_1,) = [aid for aid, a in record.attempts.items() if a.node_id == "part" and a.boundary]

    def half_failed(document: Document) -> None:  # an older record: one entry failed
        (entry,) = [e for e in entries(document, NodeID="make") if e["Group"] == ""]
        entry["Terminal"] = "failed"

    stored.tamper(half_failed)
    damaged = load(stored.store, "r1")
    result = Runtime(stored.store).resume(
        producer_in_broken_try(calls, resumable=True), run_id="r1", version="v1", inputs={COUNT: 3}
    )
    assert result.status == "completed", result.error
    after = load(stored.store, "r1")
    # The repair would save every entry of make's try-1 source failed, and make's attempt.
    old = {k: e.terminal for k, e in damaged.streams.items() if e.scope == try_1}
    assert sorted(old.values()) == [StreamTerminal.OPEN, StreamTerminal.FAILED]
    assert {k: after.streams[k].terminal for k in old} == old
    make_1 = [
        aid for aid, a in damaged.attempts.items() if a.node_id == "make" and a.parent == try_1
    ]
    assert [after.attempts[aid].state for aid in make_1] == [AttemptState.ACTIVE]
    assert after.attempts[try_1].state is AttemptState.FAILED  # the try's own failure, saved


# -- reading groups inside a Sub and of a Sub's Out alias --------------------------------------

MADE = Key("made", int, stream=True, capacity=4)
ALIAS = Key("alias", int, stream=True, capacity=4)


def sub_readers(calls: list[str], token: CancelToken | None = None) -> Graph:
    """``tail`` (root) is read by ``load`` inside the Sub ``part`` through ``In``; ``make``
    inside ``part`` is published through ``Out`` as ``alias`` and read by ``aliased`` in the
    root (both send 0, 1, …). Given a token, ``load`` holds after its first ack and
    ``aliased`` stops the run after element 2, once ``load`` acked: both groups have unacked
    elements in the record."""
    loaded = asyncio.Event()
    child = Graph("part", inputs=[COUNT, INNER])

    @child.node("load", requires=[INNER], provides=[ACKED])
    async def load_(rc: Any) -> None:
        calls.append("load")
        got = []
        async for d in rc.reader(INNER).deliveries():
            got.append(d.value)
            await d.ack()
            if token is not None and not token.canceled:
                loaded.set()
                await asyncio.Event().wait()  # canceled: the node stays active
        rc.set(ACKED, got)

    @child.node("make", requires=[COUNT], provides=[MADE])
    async def make(rc: Any) -> None:
        calls.append("make")
        w = rc.writer(MADE)
        for i in range(w.position or 0, rc.get(COUNT)):
            await w.send_at(i, i + 1)

    g = Graph("outer", inputs=[COUNT])

    @g.node("tail", requires=[COUNT], provides=[EVENTS])
    async def tail(rc: Any) -> None:
        calls.append("tail")
        w = rc.writer(EVENTS)
        for i in range(w.position or 0, rc.get(COUNT)):
            await w.send_at(i, i + 1)

    g.sub(
        "part",
        child,
        bindings=[In(COUNT, COUNT), In(EVENTS, INNER), Out(ACKED, ACKED), Out(MADE, ALIAS)],
    )

    @g.node("aliased", requires=[ALIAS], provides=[TOTAL])
    async def aliased(rc: Any) -> None:
        calls.append("aliased")
        total = 0
        async for x in rc.reader(ALIAS):
            total += x
            if token is not None and not token.canceled and x == 2:
                await loaded.wait()
                token.cancel()
                await asyncio.Event().wait()
        rc.set(TOTAL, total)

    return g


@pytest.mark.parametrize(
    ("node", "group"), [("tail", "part/load"), ("make", "aliased")], ids=["in-sub", "out-alias"]
)
def test_a_lost_group_of_a_reader_inside_a_sub_or_of_an_out_alias_is_refused(
    stored: Stored, node: str, group: str
) -> None:
    # covers: S-2, G-9
    # A reader inside a Sub node (group "part/load") and a reader of a stream a Sub publishes
    # through Out (group "aliased", on the source inside the Sub) are groups like any other:
    # without their entry, the elements they did not acknowledge would be skipped.
    calls: list[str] = []
    token = CancelToken()
    first = Runtime(stored.store).run(
        sub_readers(calls, token), run_id="r1", version="v1", inputs={COUNT: 10}, cancel=token
    )
    assert first.status == "canceled"
    record = load(stored.store, "r1")
    (lost,) = [k for k, e in record.streams.items() if e.node_id == node and e.group == group]
    assert record.streams[lost].pending  # elements it has not acknowledged

    def drop(document: Document) -> None:
        del document["Streams"][lost]

    stored.tamper(drop)
    before, ran, events = stored.raw(), list(calls), Events()
    with pytest.raises(CorruptRecordError, match=f"reading group {group!r}") as caught:
        Runtime(stored.store, observers=[events]).resume(
            sub_readers(calls), run_id="r1", version="v1", inputs={COUNT: 10}
        )
    assert caught.value.rule == "S-2" and "has no entry" in str(caught.value)
    assert events.seen == [] and calls == ran and stored.raw() == before


def test_an_unchanged_run_with_readers_inside_a_sub_and_of_an_alias_resumes(
    stored: Stored,
) -> None:
    # covers: S-2, G-9
    # The check above refuses only lost groups: the same record, unchanged, resumes in full.
    calls: list[str] = []
    token = CancelToken()
    first = Runtime(stored.store).run(
        sub_readers(calls, token), run_id="r1", version="v1", inputs={COUNT: 10}, cancel=token
    )
    assert first.status == "canceled"
    result = Runtime(stored.store).resume(
        sub_readers(calls), run_id="r1", version="v1", inputs={COUNT: 10}
    )
    assert result.status == "completed", result.error
    # load acked element 0 before the stop: it gets the other nine once, in order
    assert result[TOTAL] == sum(range(10)) and result[ACKED] == list(range(1, 10))
