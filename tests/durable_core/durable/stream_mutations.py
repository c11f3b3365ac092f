"""Stopped runs with streams, messages and managed state, and the mutations of their records
that ``test_stream_record_mutations`` feeds to ``resume`` through the file and SQLite stores.

A *base* is a real run of a real graph, stopped mid-way by its own bodies (a ``CancelToken``
canceled after some deliveries, never by a clock), kept as the store's files. A *case* copies a
base's files, changes the stored record by one mutation, writes it back through the store's
file or rows (as the complete record, or as one delta after it), and resumes. The case must be
refused before anything runs (a ``DurableError``, no body called, every stored byte as it was)
or complete with the outputs of an uninterrupted run, and no element acked by a reader may be
missing from what that reader handled (no silent loss).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import sqlite3
import struct
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from durable_core import (
    AttemptState,
    CancelToken,
    Codecs,
    DurableError,
    Graph,
    In,
    Key,
    MemoryStore,
    Out,
    PendingMessageRecord,
    RunRecord,
    Runtime,
    StreamTerminal,
    ValueRecord,
    copy_record,
)
from durable_core.records.jsonio import record_to_json
from durable_core.testing import record_delta
from durable_filestore import FileStore
from durable_sqlitestore import SQLiteStore

COUNT_N = 6
TOP = 2**63 - 1  # the largest int a record holds


@attrs.frozen
class Tally:
    count: int = 0
    total: int = 0


COUNT = Key("count", int)
EVENTS = Key("events", int, stream=True, capacity=64)
CHILD_EVENTS = Key("child_events", int, stream=True, capacity=64)
INNER = Key("inner", int, stream=True, capacity=64)
ALIAS = Key("alias", int, stream=True, capacity=64)
SUM = Key("sum", int)
DONE = Key("done", bool)
TALLY = Key("tally", Tally)
FIRST = Key("first", int)
ALIAS_SUM = Key("alias_sum", int)


def codecs() -> Codecs:
    registry = Codecs.default()
    registry.register_json(Tally)
    return registry


class Control:
    """What the bodies do: count calls, record what the acking reader handled, and stop."""

    def __init__(self) -> None:
        self.calls = 0
        self.handled: set[int] = set()
        self.stop: tuple[str, int] | None = None  # cancel the run after (body, element)
        self.hold: set[tuple[str, int]] = set()  # wait there until the run is canceled
        self.token = CancelToken()

    async def after(self, body: str, n: int) -> None:
        if (body, n) in self.hold:
            await asyncio.Event().wait()  # until the run is canceled
        if self.stop == (body, n):
            self.token.cancel()
            await asyncio.Event().wait()


CONTROL = Control()


def _add_readers(g: Graph, key: Key[Any], *, acks: bool) -> None:
    """A value reader (``sum``), a batched processor with managed state (``proc``: ``tally``
    and ``first``) and, with ``acks``, a reader acking every delivery (``acks``)."""

    @g.node("values", requires=[key], provides=[SUM])
    async def values(rc: Any) -> None:
        CONTROL.calls += 1
        total = 0
        async for v in rc.reader(key):
            total += v
            await CONTROL.after("values", v)
        await CONTROL.after("values-end", 0)
        rc.set(SUM, total)

    @g.processor(
        "proc",
        input=key,
        state=Tally,
        initial=Tally(),
        provides=[TALLY, FIRST],
        commit_every=2,
        max_delay=0,
    )
    async def fold(rc: Any, state: Tally, n: int) -> Tally:
        CONTROL.calls += 1
        if state.count == 0:
            rc.set(FIRST, n)
        await CONTROL.after("proc", n)
        return Tally(state.count + 1, state.total + n)

    @fold.finish
    def finish(rc: Any, state: Tally) -> None:
        CONTROL.calls += 1
        rc.set(TALLY, state)

    if acks:
        _add_acks(g, key)


def _add_acks(g: Graph, key: Key[Any]) -> None:
    @g.node("acks", requires=[key], provides=[DONE])
    async def acks(rc: Any) -> None:
        CONTROL.calls += 1
        async for d in rc.reader(key).deliveries():
            CONTROL.handled.add(d.value)
            await d.ack()
            await CONTROL.after("acks", d.sequence)
        rc.set(DONE, True)


def _add_source(g: Graph, key: Key[Any], name: str = "src") -> None:
    @g.node(name, requires=[COUNT], provides=[key])
    async def src(rc: Any) -> None:
        CONTROL.calls += 1
        w = rc.writer(key)
        for i in range((w.position or 0) + 1, rc.get(COUNT) + 1):
            await w.send_at(i, i)
            await CONTROL.after(name, i)


def flat_graph() -> Graph:
    """``src`` (a resumable producer of 1..count) read by ``values``, ``proc`` and ``acks``."""
    g = Graph("flat", inputs=[COUNT])
    _add_source(g, EVENTS)
    _add_readers(g, EVENTS, acks=True)
    return g


def nested_graph() -> Graph:
    """``src`` in the root, read by ``acks`` there and by ``values`` and ``proc`` inside the
    Sub ``part``, which also produces ``inner`` (published as ``alias``, read by ``aliased``)."""
    child = Graph("part", inputs=[COUNT, CHILD_EVENTS])
    _add_readers(child, CHILD_EVENTS, acks=False)
    _add_source(child, INNER, "inner_src")
    g = Graph("nested", inputs=[COUNT])
    _add_source(g, EVENTS)
    _add_acks(g, EVENTS)
    g.sub(
        "part",
        child,
        bindings=[
            In(COUNT, COUNT),
            In(EVENTS, CHILD_EVENTS),
            Out(SUM, SUM),
            Out(TALLY, TALLY),
            Out(FIRST, FIRST),
            Out(INNER, ALIAS),
        ],
    )

    @g.node("aliased", requires=[ALIAS], provides=[ALIAS_SUM])
    async def aliased(rc: Any) -> None:
        CONTROL.calls += 1
        rc.set(ALIAS_SUM, sum([v async for v in rc.reader(ALIAS)]))

    return g


GRAPHS: dict[str, Graph] = {"flat": flat_graph(), "nested": nested_graph()}
OUTPUTS: dict[str, tuple[Key[Any], ...]] = {
    "flat": (SUM, TALLY, FIRST, DONE),
    "nested": (SUM, TALLY, FIRST, DONE, ALIAS_SUM),
}
RUN_ID = "fuzz"
INPUTS = {COUNT: COUNT_N}

# name -> (graph, stop, hold): how each base is stopped.
BASES: dict[str, tuple[str, tuple[str, int] | None, frozenset[tuple[str, int]]]] = {
    # the acking reader cancels after its third ack; the producer waits after its fourth
    # element (mid-stream)
    "flat-acks3": ("flat", ("acks", 3), frozenset({("src", 4)})),
    # the processor cancels in its fifth message; the producer waits after its fifth element
    "flat-proc5": ("flat", ("proc", 5), frozenset({("src", 5)})),
    # the producer completed; the acking reader and the processor wait mid-way, the value
    # reader cancels at the end of the stream
    "flat-done": ("flat", ("values-end", 0), frozenset({("acks", 2), ("proc", 3)})),
    "nested-acks3": ("nested", ("acks", 3), frozenset({("src", 4), ("inner_src", 3)})),
    "nested-proc4": ("nested", ("proc", 4), frozenset({("src", 4)})),
}


def expected_outputs(graph: str) -> dict[str, Any]:
    """The outputs of an uninterrupted run of ``graph``."""
    global CONTROL
    CONTROL = Control()
    result = Runtime(MemoryStore(), codecs()).run(
        GRAPHS[graph], run_id=RUN_ID, version="1", inputs=INPUTS
    )
    assert result.status == "completed", result.error
    return {key.name: result[key] for key in OUTPUTS[graph]}


@attrs.define
class Base:
    """A stopped run kept as a store's files."""

    name: str
    graph: str
    kind: str  # "file" or "sqlite"
    directory: Path
    record: RunRecord
    handled: frozenset[int]  # what the acking reader handled before the stop


