"""The runtime's API around a run: codec checks before anything runs, the int-for-float rule,
codec plugins, wrong-type inputs, ``DurableResult``, engine observers and ``scope_id``.

Every run uses a real store (memory, file directory, SQLite file); refusals are checked to leave
nothing stored and to run no body.
"""

from __future__ import annotations

import abc
import threading
from pathlib import Path
from typing import Any

import attrs
import pytest

from durable_core import (
    CheckpointError,
    CodecError,
    Codecs,
    EventKind,
    Graph,
    GraphError,
    In,
    InputsMismatchError,
    Key,
    NodeFailedError,
    NotFoundError,
    Observer,
    Out,
    RecoveryEvent,
    Retry,
    Runtime,
    UndeclaredKeyError,
    execute,
    hookimpl,
    make_plugin_manager,
)
from tests.durable_core.durable.scenarios import CallLog, load, open_store, stored_bytes

STORES = ["memory", "file", "sqlite"]


@attrs.frozen
class Point:
    x: int
    y: int


class Opaque:
    """A class no codec serves."""


class Shape(abc.ABC):
    @abc.abstractmethod
    def area(self) -> float: ...


@attrs.frozen
class Square(Shape):
    side: float

    def area(self) -> float:
        return self.side * self.side


SEED = Key("seed", int)
POINT = Key("point", Point)
OUT = Key("out", str)


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    opened = open_store(request.param, tmp_path / "store")
    yield opened
    opened.close()


@pytest.fixture
def log(tmp_path: Path) -> CallLog:
    return CallLog(tmp_path / "calls.log")


def nothing_stored(store: Any, run_id: str) -> bool:
    with store.acquire(run_id) as session:
        try:
            session.load()
        except NotFoundError:
            return True
    return False


# -- every key needs a codec before anything runs -----------------------------------------------


def needs_codecs(log: CallLog) -> Graph:
    """seed -> make (Point) -> Sub "inner" (Point -> Opaque -> str) -> out."""
    inner_point, thing, text = Key("p", Point), Key("thing", Opaque), Key("text", str)
    child = Graph("inner", inputs=[inner_point])

    @child.node("wrap", requires=[inner_point], provides=[thing])
    def wrap(rc: Any) -> None:
        log.write("inner/wrap")
        rc.set(thing, Opaque())

    @child.node("show", requires=[thing], provides=[text])
    def show(rc: Any) -> None:
        log.write("inner/show")
        rc.set(text, "shown")

    g = Graph("needs", inputs=[SEED])

    @g.node("make", requires=[SEED], provides=[POINT])
    def make(rc: Any) -> None:
        log.write("make")  # a side effect that must not happen when a codec is missing
        rc.set(POINT, Point(rc.get(SEED), 0))

    g.sub("inner", child, bindings=[In(POINT, inner_point), Out(text, OUT)])
    return g


def test_a_key_without_codec_is_refused_before_any_body_runs(store: Any, log: CallLog) -> None:
    # covers: R-RT-3, C-2, G-9
    with pytest.raises(CodecError) as caught:
        Runtime(store).run(needs_codecs(log), run_id="r1", version="v1", inputs={SEED: 1})
    message = str(caught.value)
    # every key without a codec is listed, in the root graph and in the Sub graph
    assert (
        "key 'point' of graph 'needs' (type tests.durable_core.durable.test_api.Point)" in message
    )
    assert "key 'p' of graph 'inner' (type tests.durable_core.durable.test_api.Point)" in message
    assert (
        "key 'thing' of graph 'inner' (type tests.durable_core.durable.test_api.Opaque)" in message
    )
    assert "'seed'" not in message and "'text'" not in message and "'out'" not in message
    assert "codecs.register_json(Point)" in message
    assert "codecs.register(codec)" in message and "Codecs.from_plugins()" in message
    assert "Nothing was run or saved" in message
    assert log.calls() == []
    assert nothing_stored(store, "r1")


class OpaqueCodec:
    type = Opaque
    id = "test:opaque"
    version = "1"

    def encode(self, value: Opaque) -> bytes:
        return b""

    def decode(self, data: bytes) -> Opaque:
        return Opaque()


def full_codecs() -> Codecs:
    codecs = Codecs.default()
    codecs.register_json(Point)
    codecs.register(OpaqueCodec())
    return codecs


