"""What ``run`` and ``resume`` check before anything runs, on real stores (memory, file, SQLite).

Each refusal happens before any body runs (the call log stays as it was) and leaves the stored
record exactly as it was (same bytes, same revision).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import attrs
import pytest

from durable_core import (
    AttemptRecord,
    AttemptState,
    BusyError,
    CancelToken,
    CheckpointError,
    CodecError,
    Codecs,
    ConfigError,
    ConflictError,
    CorruptRecordError,
    DefinitionMismatchError,
    Graph,
    GraphError,
    InputsMismatchError,
    Key,
    MemoryStore,
    NodeFailedError,
    NodeReason,
    NodeRecord,
    NotFoundError,
    Retry,
    RunRecord,
    Runtime,
    ScopeRecord,
    Stream,
    ValueRecord,
    VersionMismatchError,
    record_from_json,
)
from durable_core.durable.fingerprint import values_fingerprint
from tests.durable_core.durable.scenarios import CallLog, load, open_store, stored_bytes

STORES = ["memory", "file", "sqlite"]


@attrs.frozen
class Point:
    x: int
    y: int


SEED = Key("seed", int)
POINT = Key("point", Point)
NORM = Key("norm", int)
OUT = Key("out", str)


def codecs(point_version: str = "1") -> Codecs:
    registry = Codecs.default()
    registry.register_json(Point, version=point_version)
    return registry


def pipeline(log: CallLog, token: CancelToken | None = None, *, changed: bool = False) -> Graph:
    """seed -> make (Point) -> norm -> halt -> out; ``halt`` cancels the run when given a
    token, leaving its root attempt active (resumable). ``changed`` adds a Retry to ``halt``:
    another definition."""
    g = Graph("pipeline", inputs=[SEED])

    @g.node("make", requires=[SEED], provides=[POINT])
    def make(rc: Any) -> None:
        log.write("make")
        rc.set(POINT, Point(rc.get(SEED), rc.get(SEED) * 2))

    @g.node("norm", requires=[POINT], provides=[NORM])
    def norm(rc: Any) -> None:
        log.write("norm")
        p = rc.get(POINT)
        rc.set(NORM, abs(p.x) + abs(p.y))

    @g.node("halt", requires=[NORM], provides=[OUT], aspects=[Retry(2)] if changed else [])
    async def halt(rc: Any) -> None:
        log.write("halt")
        if token is not None:
            token.cancel()
            await asyncio.Event().wait()  # canceled
        rc.set(OUT, f"norm={rc.get(NORM)}")

    return g


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    opened = open_store(request.param, tmp_path / "store")
    opened.kind = request.param
    opened.location = tmp_path / "store"
    yield opened
    opened.close()


@pytest.fixture
def log(tmp_path: Path) -> CallLog:
    return CallLog(tmp_path / "calls.log")


def half_done(store: Any, log: CallLog) -> bytes:
    """Run ``pipeline`` until ``halt`` cancels it; return the stored record's bytes."""
    token = CancelToken()
    result = Runtime(store, codecs()).run(
        pipeline(log, token), run_id="r1", version="v1", inputs={SEED: 3}, cancel=token
    )
    assert result.status == "canceled"
    assert log.calls() == ["make", "norm", "halt"]
    record = load(store, "r1")
    assert sorted(record.scopes[record.root_scope].nodes) == ["make", "norm"]
    return stored_bytes(store, "r1")


def resume(store: Any, log: CallLog, **changes: Any) -> Any:
    graph = changes.pop("graph", None) or pipeline(log)
    registry = changes.pop("codecs", None) or codecs()
    options = {"run_id": "r1", "version": "v1", "inputs": {SEED: 3}} | changes
    return Runtime(store, registry).resume(graph, **options)


def test_a_half_done_run_resumes_and_completes(store: Any, log: CallLog) -> None:
    # covers: R-RT-3, R-VAL-3, R-NODE-1
    half_done(store, log)
    result = resume(store, log)
    assert result.status == "completed"
    assert result[OUT] == "norm=9"
    assert result.restored == 2
    assert log.calls() == ["make", "norm", "halt", "halt"]