def open_store(kind: str, directory: Path) -> Any:
    return FileStore(directory) if kind == "file" else SQLiteStore(directory / "runs.sqlite")


def build_base(name: str, kind: str, directory: Path) -> Base:
    global CONTROL
    graph, stop, hold = BASES[name]
    CONTROL = Control()
    CONTROL.stop, CONTROL.hold = stop, set(hold)
    directory.mkdir(parents=True)
    store = open_store(kind, directory)
    try:
        result = Runtime(store, codecs()).run(
            GRAPHS[graph], run_id=RUN_ID, version="1", inputs=INPUTS, cancel=CONTROL.token
        )
        assert result.status == "canceled", (name, result.status, result.error)
        with store.acquire(RUN_ID) as session:
            record = copy_record(session.load())
    finally:
        store.close()
    if kind == "sqlite":
        with sqlite3.connect(directory / "runs.sqlite") as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return Base(name, graph, kind, directory, record, frozenset(CONTROL.handled))


# -- writing a record back through the store's files and rows ----------------------------------

_ENTRY = struct.Struct(">II")


def _file_paths(directory: Path) -> tuple[Path, Path]:
    key = hashlib.sha256(RUN_ID.encode()).hexdigest()
    return directory / f"{key}.json", directory / f"{key}.journal"