def test_resume_refuses_a_key_without_codec_before_any_body_runs(store: Any, log: CallLog) -> None:
    # covers: R-RT-3, C-2, R-VAL-3
    graph = needs_codecs(log)
    done = Runtime(store, full_codecs()).run(graph, run_id="r1", version="v1", inputs={SEED: 1})
    assert done.status == "completed" and done[OUT] == "shown"
    before = stored_bytes(store, "r1")
    calls = log.calls()
    partial = Codecs.default()
    partial.register_json(Point)
    with pytest.raises(CodecError, match=r"key 'thing' of graph 'inner'") as caught:
        Runtime(store, partial).resume(graph, run_id="r1", version="v1", inputs={SEED: 1})
    assert "'point'" not in str(caught.value)
    assert log.calls() == calls
    assert stored_bytes(store, "r1") == before


def test_intentionally_broad_key_types_pass_the_check_and_store_actual_classes(
    store: Any,
) -> None:
    # covers: R-VAL-1, R-VAL-3, C-2
    anything, shape, either = Key("anything", object), Key("shape", Shape), Key("either", Any)
    maybe = Key("maybe", Shape | None)
    g = Graph("broad", inputs=[SEED])

    @g.node("make", requires=[SEED], provides=[anything, shape, either, maybe])
    def make(rc: Any) -> None:
        rc.set(anything, 5)
        rc.set(shape, Square(2.0))
        rc.set(either, "text")
        rc.set(maybe, None)

    codecs = Codecs.default()
    codecs.register_json(Square)
    runtime = Runtime(store, codecs)
    result = runtime.run(g, run_id="r1", version="v1", inputs={SEED: 1})
    assert result.status == "completed", result.error
    record = load(store, "r1")
    outputs = {v.name: v for v in record.scopes[record.root_scope].nodes["make"].outputs}
    assert outputs["shape"].type_id == "json:tests.durable_core.durable.test_api.Square"
    assert outputs["anything"].type_id == "json:int"
    again = runtime.resume(g, run_id="r1", version="v1", inputs={SEED: 1})
    assert again.restored == 1
    assert again[shape] == Square(2.0) and again[anything] == 5 and again[maybe] is None


# -- an int for a float ----------------------------------------------------------------------


def test_an_int_for_a_float_key_is_accepted_like_execute_and_comes_back_a_float(
    store: Any,
) -> None:
    # covers: C-1, C-4, R-VAL-3, G-3
    rate, total, halves = Key("rate", float), Key("total", float), Key("halves", list[float])
    g = Graph("floats", inputs=[rate])

    @g.node("sum", requires=[rate], provides=[total, halves])
    def add(rc: Any) -> None:
        rc.set(total, 3)  # an int where a float is declared: accepted by the engine
        rc.set(halves, [1, 0.5])

    assert execute(g, {rate: 1}).status == "completed"
    runtime = Runtime(store)
    result = runtime.run(g, run_id="r1", version="v1", inputs={rate: 1})
    assert result.status == "completed", result.error
    # stored as floats: the resumed run gets floats back, and 1 and 1.0 are the same input
    again = runtime.resume(g, run_id="r1", version="v1", inputs={rate: 1.0})
    assert again.restored == 1
    assert again[total] == 3.0 and type(again[total]) is float
    assert [type(x) for x in again[halves]] == [float, float]


# -- wrong-type inputs are GraphErrors; encoding problems are CodecErrors ------------------------


@pytest.mark.parametrize(
    ("key", "good", "value", "match"),
    [
        (Key("n", int), 5, "5", r"root input 'n' of graph 'typed' takes int values: expected int"),
        (Key("n", int), 1, True, r"takes int values: expected int, found bool True \(a bool is"),
        (Key("f", float), 0.0, False, r"takes float values: expected float, found bool False"),
        (Key("ns", list[int]), [1], [1, "two"], r"takes list\[int\] values: at \[1\]: expected"),
        (Key("m", dict[str, int]), {}, {"a": 1.5}, r"at \['a'\]: expected int, found float 1.5"),
    ],
)
def test_a_wrong_type_input_is_a_graph_error_on_run_and_resume(
    store: Any, key: Key[Any], good: Any, value: Any, match: str
) -> None:
    # covers: R-RT-3, G-5, R-VAL-3
    g = Graph("typed", inputs=[key])
    g.add_node("use", lambda rc: rc.set(OUT, "x"), requires=[key], provides=[OUT])
    with pytest.raises(GraphError, match=match) as caught:
        Runtime(store).run(g, run_id="r1", version="v1", inputs={key: value})
    assert "Nothing was saved" in str(caught.value)
    assert nothing_stored(store, "r1")
    assert Runtime(store).run(g, run_id="r1", version="v1", inputs={key: good}).status == (
        "completed"
    )
    before = stored_bytes(store, "r1")
    with pytest.raises(GraphError, match=match):
        Runtime(store).resume(g, run_id="r1", version="v1", inputs={key: value})
    assert stored_bytes(store, "r1") == before


