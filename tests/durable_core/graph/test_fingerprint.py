"""Definition fingerprints and the provides listing of a graph tree (R-REC-2 Definition)."""

import hashlib
import json
import os
import subprocess
import sys

import pytest

from durable_core import Graph, In, Key, Out, Retry, Timeout
from tests import ROOT
from tests.durable_core.graph.support import sample_definition


def fingerprint_in_subprocess(seed: str) -> str:
    code = (
        "from tests.durable_core.graph.support import sample_definition; "
        "print(sample_definition().fingerprint())"
    )
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


# covers: R-REC-2, G-2
def test_fingerprint_is_stable_across_processes_and_hash_seeds():
    here = sample_definition().fingerprint()
    assert len(here) == 64 and int(here, 16) >= 0
    assert fingerprint_in_subprocess("1") == here
    assert fingerprint_in_subprocess("4242") == here


# covers: R-REC-2
def test_fingerprint_of_a_known_definition_never_changes():
    # Records hold the fingerprint: a faster way of computing it must give the same digest.
    # sample_definition has Sub graphs, aspects, streams and several keys of one type.
    expected = "0e4ced7903df50d95ee85e031c4cf9c6b51fc622f3615f82213f088a6e95e9e1"
    assert sample_definition().fingerprint() == expected


def build(**change):
    """A small graph; each keyword changes one part of the definition."""
    a = Key("a", change.get("a_type", int))
    b = Key("b", int)
    c = Key(change.get("c_name", "c"), int)
    s = Key("s", str, stream=True, capacity=change.get("capacity", 4))
    child_in, child_out = Key("ci", int), Key("co", int)
    child = Graph(change.get("child_name", "child"), inputs=[child_in])
    child.add_node(
        change.get("child_node", "inner"),
        lambda rc: None,
        requires=[child_in],
        provides=[child_out],
    )
    g = Graph("g", inputs=[a], aspects=change.get("graph_aspects", [Retry(2)]))
    nodes = [
        ("x", dict(requires=[a], provides=[b, s], aspects=change.get("x_aspects", [Retry(3)]))),
        (change.get("y_id", "y"), dict(requires=[b, s], provides=[c])),
    ]
    if change.get("reorder"):
        nodes.reverse()
    for node_id, spec in nodes:
        g.add_node(node_id, change.get("body", lambda rc: None), **spec)
    bindings = change.get("bindings", [In(b, child_in), Out(child_out, Key("d", int))])
    g.sub("sub", child, bindings=bindings)
    return g


# covers: R-REC-2, G-2, G-8, G-9
@pytest.mark.parametrize(
    "change",
    [
        {"y_id": "why"},
        {"a_type": float},
        {"c_name": "cc"},
        {"capacity": 5},
        {"x_aspects": [Retry(4)]},
        {"x_aspects": [Retry(3, delay=1)]},
        {"x_aspects": [Retry(3), Timeout(2)]},
        {"x_aspects": [Timeout(2), Retry(3)]},
        {"x_aspects": []},
        {"graph_aspects": []},
        {"graph_aspects": [Retry(2), Timeout(9)]},
        {"bindings": [In(Key("b", int), Key("ci", int)), Out(Key("co", int), Key("e", int))]},
        {"child_node": "renamed"},
        {"child_name": "other_child"},
    ],
    ids=repr,
)
def test_fingerprint_changes_with_every_part_of_the_definition(change):
    assert build(**change).fingerprint() != build().fingerprint()


# covers: R-REC-2
def test_fingerprint_ignores_declaration_order_and_bodies():
    base = build().fingerprint()
    assert build(reorder=True).fingerprint() == base
    assert build(body=lambda rc: print("different code")).fingerprint() == base
    assert build().fingerprint() == base
    assert build(x_aspects=[Retry(3, delay=0)]).fingerprint() == base  # 0 == 0.0 seconds


# covers: R-REC-2
def test_fingerprint_validates_and_freezes_first():
    g = Graph("g", inputs=[Key("a", int)])
    g.add_node("x", lambda rc: None, requires=[Key("missing", int)])
    with pytest.raises(Exception, match="has no source"):
        g.fingerprint()


# covers: R-NODE-1, G-9
def test_describe_provides_lists_every_graph_of_the_tree():
    assert sample_definition().describe_provides() == {
        "sample": {"table": ["table", "lines"], "total": ["total"], "child": ["count"]},
        "child": {"count": ["child_count"]},
    }
    graphs = sample_definition().graphs()
    assert sorted(graphs) == ["child", "sample"]


# covers: R-REC-2
def test_describe_is_the_canonical_json_ready_description():
    description = build().describe()
    assert description["format"] == 1
    assert description["name"] == "g"
    assert [n["id"] for n in description["nodes"]] == ["sub", "x", "y"]
    x = description["nodes"][1]
    assert x["aspects"] == [{"kind": "retry", "attempts": 3, "delay": 0.0}]
    assert {"name": "s", "type": "builtins.str", "stream": True, "capacity": 4} in (
        description["keys"]
    )
    sub = description["nodes"][0]
    assert sub["bindings"] == [["in", "b", "ci"], ["out", "co", "d"]]
    assert sub["graph"]["name"] == "child"


def _unusual_names() -> Graph:
    """Names that JSON escapes, keys of several types, a node without requires, an inbox."""
    first, later = Key('ключ "1"', list[int]), Key("k\u00e9y\\2", int | str)
    third = Key("z\U0001f600", int)
    g = Graph("g\u00e8", inputs=[first])
    g.add_node("b\u2028", lambda rc: None, requires=[first], provides=[later])
    g.add_node("a", lambda rc: None, requires=[later, first], provides=[third])
    g.add_node("c", lambda rc: None, provides=[Key("alone", float)])
    posted = Key("posted", str, stream=True, inbox=True)  # adds a built-in intake node
    g.add_node("d", lambda rc: None, requires=[posted], provides=[Key("read", int)])
    return g


# covers: R-REC-2
@pytest.mark.parametrize(
    "graph",
    [sample_definition, build, lambda: build(x_aspects=[], graph_aspects=[]), _unusual_names],
)
def test_the_fingerprinted_text_is_the_canonical_json_of_the_description(graph):
    # The text is written without building the usual node's description first; it must be
    # exactly what encoding the description gives.
    g = graph()
    assert g.describe_text() == json.dumps(
        g.describe(), sort_keys=True, separators=(",", ":"), ensure_ascii=True
    )
    digest = hashlib.sha256(g.describe_text().encode("ascii")).hexdigest()
    assert g.fingerprint() == digest
