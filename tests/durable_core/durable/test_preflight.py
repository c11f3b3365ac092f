"""``durable/preflight.py``: the frozen ``RunRequest`` and the checks made before the store is
touched. Real SQLite stores; a refused request leaves no record behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from durable_core import (
    CodecError,
    Codecs,
    ConfigError,
    Graph,
    GraphError,
    Key,
    MemoryStore,
    NotFoundError,
    Runtime,
)
from durable_core.durable.preflight import (
    Mode,
    PluginHints,
    RunRequest,
    check_codecs,
    input_parts,
    preflight,
)
from durable_sqlitestore import SQLiteStore

N = Key("n", int)
TWICE = Key("twice", int)
PATH = Key("path", str)


class Opaque:
    """A class no codec serves."""


OPAQUE = Key("opaque", Opaque)
OTHER = Key("other", Opaque)


def doubling() -> Graph:
    graph = Graph("double", inputs=[N])

    @graph.node("double", requires=[N], provides=[TWICE])
    def double(rc: Any) -> None:
        rc.set(TWICE, rc.get(N) * 2)

    return graph


def request(graph: Graph, **changes: Any) -> RunRequest:
    return attrs.evolve(RunRequest(Mode.RUN, graph, "r", "1", {N: 21}), **changes)


def assert_no_record(store: SQLiteStore, run_id: str) -> None:
    with store.acquire(run_id) as session, pytest.raises(NotFoundError):
        session.load()


def test_a_request_is_frozen() -> None:
    made = RunRequest(Mode.RESUME, doubling(), "r", "1", {N: 1})
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.run_id = "other"  # type: ignore[misc]
    assert (made.max_running, made.timeout, made.cancel, made.input_identity) == (
        None,
        None,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("changes", "error", "text"),
    [
        ({"max_running": 0}, ConfigError, "max_running must be a positive integer"),
        ({"max_running": True}, ConfigError, "max_running must be a positive integer"),
        ({"version": 1}, ConfigError, "version must be a str"),
    ],
)
def test_preflight_refuses_bad_arguments_before_the_store(
    tmp_path: Path, changes: dict[str, Any], error: type[Exception], text: str
) -> None:
    graph = doubling()
    with pytest.raises(error, match=text):
        preflight(request(graph, **changes), Codecs.default(), None, PluginHints())
    store = SQLiteStore(tmp_path / "runs.sqlite")
    try:
        with pytest.raises(error, match=text):  # the runtime makes the same check first
            Runtime(store).run(
                graph, **{"run_id": "r", "version": "1", "inputs": {N: 21}, **changes}
            )
        assert_no_record(store, "r")
    finally:
        store.close()


def test_preflight_refuses_a_stream_root_input() -> None:
    items = Key("items", int, stream=True)
    graph = Graph("streamed", inputs=[items])

    @graph.node("count", requires=[items], provides=[TWICE])
    async def count(rc: Any) -> None:
        rc.set(TWICE, 0)

    with pytest.raises(GraphError, match="takes the stream 'items' as a root input"):
        preflight(request(graph), Codecs.default(), None, PluginHints())


def test_check_codecs_names_every_key_without_a_codec() -> None:
    graph = Graph("opaque", inputs=[N])

    @graph.node("make", requires=[N], provides=[OPAQUE, OTHER])
    def make(rc: Any) -> None:
        rc.set(OPAQUE, Opaque())
        rc.set(OTHER, Opaque())

    with pytest.raises(CodecError) as caught:
        check_codecs(graph, Codecs.default(), PluginHints(codecs_from_plugins=True))
    message = str(caught.value)
    assert "no codec serves the declared type of 2 keys" in message
    assert "key 'opaque'" in message and "key 'other'" in message
    check_codecs(doubling(), Codecs.default(), PluginHints())  # every key served: no error


def test_input_parts_give_the_stand_in_fingerprint_first() -> None:
    graph = Graph("paths", inputs=[PATH])

    @graph.node("read", requires=[PATH], provides=[TWICE])
    def read(rc: Any) -> None:
        rc.set(TWICE, len(rc.get(PATH)))

    codecs = Codecs.default()
    plain = input_parts(graph, codecs, {PATH: "/abs/data.csv"})
    both = input_parts(graph, codecs, {PATH: "/abs/data.csv"}, {PATH: "data.csv"})
    assert len(plain) == 1 and len(both) == 2
    assert both[1] == plain[0]  # without the stand-ins: the fingerprint of the values given
    assert both[0].fingerprint != plain[0].fingerprint
    assert set(both[0].keys) == {"path"}
    runtime = Runtime(MemoryStore(), codecs)
    fingerprints = runtime.input_fingerprints(graph, {PATH: "/abs/data.csv"}, {PATH: "data.csv"})
    assert fingerprints == tuple(part.fingerprint for part in both)


def test_input_parts_refuse_a_stand_in_for_no_given_input() -> None:
    with pytest.raises(GraphError, match="input_identity names \\['path'\\]"):
        input_parts(doubling(), Codecs.default(), {N: 1}, {PATH: "x"})