@pytest.mark.parametrize(
    ("key", "good", "value", "match"),
    [
        (Key("f", float), 1.5, float("nan"), "nan cannot be stored as JSON"),
        (Key("o", object), 1, threading.Lock(), "cannot be persisted"),
        (Key("o", object), 1, lambda: 1, "cannot be persisted"),
        (
            Key("o", object),
            1,
            Opaque(),
            "no codec is registered for tests.durable_core.durable.test_api.Opaque",
        ),
    ],
)
def test_an_input_that_cannot_be_encoded_says_why_and_hints_only_when_a_codec_is_missing(
    store: Any, key: Key[Any], good: Any, value: Any, match: str
) -> None:
    # covers: R-RT-3, C-3, C-4
    g = Graph("encoded", inputs=[key])
    g.add_node("use", lambda rc: rc.set(OUT, "x"), requires=[key], provides=[OUT])
    with pytest.raises(CheckpointError, match=match) as caught:
        Runtime(store).run(g, run_id="r1", version="v1", inputs={key: value})
    assert isinstance(caught.value.__cause__, CodecError)
    message = str(caught.value)
    assert message.startswith(f"run 'r1': root input {key.name!r} cannot be stored: ")
    assert message.count(repr(key.name)) == 1, message  # the key is named once
    assert ("register" in message.lower()) == (type(value) is Opaque), message
    assert nothing_stored(store, "r1")
    assert Runtime(store).run(g, run_id="r1", version="v1", inputs={key: good}).status == (
        "completed"
    )
    with pytest.raises(InputsMismatchError, match=match):
        Runtime(store).resume(g, run_id="r1", version="v1", inputs={key: value})


# -- codec plugins -----------------------------------------------------------------------------


class OpaquePlugin:
    """A real plugin object registering a codec through the hook."""

    @hookimpl
    def durable_register_codecs(self, codecs: Codecs) -> None:
        codecs.register(OpaqueCodec())
        codecs.register_json(Point)


def test_runtime_uses_the_codec_plugins_when_given_plugins_and_no_codecs(
    store: Any, log: CallLog
) -> None:
    # covers: C-2
    plugins = make_plugin_manager(autoload=False, plugins=[("opaque", OpaquePlugin())])
    graph = needs_codecs(log)
    runtime = Runtime(store, plugins=plugins)
    assert "test:opaque" in {codec.id for codec in runtime.codecs}
    result = runtime.run(graph, run_id="r1", version="v1", inputs={SEED: 2})
    assert result.status == "completed", result.error
    assert result[OUT] == "shown"


def test_the_no_codec_error_names_an_installed_plugin_the_registry_does_not_use(
    store: Any, log: CallLog
) -> None:
    # covers: C-2
    plugins = make_plugin_manager(autoload=False, plugins=[("opaque", OpaquePlugin())])
    with pytest.raises(CodecError) as caught:
        Runtime(store, Codecs.default(), plugins=plugins).run(
            needs_codecs(log), run_id="r1", version="v1", inputs={SEED: 1}
        )
    message = str(caught.value)
    assert "An installed codec plugin serves this type (codec test:opaque)" in message
    assert "(codec json:tests.durable_core.durable.test_api.Point)" in message
    assert "codecs=Codecs.from_plugins()" in message
    assert log.calls() == []
    # with the plugins' registry there is nothing to hint at: the registry already has them
    with pytest.raises(CodecError) as plain:
        Runtime(store, plugins=make_plugin_manager(autoload=False)).run(
            needs_codecs(log), run_id="r1", version="v1", inputs={SEED: 1}
        )
    assert "An installed codec plugin" not in str(plain.value)