def write_record(kind: str, directory: Path, old: RunRecord, new: RunRecord, delta: bool) -> None:
    """Store ``new`` (revision ``old.revision + 1``) as the complete record, or as one delta
    after ``old``, by writing the store's file or rows directly."""
    if kind == "file":
        record_path, journal_path = _file_paths(directory)
        if delta:
            data = record_delta(old, new)
            journal_path.write_bytes(_ENTRY.pack(len(data), zlib.crc32(data)) + data)
        else:
            record_path.write_bytes(record_to_json(new))
        return
    with sqlite3.connect(directory / "runs.sqlite") as connection:
        if delta:
            connection.execute(
                "INSERT INTO durable_deltas (run_id, base, delta, saved_at) VALUES (?, ?, ?, ?)",
                (RUN_ID, str(old.revision), record_delta(old, new), 1.0),
            )
        else:
            connection.execute(
                "UPDATE durable_runs SET revision = ?, record = ? WHERE run_id = ?",
                (str(new.revision), record_to_json(new), RUN_ID),
            )
    connection.close()


def stored_state(kind: str, directory: Path) -> Any:
    """Every stored byte of the run (and its save times), to compare before and after."""
    if kind == "file":
        record_path, journal_path = _file_paths(directory)
        return tuple(
            (p.read_bytes(), os.stat(p).st_mtime_ns) if p.exists() else None
            for p in (record_path, journal_path)
        )
    connection = sqlite3.connect(directory / "runs.sqlite")
    try:
        runs = connection.execute("SELECT * FROM durable_runs ORDER BY run_id").fetchall()
        deltas = connection.execute("SELECT * FROM durable_deltas ORDER BY base").fetchall()
    finally:
        connection.close()
    return runs, deltas


def copy_base(base: Base, directory: Path) -> None:
    if base.kind == "file":
        record_path, _ = _file_paths(base.directory)
        directory.mkdir(parents=True)
        shutil.copy2(record_path, directory / record_path.name)
    else:
        directory.mkdir(parents=True)
        shutil.copy2(base.directory / "runs.sqlite", directory / "runs.sqlite")


# -- the outcome of one case -------------------------------------------------------------------


@attrs.define
class Outcome:
    kind: str  # "refused", "completed", or a failure class
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.kind in ("refused", "completed")


