"""Static checks of graph definitions: refused before any body runs (G-2, G-5, G-9)."""

import pytest

from durable_core import Graph, GraphError, In, Key, Out, Retry, Timeout, execute

A, B, C, D = Key("a", int), Key("b", int), Key("c", int), Key("d", int)


def noop(rc):
    pass


# covers: G-2
@pytest.mark.parametrize("bad", ["", None, 7])
def test_node_ids_must_be_non_empty_strings(bad):
    g = Graph("g")
    with pytest.raises(GraphError, match="non-empty string"):
        g.add_node(bad, noop)


# covers: G-2
def test_node_ids_may_not_contain_a_slash():
    g = Graph("g")
    with pytest.raises(GraphError, match=r"node 'x/y'.*may not contain '/'"):
        g.add_node("x/y", noop)


# covers: G-2, G-5
def test_duplicate_node_ids_are_refused():
    g = Graph("g")
    g.add_node("x", noop, provides=[A])
    with pytest.raises(GraphError, match="node id 'x' is used twice"):
        g.add_node("x", noop, provides=[B])


# covers: G-2, G-5
def test_two_sources_for_one_key_are_refused():
    g = Graph("g", inputs=[A])
    g.add_node("x", noop, provides=[B])
    with pytest.raises(GraphError, match=r"node 'y'.*key 'b' already has a source \(node 'x'\)"):
        g.add_node("y", noop, provides=[B])
    with pytest.raises(GraphError, match=r"node 'z'.*key 'a'.*an input of the graph"):
        g.add_node("z", noop, provides=[A])


# covers: G-2, G-5
def test_require_and_provide_of_one_key_is_refused():
    g = Graph("g", inputs=[A])
    with pytest.raises(GraphError, match=r"node 'x'.*key 'b' is both required and provided"):
        g.add_node("x", noop, requires=[B], provides=[B])


# covers: G-2
def test_a_key_listed_twice_or_clashing_by_name_is_refused():
    g = Graph("g", inputs=[A])
    with pytest.raises(GraphError, match="requires lists key 'a' twice"):
        g.add_node("x", noop, requires=[A, A])
    with pytest.raises(GraphError, match="clashes with"):
        g.add_node("y", noop, requires=[Key("a", str)])
    with pytest.raises(GraphError, match="input 'a' is listed twice"):
        Graph("h", inputs=[A, A])


# covers: G-5
def test_a_required_key_without_source_is_refused_naming_node_and_key():
    g = Graph("g", inputs=[A])
    g.add_node("x", noop, requires=[A, C], provides=[B])
    with pytest.raises(GraphError, match=r"graph 'g', node 'x': required key 'c' has no source"):
        g.validate()


# covers: G-5
def test_cycles_are_refused_naming_the_cycle():
    g = Graph("g", inputs=[A])
    g.add_node("x", noop, requires=[A, C], provides=[B])
    g.add_node("y", noop, requires=[B], provides=[D])
    g.add_node("z", noop, requires=[D], provides=[C])
    with pytest.raises(GraphError, match="dependency cycle") as info:
        g.validate()
    message = str(info.value)
    for node in ("'x'", "'y'", "'z'"):
        assert node in message


# covers: G-5
def test_nothing_runs_when_the_graph_is_invalid():
    ran = []
    g = Graph("g", inputs=[A])
    g.add_node("x", lambda rc: ran.append("x"), requires=[A], provides=[B])
    g.add_node("y", lambda rc: ran.append("y"), requires=[C], provides=[D])
    with pytest.raises(GraphError, match="required key 'c' has no source"):
        execute(g, {A: 1})
    assert ran == []


# covers: G-5
def test_inputs_must_match_the_graph():
    g = Graph("g", inputs=[A])
    g.add_node("x", noop, requires=[A], provides=[B])
    with pytest.raises(GraphError, match=r"inputs \['a'\] were not given"):
        execute(g, {})
    with pytest.raises(GraphError, match="is not one of its inputs"):
        execute(g, {A: 1, C: 2})
    with pytest.raises(GraphError, match="takes Key"):
        execute(g, {A: "one"})


# covers: G-2
def test_bodies_and_aspects_are_checked():
    g = Graph("g")
    with pytest.raises(GraphError, match="expected a function"):
        g.add_node("x", 3)

    def gen(rc):
        yield 1

    with pytest.raises(GraphError, match="generator function"):
        g.add_node("x", gen)
    with pytest.raises(GraphError, match="expected Aspect instances"):
        g.add_node("x", noop, aspects=[lambda call: None])
    with pytest.raises(GraphError, match="Retry attempts"):
        Retry(0)
    with pytest.raises(GraphError, match="Retry delay"):
        Retry(2, delay=-1)
    with pytest.raises(GraphError, match="Timeout seconds"):
        Timeout(0)


# covers: G-2
def test_validate_freezes_the_graph():
    g = Graph("g", inputs=[A])
    g.add_node("x", noop, requires=[A], provides=[B])
    g.validate()
    assert g.frozen
    with pytest.raises(GraphError, match="frozen"):
        g.add_node("y", noop, requires=[B], provides=[C])