# -- DurableResult -----------------------------------------------------------------------------


def test_durable_result_answers_like_the_engine_result(store: Any) -> None:
    # covers: G-3, G-6, R-VAL-4
    done, skipped, never = Key("done", int), Key("skipped", int), Key("never", int)
    g = Graph("result", inputs=[SEED])

    @g.node("first", requires=[SEED], provides=[done, skipped])
    def first(rc: Any) -> None:
        rc.set(done, rc.get(SEED) * 2)
        rc.skip(skipped)

    @g.node("boom", requires=[done], provides=[never])
    def boom(rc: Any) -> None:
        raise ValueError("no")

    result = Runtime(store).run(g, run_id="r1", version="v1", inputs={SEED: 4})
    assert result.status == "failed" and isinstance(result.error, NodeFailedError)
    assert done in result and skipped not in result and never not in result
    assert result.values == {"seed": 4, "done": 8}
    assert result.get(done) == 8 and result.get(never, -1) == -1
    assert result.skipped(skipped) and not result.pending(skipped)
    assert result.pending(never) and not result.pending(done)
    assert isinstance(result.restored, int) and result.restored == 0
    with pytest.raises(UndeclaredKeyError):
        Key("other", int) in result  # noqa: B015 - the membership test itself raises


# -- engine observers and scope ids ------------------------------------------------------------


class NodeLog(Observer):
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str | None, bool]] = []

    def node_running(self, event: Any) -> None:
        self.events.append(("running", event.path, None, False))

    def node_finished(self, event: Any) -> None:
        self.events.append(("finished", event.path, event.outcome, event.restored))


def test_engine_observers_see_node_progress_of_durable_runs(store: Any, log: CallLog) -> None:
    # covers: G-11, R-NODE-1
    graph = needs_codecs(log)
    first = NodeLog()
    runtime = Runtime(store, full_codecs(), graph_observers=[first])
    assert runtime.run(graph, run_id="r1", version="v1", inputs={SEED: 1}).status == "completed"
    assert ("running", "make", None, False) in first.events
    assert ("finished", "inner/show", "completed", False) in first.events
    assert sorted(e[1] for e in first.events if e[0] == "finished") == [
        "inner",
        "inner/show",
        "inner/wrap",
        "make",
    ]
    second = NodeLog()
    again = Runtime(store, full_codecs(), graph_observers=[second])
    assert again.resume(graph, run_id="r1", version="v1", inputs={SEED: 1}).restored == 2
    assert sorted(second.events) == [
        ("finished", "inner", "completed", True),
        ("finished", "make", "completed", True),
    ]


def test_recovery_events_tell_two_child_runs_of_a_retried_sub_apart(
    store: Any, log: CallLog
) -> None:
    # covers: R-SCOPE-2, R-ATT-3, G-9
    x, y = Key("x", int), Key("y", int)
    child = Graph("child", inputs=[x])

    @child.node("work", requires=[x], provides=[y])
    def work_body(rc: Any) -> None:
        log.write("child/work")
        if log.count("child/work") == 1:
            raise ConnectionError("first child run fails")
        rc.set(y, rc.get(x) + 1)

    g = Graph("parent", inputs=[SEED])
    g.sub("sub", child, bindings=[In(SEED, x), Out(y, Key("result", int))], aspects=[Retry(2)])
    events: list[RecoveryEvent] = []
    result = Runtime(store, observers=[events.append]).run(
        g, run_id="r1", version="v1", inputs={SEED: 1}
    )
    assert result.status == "completed", result.error
    record = load(store, "r1")
    tries = [e for e in events if e.node_id == "work" and e.kind is EventKind.ATTEMPT_STARTED]
    assert [e.scope_path for e in tries] == ["sub", "sub"]
    assert len({e.scope_id for e in tries}) == 2
    assert {e.scope_id for e in tries} == set(record.scopes) - {record.root_scope}
    for event in tries:
        assert record.scopes[event.scope_id].path == "sub"
    sub_events = [e for e in events if e.node_id == "sub"]
    assert sub_events and {e.scope_id for e in sub_events} == {record.root_scope}
    run_level = [e for e in events if e.kind in (EventKind.RUN_STARTED, EventKind.RUN_FINISHED)]
    assert [e.scope_id for e in run_level] == ["", ""]