def run_case(
    base: Base, mutation: Mutation, directory: Path, delta: bool, expected: dict
) -> Outcome:
    """Apply ``mutation`` to a copy of ``base``, resume it, and judge what happened."""
    global CONTROL
    copy_base(base, directory)
    old = base.record
    new = copy_record(old)
    mutation.apply(new)
    new.revision = old.revision + 1
    write_record(base.kind, directory, old, new, delta)
    before = stored_state(base.kind, directory)
    CONTROL = Control()
    CONTROL.handled = set(base.handled)
    store = open_store(base.kind, directory)
    try:
        try:
            result = Runtime(store, codecs()).resume(
                GRAPHS[base.graph], run_id=RUN_ID, version="1", inputs=INPUTS, timeout=120
            )
        except DurableError as exc:
            calls = CONTROL.calls
            store.close()
            if calls:
                return Outcome("refused-late", f"{type(exc).__name__} after {calls} calls: {exc}")
            if stored_state(base.kind, directory) != before:
                return Outcome("refusal-wrote", f"{type(exc).__name__}: {exc}")
            return Outcome("refused", type(exc).__name__)
        except Exception as exc:
            return Outcome("untyped", f"{type(exc).__name__}: {exc}")
        if result.status != "completed":
            return Outcome(f"ended-{result.status}", repr(result.error)[:300])
        got = {key.name: result[key] for key in OUTPUTS[base.graph]}
        if mutation.refuse:
            return Outcome("accepted", f"completed with {got}")
        if got != expected:
            return Outcome("wrong-result", f"got {got}, expected {expected}")
        missing = set(range(1, COUNT_N + 1)) - CONTROL.handled
        if missing:
            return Outcome("lost-acked", f"the acking reader never handled {sorted(missing)}")
        return Outcome("completed")
    finally:
        store.close()


# -- mutations ---------------------------------------------------------------------------------


@attrs.define
class Mutation:
    """One change of a record: a name that says what it does, and the change."""

    name: str
    change: Callable[[RunRecord], None]
    refuse: bool = False  # the docs promise a refusal (completing is not enough)

    def apply(self, record: RunRecord) -> None:
        self.change(record)

    def __repr__(self) -> str:
        return self.name


class Chooser:
    """Where a mutation's choices come from: Hypothesis draws, or a seeded ``random``."""

    def __init__(self, pick: Callable[[Sequence[Any]], Any], integer: Callable[[int, int], int]):
        self.pick = pick
        self.integer = integer


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hex(c: Chooser) -> str:
    return "".join(c.pick("0123456789abcdef") for _ in range(32))


def _sources(record: RunRecord) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for key, entry in record.streams.items():
        found.setdefault(entry.source_id, []).append(key)
    return found


def _writer_active(record: RunRecord, entry_key: str) -> bool:
    e = record.streams[entry_key]
    scope = record.scopes.get(e.scope)
    return scope is None or e.node_id not in scope.nodes


def _descriptors(record: RunRecord) -> list[tuple[str, str, int]]:
    return [
        (sid, nid, i)
        for sid, scope in sorted(record.scopes.items())
        for nid, node in sorted(scope.nodes.items())
        for i, value in enumerate(node.outputs)
        if value.stream is not None
    ]


def _plain_values(record: RunRecord) -> list[tuple[str, str, int]]:
    return [
        (sid, nid, i)
        for sid, scope in sorted(record.scopes.items())
        for nid, node in sorted(scope.nodes.items())
        for i, value in enumerate(node.outputs)
        if value.stream is None and value.data
    ]


def _bad_bytes(c: Chooser, data: bytes) -> bytes:
    """Bytes other than ``data``: one byte changed, one added, or all gone."""
    how = c.pick(["flip", "append", "empty", "junk"])
    if how == "flip" and data:
        i = c.integer(0, len(data) - 1)
        return data[:i] + bytes([data[i] ^ c.integer(1, 255)]) + data[i + 1 :]
    if how == "empty" and data:
        return b""
    if how == "junk":
        return c.pick([b"\xff\xfe", b"{", b"not json", b'"text"', b"1.5", b"null"])
    return data + b"0"