def test_a_changed_graph_is_refused_before_any_body_runs(store: Any, log: CallLog) -> None:
    # covers: R-REC-2, R-RT-3
    before = half_done(store, log)
    with pytest.raises(DefinitionMismatchError, match="another definition"):
        resume(store, log, graph=pipeline(log, changed=True))
    assert log.calls() == ["make", "norm", "halt"]
    assert stored_bytes(store, "r1") == before


def test_changed_inputs_are_refused_before_any_body_runs(store: Any, log: CallLog) -> None:
    # covers: R-REC-3
    before = half_done(store, log)
    with pytest.raises(InputsMismatchError, match="original inputs") as refused:
        resume(store, log, inputs={SEED: 4})
    # no input names a place: the advice about moved project folders would only mislead
    assert "{ path = ... }" not in str(refused.value)
    assert log.calls() == ["make", "norm", "halt"]
    assert stored_bytes(store, "r1") == before


def test_a_changed_version_is_refused_before_any_body_runs(store: Any, log: CallLog) -> None:
    # covers: R-REC-2
    before = half_done(store, log)
    with pytest.raises(VersionMismatchError, match="'v1'"):
        resume(store, log, version="v2")
    assert log.calls() == ["make", "norm", "halt"]
    assert stored_bytes(store, "r1") == before


def test_a_codec_whose_version_changed_is_refused(store: Any, log: CallLog) -> None:
    # covers: R-VAL-3, C-1
    before = half_done(store, log)
    with pytest.raises(CodecError, match="version") as caught:
        resume(store, log, codecs=codecs(point_version="2"))
    assert "'make'" in str(caught.value) and "point" in str(caught.value)
    assert log.calls() == ["make", "norm", "halt"]
    assert stored_bytes(store, "r1") == before


def tamper(store: Any, run_id: str, change: Any) -> None:
    """Edit the stored JSON for real: in the record file, or in the SQLite row."""
    if store.kind == "file":
        path = Path(store.record_path(run_id))
        document = json.loads(path.read_bytes())
        change(document)
        path.write_bytes(json.dumps(document).encode())
        return
    db = sqlite3.connect(store.location / "runs.sqlite")
    try:
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


