"""``resume`` refused for a definition change names what changed (real file, SQLite and
PostgreSQL stores, the real run log plugin).

The record keeps only the whole definition's fingerprint; the parts' fingerprints come from the
run log (a ``definition`` line written when the run starts) or from the runtime that ran the
run. Without either, the error names what the record itself shows and says the rest is not
known. The record is never changed by a refused resume.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from durable_core import DefinitionMismatchError, Graph, In, Key, Out, Retry, Timeout
from durable_core.durable import Runtime, create_fork
from durable_core.durable.definition_diff import LIST_LIMIT, definition_parts
from durable_core.plugins import make_plugin_manager
from durable_core.runlog import read_log, saved_definition
from tests.durable_core.durable.scenarios import open_store, stored_bytes

N, A, B, C, X, Y, SUB_OUT = (Key(name, int) for name in ("n", "a", "b", "c", "x", "y", "sub_out"))


def build(
    *,
    b_requires: tuple[Key[int], ...] = (A,),
    b_retry: int = 0,
    add_c: bool = False,
    drop_b: bool = False,
    inner_twice: bool = False,
    a_type: type = int,
    b_fails: bool = True,
    b_body: str = "one",
    extra: int = 0,
    inner_timeout: bool = False,
    second_input: bool = False,
) -> Graph:
    """n -> a -> b (fails while ``b_fails``) ; a -> Sub "report" (render); options change one
    part of the definition each."""
    a_key = Key("a", a_type)
    inner = Graph("report", inputs=[X], aspects=[Timeout(30)] if inner_timeout else [])

    @inner.node("render", requires=[X], provides=[Y])
    def render(rc: Any) -> None:
        rc.set(Y, rc.get(X) * (2 if inner_twice else 1))

    if inner_twice:

        @inner.node("check", requires=[Y], provides=[])
        def check(rc: Any) -> None:
            pass

    g = Graph("etl", inputs=[N, Key("m", int)] if second_input else [N])

    @g.node("a", requires=[N], provides=[a_key])
    def a(rc: Any) -> None:
        rc.set(a_key, a_type(rc.get(N)))

    if not drop_b:
        requires = tuple(a_key if k.name == "a" else k for k in b_requires)
        aspects = [Retry(b_retry)] if b_retry else []

        @g.node("b", requires=list(requires), provides=[B], aspects=aspects)
        def b(rc: Any) -> None:
            if b_fails:
                raise RuntimeError("b is broken")
            rc.set(B, 1 if b_body == "one" else 2)

    if add_c:

        @g.node("c", requires=[a_key], provides=[C])
        def c(rc: Any) -> None:
            rc.set(C, rc.get(a_key) + 1)

    for i in range(extra):
        key = Key(f"e{i:02d}", int)

        @g.node(f"e{i:02d}", requires=[a_key], provides=[key])
        def e(rc: Any, key: Key[int] = key) -> None:
            rc.set(key, 0)

    if a_type is int:
        g.sub("report", inner, bindings=[In(A, X), Out(Y, SUB_OUT)])
    return g


KINDS = ["file", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=KINDS)
def location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Any]:
    if request.param == "postgres":
        return "postgres", request.getfixturevalue("postgres_dsn")
    return request.param, tmp_path / "store"


@pytest.fixture(autouse=True)
def logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "logs"
    monkeypatch.setenv("DURABLE_LOG_DIR", str(folder))
    return folder


def start(location: tuple[str, Any], graph: Graph, *, plugins: bool = True, run_id: str = "r1"):
    store = open_store(*location)
    try:
        runtime = Runtime(store, plugins=make_plugin_manager() if plugins else None)
        result = runtime.run(graph, run_id=run_id, version="1", inputs={N: 3})
        assert result.status == "failed"  # b failed: the run waits for a fix
    finally:
        store.close()


def refused(location: tuple[str, Any], graph: Graph, run_id: str = "r1") -> Any:
    """Resume with a fresh runtime (no memory of the run) and return the refusal; the record
    must stay byte for byte what it was."""
    store = open_store(*location)
    try:
        before = stored_bytes(store, run_id)
        runtime = Runtime(store, plugins=make_plugin_manager())
        with pytest.raises(DefinitionMismatchError) as caught:
            runtime.resume(graph, run_id=run_id, version="1", inputs={N: 3})
        assert stored_bytes(store, run_id) == before
        return caught.value
    finally:
        store.close()


def assert_advice(error: Any) -> None:
    text = str(error)
    assert "restore the code it was started with and resume again" in text
    assert "durable fork CONFIG r1 --new-run-id NEW" in text
    assert "Nothing was saved" in text


def test_a_changed_node_declaration_is_named(location):
    start(location, build())
    error = refused(location, build(b_requires=(A, N)))
    assert (error.added, error.removed, error.changed) == ((), (), ("b",))
    assert error.complete is True
    assert "nodes changed (requires, provides, aspects or bindings): 'b'" in str(error)
    assert_advice(error)


def test_a_changed_aspect_is_a_changed_node(location):
    start(location, build())
    error = refused(location, build(b_retry=3))
    assert error.changed == ("b",) and not error.added and not error.removed


def test_an_added_node_is_named(location):
    start(location, build())
    error = refused(location, build(add_c=True))
    assert (error.added, error.removed, error.changed) == (("c",), (), ())
    assert error.keys == ("c",)  # its new output key
    assert "nodes added: 'c'" in str(error)
    assert_advice(error)


def test_a_removed_node_is_named(location):
    start(location, build())
    error = refused(location, build(drop_b=True))
    assert (error.added, error.removed, error.changed) == ((), ("b",), ())
    assert "nodes removed: 'b'" in str(error)


def test_a_change_inside_a_sub_graph_is_named_by_its_path(location):
    start(location, build())
    error = refused(location, build(inner_twice=True))
    assert error.added == ("report/check",)
    assert error.changed == () and error.removed == ()
    assert "'report/check'" in str(error)


def test_graph_inputs_and_graph_wide_aspects_are_named(location):
    start(location, build())
    error = refused(location, build(inner_timeout=True, second_input=True))
    assert error.graphs == ("report",) and error.inputs == ("m",) and error.keys == ("m",)
    assert (error.added, error.removed, error.changed) == ((), (), ())
    text = str(error)
    assert "graph inputs added or removed: 'm'" in text
    assert "graph name or graph-wide aspects changed: the graph of Sub 'report'" in text


def test_a_changed_key_type_is_named(location):
    start(location, build())
    error = refused(location, build(a_type=float))
    # every reader of "a" sees a key of another type; the Sub is gone in this variant
    assert "a" in error.keys
    assert "report" in error.removed and "report/render" in error.removed


def test_a_body_change_is_not_a_definition_change(location):
    """Bodies are not part of the definition: a fixed body resumes (its outputs change)."""
    start(location, build())
    store = open_store(*location)
    try:
        runtime = Runtime(store, plugins=make_plugin_manager())
        result = runtime.resume(
            build(b_fails=False, b_body="two"), run_id="r1", version="1", inputs={N: 3}
        )
    finally:
        store.close()
    # accepted: b failed for good before, so nothing runs (no budget is refilled)
    assert result.status == "failed" and "failed for good" in str(result.error)


def test_without_a_run_log_the_record_still_names_what_it_shows(location, logs):
    """No run log (the plugin off): the confirmed and attempted nodes the record holds are
    compared with the graph, and the message says that the rest is not known."""
    start(location, build(), plugins=False)
    assert not logs.exists()
    removed = refused(location, build(drop_b=True))
    assert removed.complete is False
    assert removed.removed == ("b",)  # b's failed attempt is in the record
    assert removed.added == () and removed.changed == ()
    assert "nodes it holds that the graph no longer has: 'b'" in str(removed)
    assert "Other changes are not known" in str(removed)
    assert_advice(removed)
    added = refused(location, build(add_c=True))
    assert added.complete is False and added.added == () and added.removed == ()
    assert "What changed is not known" in str(added)
    assert_advice(added)


def test_the_runtime_that_ran_the_run_remembers_its_definition(location):
    """Without plugins (no run log), the same Runtime object still knows what it ran."""
    store = open_store(*location)
    try:
        runtime = Runtime(store)
        assert runtime.run(build(), run_id="r1", version="1", inputs={N: 3}).status == "failed"
        with pytest.raises(DefinitionMismatchError) as caught:
            runtime.resume(build(add_c=True), run_id="r1", version="1", inputs={N: 3})
    finally:
        store.close()
    assert caught.value.complete is True and caught.value.added == ("c",)


def test_a_long_list_is_cut_in_the_message_and_whole_in_the_attributes(location):
    start(location, build())
    error = refused(location, build(extra=LIST_LIMIT + 5))
    assert len(error.added) == LIST_LIMIT + 5
    text = str(error)
    assert "'e09'" in text and "'e10'" not in text
    assert "and 5 more" in text


def _log(location, run_id="r1"):
    store = open_store(*location)
    try:
        return read_log(store, run_id)
    finally:
        store.close()


def test_the_run_log_keeps_the_definition_once_per_definition(location, logs):
    start(location, build())
    entries = _log(location)
    kinds = [entry["event"] for entry in entries]
    assert kinds[:2] == ["run_started", "definition"]
    definition = entries[1]
    assert definition["parts"] == definition_parts(build())
    assert definition["definition"] == build().fingerprint()
    store = open_store(*location)
    try:  # a resume with the same definition adds no second copy
        Runtime(store, plugins=make_plugin_manager()).resume(
            build(), run_id="r1", version="1", inputs={N: 3}
        )
    finally:
        store.close()
    assert [e["event"] for e in _log(location)].count("definition") == 1


def test_a_run_of_the_same_id_in_another_store_has_its_own_definition(location, logs):
    """Two runs of one run id in two stores keep two histories: each names its own changes."""
    # covers: X-HIST
    start(location, build())
    other = ("file", logs.parent / "other-store")
    start(other, build(add_c=True))  # the same run id, another definition, another store
    assert [e["event"] for e in _log(location)].count("definition") == 1
    assert [e["event"] for e in _log(other)].count("definition") == 1
    error = refused(location, build(b_requires=(A, N)))
    assert error.changed == ("b",) and error.added == ()


def test_a_torn_or_foreign_definition_line_is_skipped(tmp_path):
    from durable_core import MemoryStore
    from durable_core.records import RunRecord

    store = MemoryStore()
    with store.acquire("r1") as session:
        session.save(RunRecord(run_id="r1", revision=1, root_scope="ab" * 16), 0)
    fingerprint = build().fingerprint()
    parts = definition_parts(build())
    store.append_history(
        "r1",
        "ab" * 16,
        [
            json.dumps({"event": "definition", "definition": fingerprint, "parts": parts}),
            json.dumps({"event": "definition", "definition": fingerprint, "parts": [1]}),
            '{"event": "definition", "definition": "' + fingerprint + '", "pa',
        ],
    )
    assert saved_definition(store, "r1", fingerprint) == parts
    assert saved_definition(store, "r1", "0" * 64) is None
    assert saved_definition(store, "no-such-run", fingerprint) is None


def test_a_fork_logs_its_definition_so_a_later_change_is_named(location):
    """A fork starts with a resume (not a run start): its log gets the definition then."""
    start(location, build())
    fixed = build(b_fails=False, add_c=True)
    store = open_store(*location)
    try:
        runtime = Runtime(store, plugins=make_plugin_manager())
        create_fork(runtime, fixed, run_id="r1", new_run_id="r2", version="1", inputs={N: 3})
        result = runtime.resume(fixed, run_id="r2", version="1", inputs={N: 3})
        assert result.status == "completed"
    finally:
        store.close()
    assert "definition" in [e["event"] for e in _log(location, "r2")]
    error = refused(location, build(b_fails=False), run_id="r2")
    assert error.complete is True and error.removed == ("c",)