def _spoil_value(c: Chooser, value: ValueRecord, what: str) -> str:
    """Change a stored value so that it no longer matches its digest or its codec."""
    if what == "data":
        value.data = _bad_bytes(c, value.data)
        return "data (digest kept)"
    if what == "digest":
        value.digest = c.pick(["", "0" * 64, value.digest.upper(), _digest(value.data + b"x")])
        return f"digest {value.digest[:8]!r}"
    if what == "undecodable":
        value.data = c.pick([b"\xff\xfe", b"{", b"not json", b'"text"', b"[1, 2]"])
        value.digest = _digest(value.data)
        return f"data {value.data!r} (digest matching)"
    if what == "type":
        value.type_id = c.pick(["json:str", "json:float", "bytes", "json:other.Thing", ""])
        return f"TypeID {value.type_id!r}"
    value.version = c.pick(["2", "0", "", "1.0"])
    return f"Version {value.version!r}"


SPOILS = ["data", "digest", "undecodable", "type", "version"]


# Each family draws one mutation of a record, or returns None when the record has nothing it
# can change. A family never makes a change that no check could tell from a real record (a
# pending element dropped, as if acked; an element, a state or a cursor replaced by another
# valid one with its digest): such records are real runs of another history.


def m_generation(record: RunRecord, c: Chooser) -> Mutation | None:
    sources = _sources(record)
    source = c.pick(sorted(sources))
    keys = sorted(sources[source])
    how = c.pick(["one-newer", "one-older", "zero", "all-top", "all-near-top", "all-raised"])
    if how == "one-older" and all(record.streams[k].generation == 1 for k in keys):
        how = "one-newer-writer"
    key = c.pick(keys)
    if how == "one-newer-writer":
        key = next((k for k in keys if record.streams[k].group == ""), key)
        how = "one-newer"
    step = c.integer(1, 3)
    g = record.streams[key].group

    def change(r: RunRecord) -> None:
        if how == "one-newer":
            r.streams[key].generation += step
        elif how == "one-older":
            r.streams[key].generation = max(1, r.streams[key].generation - step)
        elif how == "zero":
            r.streams[key].generation = 0
        else:
            top = {"all-top": TOP, "all-near-top": TOP - 1, "all-raised": 1 + step}[how]
            for k in keys:
                r.streams[k].generation = top

    refuse = how in ("one-newer", "zero", "all-top")
    if how == "one-newer" and len(keys) == 1:
        # A source's lone entry (a writer nobody reads yet) one generation newer is a real
        # record of a source resumed more often: nothing to tell it by.
        refuse = False
    return Mutation(f"generation {how} (group {g!r}, step {step})", change, refuse)


def m_front(record: RunRecord, c: Chooser) -> Mutation | None:
    key = c.pick(sorted(record.streams))
    e = record.streams[key]
    what = c.pick(["AckedThrough", "LastSequence"])
    value = c.pick(
        [
            0,
            e.acked_through - 1,
            e.acked_through + 1,
            e.last_sequence - 1,
            e.last_sequence + 1,
            e.last_sequence + c.integer(2, 5),
            TOP,
        ]
    )
    # (Not one below the top: it overflows only if more than one element follows, which no
    # check before the run can know.)
    value = max(0, value)
    scope = "all" if what == "LastSequence" and c.pick([False, True]) else "one"
    if value == (e.acked_through if what == "AckedThrough" else e.last_sequence):
        return None

    def change(r: RunRecord) -> None:
        if scope == "all":
            for entry in r.streams.values():
                if entry.source_id == e.source_id:
                    entry.last_sequence = value
        elif what == "AckedThrough":
            r.streams[key].acked_through = value
        else:
            r.streams[key].last_sequence = value

    return Mutation(f"{what} of {scope} {e.group!r} -> {value}", change)