def raw_revision(store: Any, run_id: str) -> int:
    if store.kind == "file":
        return json.loads(Path(store.record_path(run_id)).read_bytes())["Revision"]
    db = sqlite3.connect(store.location / "runs.sqlite")
    try:
        (revision,) = db.execute(
            "SELECT revision FROM durable_runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        return int(revision)
    finally:
        db.close()


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_tampered_value_is_refused_as_corrupt(kind: str, tmp_path: Path, log: CallLog) -> None:
    # covers: R-VAL-1, R-VAL-3, E-1
    store = open_store(kind, tmp_path / "store")
    store.kind, store.location = kind, tmp_path / "store"
    try:
        half_done(store, log)

        def change(document: dict[str, Any]) -> None:
            root = document["RootScope"]
            value = document["Scopes"][root]["Nodes"]["make"]["Outputs"][0]
            value["Data"] = base64.b64encode(b'{"x":3,"y":7}').decode()  # the digest stays

        tamper(store, "r1", change)
        revision = raw_revision(store, "r1")
        with pytest.raises(CorruptRecordError) as caught:
            resume(store, log)
        assert "digest" in str(caught.value).lower() or "SHA-256" in str(caught.value)
        assert log.calls() == ["make", "norm", "halt"]
        assert raw_revision(store, "r1") == revision
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_newer_record_format_is_refused(kind: str, tmp_path: Path, log: CallLog) -> None:
    # covers: R-REC-1
    store = open_store(kind, tmp_path / "store")
    store.kind, store.location = kind, tmp_path / "store"
    try:
        half_done(store, log)
        tamper(store, "r1", lambda document: document.update(Format=3))
        revision = raw_revision(store, "r1")
        with pytest.raises(CorruptRecordError, match="format") as caught:
            resume(store, log)
        error: BaseException | None = caught.value
        rules = []
        while error is not None:  # a store may wrap the decoder's error, keeping it as cause
            rules.append(getattr(error, "rule", None))
            error = error.__cause__
        assert "R-REC-1" in rules
        assert log.calls() == ["make", "norm", "halt"]
        assert raw_revision(store, "r1") == revision  # nothing was saved
    finally:
        store.close()


def test_run_refuses_an_existing_record(store: Any, log: CallLog) -> None:
    # covers: R-RT-3, R-STORE-3, E-1
    before = half_done(store, log)
    with pytest.raises(CheckpointError, match="resume") as caught:
        Runtime(store, codecs()).run(pipeline(log), run_id="r1", version="v1", inputs={SEED: 3})
    assert isinstance(caught.value.__cause__, ConflictError)
    assert log.calls() == ["make", "norm", "halt"]
    assert stored_bytes(store, "r1") == before


def nothing_stored(store: Any, run_id: str) -> bool:
    with store.acquire(run_id) as session:
        try:
            session.load()
        except NotFoundError:
            return True
    return False


def test_resume_of_a_missing_run_is_not_found_and_creates_nothing(store: Any, log: CallLog) -> None:
    # covers: R-RT-3, R-STORE-2
    with pytest.raises(NotFoundError):
        resume(store, log)
    assert log.calls() == []
    assert nothing_stored(store, "r1")
    if store.kind == "file":
        assert not Path(store.record_path("r1")).exists()


class Opaque:
    """A type no codec serves."""


def test_a_root_input_whose_type_has_no_codec_fails_before_anything_is_saved(
    store: Any, log: CallLog
) -> None:
    # covers: R-RT-3, C-2
    thing = Key("thing", Opaque)
    g = Graph("opaque", inputs=[SEED, thing])

    @g.node("use", requires=[SEED, thing], provides=[OUT])
    def use(rc: Any) -> None:
        log.write("use")
        rc.set(OUT, "x")

    with pytest.raises(CodecError, match="key 'thing' of graph 'opaque'") as caught:
        Runtime(store).run(g, run_id="r1", version="v1", inputs={SEED: 1, thing: Opaque()})
    assert "Nothing was run or saved" in str(caught.value)
    assert log.calls() == []
    assert nothing_stored(store, "r1")


def test_a_root_input_value_no_codec_handles_fails_before_anything_is_saved(
    store: Any, log: CallLog
) -> None:
    # covers: R-RT-3, C-2, C-3
    thing = Key("thing", object)  # broad on purpose: the value's own class needs a codec
    g = Graph("opaque", inputs=[SEED, thing])

    @g.node("use", requires=[SEED, thing], provides=[OUT])
    def use(rc: Any) -> None:
        log.write("use")
        rc.set(OUT, "x")

    with pytest.raises(CheckpointError, match="'thing'") as caught:
        Runtime(store).run(g, run_id="r1", version="v1", inputs={SEED: 1, thing: Opaque()})
    assert isinstance(caught.value.__cause__, CodecError)
    message = str(caught.value)
    assert "no codec is registered for tests.durable_core.durable.test_checks.Opaque" in message
    assert "Codecs.from_plugins()" in message
    assert "Nothing was saved" in message
    assert log.calls() == []
    assert nothing_stored(store, "r1")


@pytest.mark.parametrize(
    ("inputs", "error", "match"),
    [
        ({}, GraphError, "not given"),
        ({SEED: "three"}, GraphError, "takes int values: expected int, found str 'three'"),
        ({Key("other", int): 1, SEED: 3}, GraphError, "not a root input"),
    ],
)
def test_wrong_root_inputs_fail_before_anything_is_saved(
    store: Any, log: CallLog, inputs: dict[Any, Any], error: type[Exception], match: str
) -> None:
    # covers: R-RT-3, G-5
    with pytest.raises(error, match=match):
        Runtime(store, codecs()).run(pipeline(log), run_id="r1", version="v1", inputs=inputs)
    assert nothing_stored(store, "r1")


@pytest.mark.parametrize(("option", "value"), [("max_running", 0), ("version", 2)])
def test_bad_options_fail_before_anything_is_saved(
    store: Any, log: CallLog, option: str, value: Any
) -> None:
    # covers: R-RT-3
    options: dict[str, Any] = {"run_id": "r1", "version": "v1", "inputs": {SEED: 3}}
    options[option] = value
    with pytest.raises(ConfigError):
        Runtime(store, codecs()).run(pipeline(log), **options)
    assert nothing_stored(store, "r1")


def test_a_stream_root_input_is_refused_before_anything_is_saved(store: Any) -> None:
    # covers: G-10, R-RT-3
    lines = Key("lines", str, stream=True)
    g = Graph("streams", inputs=[lines])

    @g.node("read", requires=[lines], provides=[OUT])
    async def read(rc: Any) -> None:
        pass

    with pytest.raises(GraphError, match="root input"):
        Runtime(store).run(g, run_id="r1", version="v1", inputs={lines: Stream.replay(lines, [])})
    assert nothing_stored(store, "r1")


def test_a_node_that_failed_for_good_is_reported_and_nothing_runs(store: Any, log: CallLog) -> None:
    # covers: R-ATT-4, G-6
    g = Graph("fails", inputs=[SEED])

    @g.node("first", requires=[SEED], provides=[NORM])
    def first(rc: Any) -> None:
        log.write("first")
        rc.set(NORM, 1)

    @g.node("boom", requires=[NORM], provides=[OUT], aspects=[Retry(2)])
    def boom(rc: Any) -> None:
        log.write("boom")
        raise KeyError("no such thing")

    other = Key("other", int)

    @g.node("slow", requires=[SEED], provides=[other])
    async def slow(rc: Any) -> None:
        log.write("slow")
        await asyncio.Event().wait()  # canceled by the failure of boom

    runtime = Runtime(store)
    first_result = runtime.run(g, run_id="r1", version="v1", inputs={SEED: 1})
    assert first_result.status == "failed"
    assert isinstance(first_result.error, NodeFailedError)
    assert first_result.error.path == "boom"
    assert isinstance(first_result.error.original, KeyError)
    calls, before = log.calls(), stored_bytes(store, "r1")
    assert calls.count("boom") == 2

    again = runtime.resume(g, run_id="r1", version="v1", inputs={SEED: 1})
    assert again.status == "failed"
    assert isinstance(again.error, NodeFailedError)
    assert again.error.path == "boom"
    assert "'boom'" in str(again.error) and "failed for good" in str(again.error)
    assert "fork the run into a new run id ('durable fork', or fork_run)" in str(again.error)
    assert again.saves == 0
    assert again[NORM] == 1  # restored values of the root graph are in the result
    assert again[SEED] == first_result[SEED] == 1  # and the root inputs, as after run
    assert again.values == first_result.values
    assert log.calls() == calls  # nothing ran, not even the canceled "slow"
    assert stored_bytes(store, "r1") == before


def test_a_completed_run_resumes_without_running_or_saving(store: Any, log: CallLog) -> None:
    # covers: R-NODE-1, R-RT-3
    first = Runtime(store, codecs()).run(pipeline(log), run_id="r1", version="v1", inputs={SEED: 3})
    assert first.status == "completed"
    before = stored_bytes(store, "r1")
    again = resume(store, log)
    assert again.status == "completed"
    assert again[OUT] == first[OUT] == "norm=9"
    assert again.restored == 3 and again.saves == 0
    assert log.calls() == ["make", "norm", "halt"]
    assert stored_bytes(store, "r1") == before


def test_a_hand_built_format_1_record_resumes_and_is_written_as_format_2(
    store: Any, log: CallLog
) -> None:
    # covers: R-REC-1, R-SCOPE-1, R-ATT-2, R-NODE-1
    graph = pipeline(log)
    registry = codecs()
    encoded_seed = registry.encode_value(int, 3, name="seed")
    inputs = values_fingerprint(
        [
            ValueRecord(
                name="seed",
                type_id=encoded_seed.codec_id,
                version=encoded_seed.version,
                digest=encoded_seed.digest,
                data=encoded_seed.data,
            )
        ]
    )
    point = registry.encode_value(Point, Point(3, 6), name="point")
    root, make_attempt = "a" * 32, "b" * 32
    record = RunRecord(
        run_id="r1",
        format=1,
        revision=1,
        version="v1",
        definition=graph.fingerprint(),
        inputs=inputs,
        root_scope=root,
        scopes={
            root: ScopeRecord(
                graph="pipeline",
                path="",
                inputs=inputs,
                nodes={
                    "make": NodeRecord(
                        node_id="make",
                        attempt=make_attempt,
                        reason=NodeReason.COMPLETED,
                        outputs=[
                            ValueRecord(
                                name="point",
                                type_id=point.codec_id,
                                version=point.version,
                                digest=point.digest,
                                data=point.data,
                            )
                        ],
                    )
                },
            )
        },
        attempts={
            make_attempt: AttemptRecord(parent=root, node_id="make", state=AttemptState.CONFIRMED)
        },
    )
    with store.acquire("r1") as session:
        session.save(record, 0)
        assert session.load().format == 1

    result = Runtime(store, registry).resume(graph, run_id="r1", version="v1", inputs={SEED: 3})
    assert result.status == "completed"
    assert result[OUT] == "norm=9"
    assert result.restored == 1
    assert log.calls() == ["norm", "halt"]
    final = load(store, "r1")
    assert final.format == 2
    assert (
        final.root_scope == root and final.attempts[make_attempt] == record.attempts[make_attempt]
    )
    assert final.scopes[root].nodes["make"] == record.scopes[root].nodes["make"]
    assert final.revision == 1 + result.saves
    if store.kind == "file":
        assert json.loads(Path(store.record_path("r1")).read_bytes())["Format"] == 2
        assert record_from_json(Path(store.record_path("r1")).read_bytes()).format == 2


class SlowAcquire:
    """A real MemoryStore whose ``acquire`` takes a while (a busy network, a full pool): it
    waits until ``release`` is set (at most 60 s); ``entered`` and ``returned`` tell a test
    where it is."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.entered = threading.Event()
        self.release = threading.Event()
        self.returned = threading.Event()

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        self.entered.set()
        self.release.wait(60)
        try:
            return self.store.acquire(run_id, timeout)
        finally:
            self.returned.set()


def owned_once_closed(store: MemoryStore, run_id: str) -> Any:
    """Acquire ``run_id`` once the session that holds it was closed (at most 60 s)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return store.acquire(run_id)
        except BusyError:
            assert time.monotonic() < deadline, "the late session was never closed"
            time.sleep(0.01)


def test_a_run_canceled_while_acquiring_does_not_keep_the_run(log: CallLog) -> None:
    # covers: R-STORE-1, R-STORE-4
    real = MemoryStore()
    slow = SlowAcquire(real)
    runtime = Runtime(slow, codecs())

    async def cancel_early() -> None:
        task = asyncio.ensure_future(
            runtime.run_async(pipeline(log), run_id="r1", version="v1", inputs={SEED: 3})
        )
        while not slow.entered.is_set():  # canceled while acquiring
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        slow.release.set()  # the acquire in its thread ends after the cancel
        while not slow.returned.is_set():
            await asyncio.sleep(0.005)

    asyncio.run(cancel_early())
    # not BusyError: the session the late acquire got was closed
    with owned_once_closed(real, "r1") as session, pytest.raises(NotFoundError):
        session.load()
    assert log.calls() == []


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_confirmed_node_whose_upstream_is_not_confirmed_is_refused(
    kind: str, tmp_path: Path, log: CallLog
) -> None:
    # covers: R-NODE-2, E-1
    store = open_store(kind, tmp_path / "store")
    store.kind, store.location = kind, tmp_path / "store"
    try:
        half_done(store, log)

        def change(document: dict[str, Any]) -> None:
            # ``make`` loses its confirmation (its root attempt active again, no NodeRecord)
            # while ``norm``, which read make's output, stays confirmed.
            root = document["RootScope"]
            make = document["Scopes"][root]["Nodes"].pop("make")
            document["Attempts"][make["Attempt"]]["State"] = "active"

        tamper(store, "r1", change)
        revision = raw_revision(store, "r1")
        with pytest.raises(CorruptRecordError) as caught:
            resume(store, log)
        assert caught.value.rule == "R-NODE-2"
        assert "'norm'" in str(caught.value) and "'make'" in str(caught.value)
        assert log.calls() == ["make", "norm", "halt"]
        assert raw_revision(store, "r1") == revision
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_value_that_no_longer_decodes_is_refused_naming_its_node(
    kind: str, tmp_path: Path, log: CallLog
) -> None:
    # covers: R-VAL-3, C-1
    # Bytes with a matching digest that the codec cannot decode: the record is refused before
    # anything runs, as a CodecError naming the node and the key.
    store = open_store(kind, tmp_path / "store")
    store.kind, store.location = kind, tmp_path / "store"
    try:
        half_done(store, log)

        def change(document: dict[str, Any]) -> None:
            root = document["RootScope"]
            value = document["Scopes"][root]["Nodes"]["norm"]["Outputs"][0]
            data = b'"nine"'
            value["Data"] = base64.b64encode(data).decode()
            value["Digest"] = hashlib.sha256(data).hexdigest()

        tamper(store, "r1", change)
        revision = raw_revision(store, "r1")
        with pytest.raises(CodecError) as caught:
            resume(store, log)
        assert "node 'norm'" in str(caught.value)
        assert log.calls() == ["make", "norm", "halt"]
        assert raw_revision(store, "r1") == revision
    finally:
        store.close()


@pytest.mark.parametrize("case", ["no longer decodes", "decodes to another type"])
def test_a_value_after_others_of_its_codec_that_does_not_decode_is_refused(
    case: str, tmp_path: Path, log: CallLog
) -> None:
    # covers: R-VAL-3, C-1
    # Resume decodes a run of values of one type and codec with the decoder of the value
    # before; a later one whose bytes (digest matching) do not decode, or decode to another
    # type, is refused all the same, as a CodecError naming its node, before anything runs.
    store = open_store("file", tmp_path / "store")
    store.kind, store.location = "file", tmp_path / "store"
    keys = [Key(f"p{i}", Point) for i in range(4)]
    token = CancelToken()

    def chain() -> Graph:
        g = Graph("points", inputs=[keys[0]])
        for i in range(3):

            @g.node(f"n{i}", requires=[keys[i]], provides=[keys[i + 1]])
            def step(rc: Any, i: int = i) -> None:
                log.write(f"n{i}")
                rc.set(keys[i + 1], Point(rc.get(keys[i]).x + 1, 0))

        @g.node("halt", requires=[keys[3]], provides=[OUT])
        async def halt(rc: Any) -> None:
            log.write("halt")
            token.cancel()
            await asyncio.Event().wait()  # canceled

        return g

    class Lying:
        """Point's JSON codec, except that it decodes the third point (x = 3) as a tuple."""

        type, id, version = Point, "json:tests.durable_core.durable.test_checks.Point", "1"

        def encode(self, value: Any) -> bytes:
            return codecs().encode_value(Point, value).data  # the root input's fingerprint

        def decode(self, data: bytes) -> Any:
            fields = json.loads(data)
            return (3, 0) if fields["x"] == 3 else Point(**fields)

    try:
        options = {"run_id": "r1", "version": "v1", "inputs": {keys[0]: Point(0, 0)}}
        first = Runtime(store, codecs()).run(chain(), cancel=token, **options)
        assert first.status == "canceled"
        stored = load(store, "r1")
        outputs = [stored.scopes[stored.root_scope].nodes[f"n{i}"].outputs[0] for i in range(3)]
        assert [json.loads(v.data)["x"] for v in outputs] == [1, 2, 3]
        assert {v.type_id for v in outputs} == {Lying.id}
        registry = codecs()
        if case == "no longer decodes":

            def change(document: dict[str, Any]) -> None:
                root = document["RootScope"]
                value = document["Scopes"][root]["Nodes"]["n2"]["Outputs"][0]
                data = b"not json"
                value["Data"] = base64.b64encode(data).decode()
                value["Digest"] = hashlib.sha256(data).hexdigest()

            tamper(store, "r1", change)
        else:
            registry = Codecs.default()
            registry.register(Lying())
        revision = raw_revision(store, "r1")
        with pytest.raises(CodecError) as caught:
            Runtime(store, registry).resume(chain(), **options)
        assert "node 'n2'" in str(caught.value) and "'p3'" in str(caught.value)
        assert log.calls() == ["n0", "n1", "n2", "halt"]
        assert raw_revision(store, "r1") == revision
    finally:
        store.close()


def test_a_codec_that_decodes_another_type_is_refused(store: Any, log: CallLog) -> None:
    # covers: R-VAL-3, C-1
    before = half_done(store, log)
    stored = load(store, "r1")
    point = stored.scopes[stored.root_scope].nodes["make"].outputs[0]

    class Lying:
        """Point's codec id and version, but it decodes a tuple."""

        type, id, version = Point, point.type_id, point.version

        def encode(self, value: Any) -> bytes:
            return json.dumps([value.x, value.y]).encode()

        def decode(self, data: bytes) -> Any:
            return (3, 6)

    registry = Codecs.default()
    registry.register(Lying())
    with pytest.raises(CodecError, match="not an instance of the declared type") as caught:
        resume(store, log, codecs=registry)
    assert "'make'" in str(caught.value)
    assert log.calls() == ["make", "norm", "halt"]
    assert stored_bytes(store, "r1") == before
