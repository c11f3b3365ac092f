"""Run configuration against real graphs: importing the graph, matching and checking inputs."""

from __future__ import annotations

import itertools
import sys
import textwrap

import pytest

from durable_core import ConfigError, GraphError, PluginError, make_plugin_manager
from durable_core.config import load_config
from durable_core.graph import Graph

_counter = itertools.count()

GRAPH_MODULE = """
import pathlib
import attrs
from durable_core import hookimpl
from durable_core.graph import Graph, Key


@attrs.frozen
class Window:
    low: int
    high: int


TEXT = Key("text", str)
N = Key("n", int)
RATIO = Key("ratio", float)
WORDS = Key("words", list[str])
BLOB = Key("blob", bytes)
WINDOW = Key("window", Window)
OUT = Key("out", str)
WHERE = Key("where", pathlib.Path)
DONE = Key("done", bool)

graph = Graph("demo", inputs=[TEXT, N, RATIO, WORDS, BLOB, WINDOW, OUT, WHERE])


@graph.node("work", requires=[TEXT, N, RATIO, WORDS, BLOB, WINDOW, OUT, WHERE], provides=[DONE])
def work(rc):
    rc.set(DONE, True)


def factory():
    return graph


def not_a_factory(x):
    return graph


def returns_other():
    return 42


holder = attrs.make_class("Holder", [])
holder.graph = graph
number = 3


@hookimpl
def durable_register_codecs(codecs):
    codecs.register_json(Window)
"""

INPUTS = """
[inputs]
text = { file = "text.txt" }
n = 3
ratio = 2
words = ["a", "b"]
blob = { file = "blob.bin", as = "bytes" }
window = { file = "window.json", as = "json" }
out = { path = "report" }
where = "data/here"
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder with a graph module (unique name per test) and input files next to it."""
    module = f"demo_graph_{next(_counter)}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(GRAPH_MODULE))
    (tmp_path / "text.txt").write_text("héllo wörld\n", encoding="utf-8")
    (tmp_path / "blob.bin").write_bytes(b"\x00\xff\x10")
    (tmp_path / "window.json").write_text('{"low": 1, "high": 9}')
    monkeypatch.chdir("/")  # relative paths must not depend on the current directory
    yield tmp_path, module
    sys.modules.pop(module, None)
    if str(tmp_path) in sys.path:
        sys.path.remove(str(tmp_path))


def config_for(tmp_path, module, graph_attr="graph", inputs=INPUTS, extra=""):
    path = tmp_path / "run.toml"
    path.write_text(
        f'graph = "{module}:{graph_attr}"\nrun_id = "r"\nversion = "1"\n{extra}'
        + textwrap.dedent(inputs)
    )
    return load_config(path)


def test_graph_next_to_the_config_imports(project):
    tmp_path, module = project
    graph = config_for(tmp_path, module).load_graph()
    assert isinstance(graph, Graph)
    assert graph.name == "demo"


@pytest.mark.parametrize("attr", ["factory", "holder.graph"])
def test_graph_factory_and_dotted_attribute(project, attr):
    tmp_path, module = project
    assert config_for(tmp_path, module, attr).load_graph().name == "demo"


@pytest.mark.parametrize(
    ("reference", "match"),
    [
        ("no_such_module_xyz:graph", r"cannot import module 'no_such_module_xyz': no such module"),
        ("{module}:missing", r"has no attribute 'missing'"),
        ("{module}:number", r"'{module}:number' is an int; expected a Graph"),
        ("{module}:returns_other", r"returned int, expected a Graph"),
        ("{module}:not_a_factory", r"calling '{module}:not_a_factory' failed: TypeError"),
        ("{module}", r"expected 'package.module:attribute'"),
    ],
)
def test_bad_graph_references_are_config_errors(project, reference, match):
    tmp_path, module = project
    module_ref, _, attr = reference.format(module=module).partition(":")
    config = config_for(tmp_path, module_ref, attr) if attr else None
    if config is None:
        path = tmp_path / "run.toml"
        path.write_text(f'graph = "{module_ref}"\nrun_id = "r"\nversion = "1"\n')
        config = load_config(path)
    with pytest.raises(ConfigError, match=match.format(module=module)) as info:
        config.load_graph()
    assert str(config.path) in str(info.value)