def m_pending(record: RunRecord, c: Chooser) -> Mutation | None:
    keys = sorted(k for k, e in record.streams.items() if e.pending)
    if not keys:
        return None
    key = c.pick(keys)
    e = record.streams[key]
    i = c.integer(0, len(e.pending) - 1)
    how = c.pick(["data", "digest", "undecodable", "sequence", "duplicate", "swap", "type"])
    seq = c.pick([0, e.acked_through, e.last_sequence + 1, e.pending[0].sequence, TOP])

    def change(r: RunRecord) -> None:
        p = r.streams[key].pending
        if how == "data":
            p[i].data = _bad_bytes(c, p[i].data)
        elif how == "digest":
            p[i].digest = c.pick(["", "0" * 64, _digest(p[i].data + b"x")])
        elif how in ("undecodable", "type"):
            p[i].data = c.pick([b"\xff\xfe", b"{", b"not json", b'"text"', b"1.5", b"[1]"])
            p[i].digest = _digest(p[i].data)
        elif how == "sequence":
            p[i].sequence = seq
        elif how == "duplicate":
            p.insert(i, PendingMessageRecord(p[i].sequence, p[i].data, p[i].digest))
        elif len(p) > 1:
            j = (i + 1) % len(p)
            p[i], p[j] = p[j], p[i]
        else:
            p[i].sequence = seq

    if how == "swap" and len(e.pending) == 1:
        how = "sequence"
    refuse = how != "sequence" or seq != e.pending[i].sequence
    return Mutation(f"pending[{i}] of {e.group!r}: {how} (sequence {seq})", change, refuse)


def m_cursor(record: RunRecord, c: Chooser) -> Mutation | None:
    key = c.pick(sorted(record.streams))
    e = record.streams[key]
    bad = c.pick([b"\xff\xfe", b"\x00cursor", b"{", b"not json", b"[1,", b"\xc3\x28", b"1 2"])
    everywhere = c.pick([False, True])

    def change(r: RunRecord) -> None:
        for k, entry in r.streams.items():
            if k == key or (everywhere and entry.source_id == e.source_id):
                entry.cursor = bad

    # Only the writer's entry holds the producer's position (S-3); a group's copy is not read.
    refuse = everywhere or e.group == ""
    return Mutation(f"cursor {bad!r} of {'all' if everywhere else repr(e.group)}", change, refuse)


def m_resumable(record: RunRecord, c: Chooser) -> Mutation | None:
    # Only a producer that is still active and every entry of its source: a single entry
    # turned non-resumable, or a completed producer's, may be read either way. One that has
    # sent nothing yet loses nothing when it starts again: it is refused only once it sent.
    keys = sorted(
        k for k, e in record.streams.items() if e.group == "" and _writer_active(record, k)
    )
    if not keys:
        return None
    key = c.pick(keys)
    source = record.streams[key].source_id
    sent = record.streams[key].last_sequence > 0

    def change(r: RunRecord) -> None:
        for entry in r.streams.values():
            if entry.source_id == source:
                entry.resumable = False

    node = record.streams[key].node_id
    what = "active source" if sent else "active source that sent nothing"
    return Mutation(f"Resumable false for {what} of {node!r}", change, sent)


def m_terminal(record: RunRecord, c: Chooser) -> Mutation | None:
    key = c.pick(sorted(record.streams))
    e = record.streams[key]
    active = _writer_active(record, key)
    # A failed terminal on an active writer is the older-record repair (S-5), not a refusal.
    choices = [t for t in StreamTerminal if t != e.terminal and not (active and t == "failed")]
    terminal = c.pick(choices)
    everywhere = c.pick([False, True])

    def change(r: RunRecord) -> None:
        for k, entry in r.streams.items():
            if k == key or (everywhere and entry.source_id == e.source_id):
                entry.terminal = terminal

    where = "all" if everywhere else repr(e.group)
    state = "active" if active else "done"
    return Mutation(f"terminal {terminal.value!r} of {where} ({state})", change, True)