# covers: G-2
def test_the_decorator_returns_the_function_and_records_the_node():
    g = Graph("g", inputs=[A])

    @g.node("x", requires=[A], provides=[B], aspects=[Retry(2)])
    async def x(rc):
        pass

    assert callable(x)
    node = g.nodes["x"]
    assert node.requires == (A,) and node.provides == (B,)
    assert node.is_async and not node.is_sub
    assert node.aspects == (Retry(2),)
    assert g.source_of(B) == "x" and g.source_of(A) is None


def child_graph():
    child = Graph("child", inputs=[Key("cn", int)])
    child.add_node("double", noop, requires=[Key("cn", int)], provides=[Key("report", str)])
    return child


# covers: G-9, G-5
def test_sub_requires_and_provides_come_from_bindings():
    parent = Graph("parent", inputs=[A])
    node = parent.sub(
        "report",
        child_graph(),
        bindings=[In(A, Key("cn", int)), Out(Key("report", str), Key("text", str))],
    )
    assert node.requires == (A,)
    assert node.provides == (Key("text", str),)
    assert node.is_sub
    parent.validate()


# covers: G-9, G-5
def test_sub_binding_directions_are_checked():
    parent = Graph("parent", inputs=[A])
    wrong_direction = r"Sub node 'report'.*In\('text', 'report'\).*not an input.*use Out"
    with pytest.raises(GraphError, match=wrong_direction):
        parent.sub(
            "report",
            child_graph(),
            bindings=[In(Key("text", str), Key("report", str)), In(A, Key("cn", int))],
        )
    parent.sub(
        "wrong_out",
        child_graph(),
        bindings=[In(A, Key("cn", int)), Out(Key("missing", int), B)],
    )
    with pytest.raises(GraphError, match=r"Sub node 'wrong_out'.*'missing'.*does not produce"):
        parent.validate()


# covers: G-9, G-5
def test_sub_binding_types_are_checked():
    parent = Graph("parent", inputs=[Key("s", str)])
    with pytest.raises(GraphError, match=r"Sub node 'report'.*same type and kind"):
        parent.sub("report", child_graph(), bindings=[In(Key("s", str), Key("cn", str))])
    parent2 = Graph("parent2", inputs=[A])
    with pytest.raises(GraphError, match=r"Sub node 'report'.*same type and kind"):
        parent2.sub(
            "report",
            child_graph(),
            bindings=[In(A, Key("cn", int)), Out(Key("report", str), Key("text", bytes))],
        )
    # a child key added after the Sub node is checked by validate()
    child = Graph("child", inputs=[Key("cn", int)])
    parent3 = Graph("parent3", inputs=[A])
    parent3.sub(
        "report",
        child,
        bindings=[In(A, Key("cn", int)), Out(Key("report", bytes), Key("text", bytes))],
    )
    child.add_node("double", noop, requires=[Key("cn", int)], provides=[Key("report", str)])
    with pytest.raises(GraphError, match=r"Sub node 'report'.*same type and kind"):
        parent3.validate()


# covers: G-9, G-5
def test_every_child_input_is_bound_once():
    parent = Graph("parent", inputs=[A, B])
    with pytest.raises(GraphError, match="input 'cn' of child graph 'child' is not bound"):
        parent.sub("report", child_graph(), bindings=[])
    with pytest.raises(GraphError, match="bound by two In"):
        parent.sub("report", child_graph(), bindings=[In(A, Key("cn", int)), In(B, Key("cn", int))])


# covers: G-9, G-5
def test_graph_names_are_unique_and_graphs_cannot_contain_themselves():
    parent = Graph("child", inputs=[A])
    parent.sub("report", child_graph(), bindings=[In(A, Key("cn", int))])
    with pytest.raises(GraphError, match="two different graphs are named 'child'"):
        parent.validate()
    g = Graph("g")
    with pytest.raises(GraphError, match="cannot contain itself"):
        g.sub("me", g, bindings=[])
    outer = Graph("outer")
    inner = Graph("inner")
    outer.sub("in", inner, bindings=[])
    inner.sub("out", outer, bindings=[])
    with pytest.raises(GraphError, match="contains itself through Sub nodes"):
        outer.validate()


def test_provided_names_is_describe_provides_built_once_and_read_only():
    a, b, c, d = Key("a", int), Key("b", int), Key("c", str), Key("d", int)
    inner = Key("inner", int)
    child = Graph("child", inputs=[a])
    child.add_node("inner", lambda rc: rc.set(inner, 1), requires=[a], provides=[inner])
    root = Graph("root", inputs=[a])
    root.add_node("both", lambda rc: (rc.set(c, ""), rc.set(d, 0)), requires=[a], provides=[d, c])
    root.sub("sub", child, bindings=[In(a, a), Out(inner, b)])
    names = root.provided_names()
    assert {g: {n: list(p) for n, p in nodes.items()} for g, nodes in names.items()} == (
        root.describe_provides()
    )
    assert names["root"]["both"] == ("d", "c")  # the declared order
    assert root.provided_names() is names  # a validated graph is frozen: built once
    with pytest.raises(TypeError):
        names["root"]["both"] = ("c",)  # type: ignore[index]