def test_module_raising_on_import_is_a_config_error(tmp_path):
    (tmp_path / "broken_graph_mod.py").write_text("import json\nraise RuntimeError('boom')\n")
    path = tmp_path / "run.toml"
    path.write_text('graph = "broken_graph_mod:graph"\nrun_id = "r"\nversion = "1"\n')
    try:
        with pytest.raises(
            ConfigError, match="importing module 'broken_graph_mod' failed: RuntimeError: boom"
        ):
            load_config(path).load_graph()
    finally:
        sys.modules.pop("broken_graph_mod", None)


def test_module_importing_a_missing_dependency_names_it(tmp_path):
    (tmp_path / "needs_dep_mod.py").write_text("import not_installed_dependency_q\n")
    path = tmp_path / "run.toml"
    path.write_text('graph = "needs_dep_mod:graph"\nrun_id = "r"\nversion = "1"\n')
    with pytest.raises(ConfigError, match="No module named 'not_installed_dependency_q'"):
        load_config(path).load_graph()


def test_graph_error_while_building_is_kept(tmp_path):
    (tmp_path / "cyclic_graph_mod.py").write_text(
        textwrap.dedent(
            """
            from durable_core.graph import Graph, Key
            A, B = Key("a", int), Key("b", int)
            graph = Graph("cyclic")
            graph.add_node("one", lambda rc: None, requires=[A], provides=[A])
            """
        )
    )
    path = tmp_path / "run.toml"
    path.write_text('graph = "cyclic_graph_mod:graph"\nrun_id = "r"\nversion = "1"\n')
    try:
        with pytest.raises(GraphError):
            load_config(path).load_graph()
    finally:
        sys.modules.pop("cyclic_graph_mod", None)


# -- inputs -----------------------------------------------------------------------------------


def test_inputs_are_matched_read_and_typed(project):
    tmp_path, module = project
    config = config_for(tmp_path, module)
    graph = config.load_graph()
    config.register_graph_module(make_plugin_manager())
    values = {key.name: value for key, value in config.resolve_inputs(graph).items()}
    mod = sys.modules[module]
    assert values == {
        "text": "héllo wörld\n",
        "n": 3,
        "ratio": 2.0,
        "words": ["a", "b"],
        "blob": b"\x00\xff\x10",
        "window": mod.Window(1, 9),
        "out": str(tmp_path / "report"),
        "where": tmp_path / "data" / "here",
    }
    assert isinstance(values["ratio"], float)
    assert set(config.resolve_inputs(graph)) == set(graph.inputs)


def test_wrong_input_type_names_key_and_types(project):
    tmp_path, module = project
    config = config_for(tmp_path, module, inputs=INPUTS.replace("n = 3", 'n = "3"'))
    with pytest.raises(ConfigError) as info:
        config.resolve_inputs(config.load_graph())
    message = str(info.value)
    assert f"{config.path}: [inputs] n: " in message
    assert "has type int, found a string ('3')" in message


def test_wrong_element_type_names_the_element(project):
    tmp_path, module = project
    config = config_for(tmp_path, module, inputs=INPUTS.replace('["a", "b"]', '["a", 2]'))
    with pytest.raises(
        ConfigError,
        match=r"\[inputs\] words: .*list\[str\].*value\[1\]: "
        r"expected a string, found an integer \(2\)",
    ):
        config.resolve_inputs(config.load_graph())