def m_identity(record: RunRecord, c: Chooser) -> Mutation | None:
    key = c.pick(sorted(record.streams))
    e = record.streams[key]
    field = c.pick(["source_id", "scope", "node_id", "key", "group"])
    nodes = sorted({a.node_id for a in record.attempts.values()})
    options = {
        "source_id": [_hex(c)] + [s for s in _sources(record) if s != e.source_id],
        "scope": [_hex(c)] + [s for s in record.scopes if s != e.scope],
        "node_id": [n for n in nodes if n != e.node_id] + ["ghost"],
        "key": [k for k in ("events", "inner", "alias", "sum", "ghost") if k != e.key],
        "group": [g for g in ("", "acks", "values", "proc", "part/values", "part/proc", "ghost")]
        + ["aliased"],
    }[field]
    options = [o for o in options if o != getattr(e, field)]
    value = c.pick(options)

    def change(r: RunRecord) -> None:
        setattr(r.streams[key], field, value)

    return Mutation(f"{field} of {e.group!r} -> {value!r}", change, True)


def m_drop_entry(record: RunRecord, c: Chooser) -> Mutation | None:
    key = c.pick(sorted(record.streams))
    e = record.streams[key]
    how = c.pick(["drop", "copy"])

    def change(r: RunRecord) -> None:
        if how == "drop":
            del r.streams[key]
        else:
            r.streams["copy-" + key] = copy_record(r).streams[key]

    return Mutation(f"{how} stream entry of {e.node_id!r}/{e.key!r} group {e.group!r}", change)


def m_message(record: RunRecord, c: Chooser) -> Mutation | None:
    if not record.messages:
        return None
    mid = c.pick(sorted(record.messages))
    m = record.messages[mid]
    stream = record.streams.get(m.stream)
    front = stream.acked_through if stream else 0
    last = stream.last_sequence if stream else 0
    how = c.pick(
        ["sequence", "index", "limit", "state", "stream", "parent", "node", "drop", "copy"]
    )
    others = sorted(k for k, e in record.streams.items() if k != m.stream)
    other = c.pick(others) if others else m.stream
    pending = [p.sequence for p in stream.pending] if stream else []
    sequence = c.pick([0, front + 1, last, last + 1, *(pending[:1]), max(1, front - 1), TOP])
    number = c.integer(0, 3)
    state = c.pick([AttemptState.ACTIVE, AttemptState.FAILED])
    parent = c.pick([_hex(c)] + [a for a in sorted(record.attempts) if a != m.parent])

    def change(r: RunRecord) -> None:
        msg = r.messages[mid]
        if how == "sequence":
            msg.sequence = sequence
        elif how == "index":
            msg.index = number
        elif how == "limit":
            msg.limit = number
        elif how == "state":
            msg.state = state
        elif how == "stream":
            msg.stream = other
            msg.group = r.streams[other].group
        elif how == "parent":
            msg.parent = parent
        elif how == "node":
            msg.node_id = c.pick(["values", "acks", "src", "ghost"])
        elif how == "drop":
            del r.messages[mid]
        else:
            r.messages["copy-" + mid] = copy_record(r).messages[mid]

    detail = {"sequence": sequence, "index": number, "limit": number, "state": state.value}
    return Mutation(f"message at {m.sequence} of {m.group!r}: {how} {detail.get(how, '')}", change)


def m_managed(record: RunRecord, c: Chooser) -> Mutation | None:
    if not record.managed:
        return None
    key = c.pick(sorted(record.managed))
    mg = record.managed[key]
    how = c.pick(["no-state", "state", "value", "copy-value", "foreign-value", "drop", "owner"])
    spoil = c.pick(SPOILS)
    owner = c.pick(["scope", "parent", "node_id"])
    value_index = c.integer(0, max(0, len(mg.values) - 1))
    other_attempt = c.pick([a for a in sorted(record.attempts) if a != mg.parent])
    other_scope = c.pick([_hex(c)] + [s for s in record.scopes if s != mg.scope])
    described = [how]

    def change(r: RunRecord) -> None:
        container = r.managed[key]
        if how == "no-state":
            container.state = None
        elif how == "state" and container.state is not None:
            described.append(_spoil_value(c, container.state, spoil))
        elif how == "value" and container.values:
            described.append(_spoil_value(c, container.values[value_index], spoil))
        elif how == "copy-value" and container.values:
            container.values.append(copy_record(r).managed[key].values[value_index])
        elif how == "foreign-value":
            container.values.append(
                ValueRecord(
                    name="sum", type_id="json:int", version="1", data=b"9", digest=_digest(b"9")
                )
            )
        elif how == "drop":
            del r.managed[key]
        elif how == "owner":
            setattr(
                container,
                owner,
                {"scope": other_scope, "parent": other_attempt, "node_id": "values"}[owner],
            )
        else:
            container.state = None

    return Mutation(f"managed {key.split('/')[0]!r}: {how} {spoil} {owner}", change, True)


def m_descriptor(record: RunRecord, c: Chooser) -> Mutation | None:
    places = _descriptors(record)
    if not places:
        return None
    sid, nid, i = c.pick(places)
    value = record.scopes[sid].nodes[nid].outputs[i]
    d = value.stream
    assert d is not None
    how = c.pick(
        [
            "type",
            "version",
            "terminal",
            "capacity",
            "source_id",
            "scope",
            "node_id",
            "key",
            "attempt",
            "data",
            "plain",
        ]
    )
    terminal = c.pick([t for t in StreamTerminal if t != d.terminal])
    capacity = c.pick([1, 4, 63, 65, 2**31, TOP])
    attempt = c.pick([_hex(c)] + [a for a in sorted(record.attempts) if a != d.attempt])
    other_scope = c.pick([_hex(c)] + [s for s in record.scopes if s != d.scope])
    type_id = c.pick(["json:str", "json:float", "bytes", "json:bool"])
    version = c.pick(["2", "0", ""])
    node = c.pick([n for n in ("values", "acks", "ghost", "src", "inner_src") if n != d.node_id])
    key = c.pick([k for k in ("events", "inner", "alias", "ghost") if k != d.key])
    source = _hex(c)

    def change(r: RunRecord) -> None:
        v = r.scopes[sid].nodes[nid].outputs[i]
        s = v.stream
        assert s is not None
        if how == "type":
            v.type_id = type_id
        elif how == "version":
            v.version = version
        elif how == "terminal":
            s.terminal = terminal
        elif how == "capacity":
            s.capacity = capacity
        elif how == "source_id":
            s.source_id = source
        elif how == "scope":
            s.scope = other_scope
        elif how == "node_id":
            s.node_id = node
        elif how == "key":
            s.key = key
        elif how == "attempt":
            s.attempt = attempt
        elif how == "data":
            v.data = b"1"
            v.digest = _digest(b"1")
        else:
            v.stream = None
            v.data = b"1"
            v.digest = _digest(b"1")

    detail = {"type": type_id, "version": version, "terminal": terminal, "capacity": capacity}
    detail |= {"node_id": node, "key": key, "attempt": attempt, "scope": other_scope}
    name = f"descriptor {nid!r}.{value.name!r}: {how} {detail.get(how, '')}"
    return Mutation(name, change, True)


def m_value(record: RunRecord, c: Chooser) -> Mutation | None:
    places = _plain_values(record)
    if not places:
        return None
    sid, nid, i = c.pick(places)
    spoil = c.pick(SPOILS)
    described = [f"value {nid!r}.{record.scopes[sid].nodes[nid].outputs[i].name!r}"]

    def change(r: RunRecord) -> None:
        described.append(_spoil_value(c, r.scopes[sid].nodes[nid].outputs[i], spoil))

    return Mutation(f"{described[0]}: {spoil}", change, True)


FAMILIES: dict[str, Callable[[RunRecord, Chooser], Mutation | None]] = {
    "generation": m_generation,
    "front": m_front,
    "pending": m_pending,
    "cursor": m_cursor,
    "resumable": m_resumable,
    "terminal": m_terminal,
    "identity": m_identity,
    "drop-entry": m_drop_entry,
    "message": m_message,
    "managed": m_managed,
    "descriptor": m_descriptor,
    "value": m_value,
}