def test_json_file_checked_against_an_attrs_class(project):
    tmp_path, module = project
    (tmp_path / "window.json").write_text('{"low": 1, "high": "9", "extra": 0}')
    config = config_for(tmp_path, module)
    with pytest.raises(ConfigError) as info:
        config.resolve_inputs(config.load_graph())
    assert "[inputs] window: the graph's input key has type Window" in str(info.value)
    assert "value.high: expected an integer" in str(info.value)
    assert "unknown key 'extra'" in str(info.value)


def test_missing_and_unknown_inputs_are_named(project):
    tmp_path, module = project
    config = config_for(tmp_path, module, inputs=INPUTS.replace("n = 3", "m = 3"))
    with pytest.raises(ConfigError, match=r"'m' is not an input of graph 'demo'; its inputs"):
        config.resolve_inputs(config.load_graph())
    config = config_for(tmp_path, module, inputs=INPUTS.replace("n = 3\n", ""))
    with pytest.raises(ConfigError, match=r"missing a value for the graph's input n \(int\)"):
        config.resolve_inputs(config.load_graph())


def test_missing_input_file_is_named(project):
    tmp_path, module = project
    (tmp_path / "text.txt").unlink()
    config = config_for(tmp_path, module)
    with pytest.raises(
        ConfigError, match=r"\[inputs\] text: cannot read the input file .*text.txt"
    ):
        config.resolve_inputs(config.load_graph())


def test_non_utf8_text_file_suggests_bytes(project):
    tmp_path, module = project
    (tmp_path / "text.txt").write_bytes(b"\xff\xfe")
    config = config_for(tmp_path, module)
    with pytest.raises(ConfigError, match=r'is not UTF-8 text.*as = "bytes"'):
        config.resolve_inputs(config.load_graph())


def test_bytes_key_refuses_a_toml_string(project):
    tmp_path, module = project
    config = config_for(
        tmp_path, module, inputs=INPUTS.replace('{ file = "blob.bin", as = "bytes" }', '"abc"')
    )
    with pytest.raises(
        ConfigError, match=r'read bytes from a file with \{ file = "…", as = "bytes"'
    ):
        config.resolve_inputs(config.load_graph())


# -- the graph's module as a plugin -----------------------------------------------------------


def test_graph_module_with_hooks_is_registered_for_its_codecs(project):
    tmp_path, module = project
    config = config_for(tmp_path, module)
    config.load_graph()
    pm = make_plugin_manager()
    assert config.register_graph_module(pm) is True
    assert config.register_graph_module(pm) is True  # idempotent
    assert pm.get_plugin(f"graph:{module}") is sys.modules[module]
    codecs = config.make_codecs(pm)
    assert sys.modules[module].Window in codecs


def test_graph_module_with_a_wrong_hook_is_a_plugin_error(tmp_path):
    (tmp_path / "bad_hook_mod.py").write_text(
        textwrap.dedent(
            """
            from durable_core import hookimpl
            from durable_core.graph import Graph
            graph = Graph("g")

            @hookimpl
            def durable_register_codecs(codecs, colour):
                pass
            """
        )
    )
    path = tmp_path / "run.toml"
    path.write_text('graph = "bad_hook_mod:graph"\nrun_id = "r"\nversion = "1"\n')
    config = load_config(path)
    try:
        config.load_graph()
        with pytest.raises(PluginError, match="implements a Durable hook wrongly"):
            config.register_graph_module(make_plugin_manager())
    finally:
        sys.modules.pop("bad_hook_mod", None)


def test_module_without_hooks_is_not_registered(tmp_path):
    (tmp_path / "plain_graph_mod.py").write_text(
        "from durable_core.graph import Graph\ngraph = Graph('g')\n"
    )
    path = tmp_path / "run.toml"
    path.write_text('graph = "plain_graph_mod:graph"\nrun_id = "r"\nversion = "1"\n')
    config = load_config(path)
    try:
        config.load_graph()
        assert config.register_graph_module(make_plugin_manager()) is False
    finally:
        sys.modules.pop("plain_graph_mod", None)
