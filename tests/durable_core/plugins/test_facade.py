"""The plugin wing as composition root: the manager's typed facade (one method per hook), the
process-wide default manager, the light ``hookimpl`` import and the old import paths (real
plugins registered in process, the real run log on a real memory store)."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import logging
import subprocess
import sys
from typing import Any

import pytest

from durable_core import (
    Codecs,
    ConfigError,
    DefinitionMismatchError,
    Graph,
    Key,
    MemoryStore,
    PluginError,
    Runtime,
    ThreadExecutor,
    hookimpl,
    make_plugin_manager,
)
from durable_core import history as run_history
from durable_core.durable.definition_diff import definition_mismatch
from durable_core.history import HistoryTarget
from durable_core.plugins import default_plugins, hookspecs
from tests import ROOT

SRC = ROOT / "durable_core" / "src" / "durable_core"
N, DOUBLED, TRIPLED = Key("n", int), Key("doubled", int), Key("tripled", int)


# covers: foundation (plugins load light)
def test_importing_hookimpl_loads_pluggy_and_at_most_three_of_durables_modules():
    code = (
        "import sys, json; from durable_core import hookimpl; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('durable'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    assert len(loaded) <= 3, loaded
    assert "durable_core.plugins.hookspecs" in loaded
    assert "durable_core.plugins.manager" not in loaded


def test_the_old_import_paths_are_the_new_modules_and_entry_points_name_the_new_ones():
    import durable_core.builtins
    import durable_core.hookspecs
    import durable_core.plugins.builtins
    import durable_core.plugins.runlog
    import durable_core.runlog

    assert durable_core.runlog is durable_core.plugins.runlog
    assert durable_core.builtins is durable_core.plugins.builtins
    assert durable_core.hookspecs is hookspecs
    points = {
        ep.name: ep.value
        for ep in importlib.metadata.distribution("durable-core").entry_points
        if ep.group == "durable"
    }
    assert points == {
        "memory": "durable_core.plugins.builtins",
        "runlog": "durable_core.plugins.runlog",
    }


def test_every_first_result_hook_says_it_stops_at_the_first_answer():
    firsts = [
        name
        for name in dir(hookspecs)
        if name.startswith("durable_")
        and getattr(getattr(hookspecs, name), "durable_spec", {}).get("firstresult")
    ]
    assert firsts == ["durable_saved_definition", "durable_saved_inputs"]
    for name in firsts:
        doc = (getattr(hookspecs, name).__doc__ or "").strip()
        assert doc.endswith("Stops at first non-None result."), name


def _calls_outside(folders: tuple[str, ...], name: str) -> list[str]:
    """Where a module outside ``folders`` calls ``name`` or reads an attribute ``name``."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith(folders):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            called = isinstance(node, ast.Call) and getattr(node.func, "id", None) == name
            read = isinstance(node, ast.Attribute) and node.attr == name
            if called or read:
                found.append(f"{relative}:{node.lineno}")
    return found


def test_no_module_below_the_cli_builds_a_plugin_manager_or_reaches_into_pluggy():
    # durable/runtime.py is the one module below the CLI that still goes around the facade.
    allowed = ("plugins/",)
    assert _calls_outside((*allowed, "cli/"), "make_plugin_manager") == []
    assert _calls_outside(allowed, "get_hookimpls") == []
    assert _calls_outside(allowed, "each_implementation") == []
    assert _calls_outside(allowed, "hook") == []  # pm.hook.durable_…: a hook named by hand


def test_the_default_manager_is_built_once_per_process():
    assert default_plugins() is default_plugins()
    assert default_plugins().has_plugin("memory")


# covers: C-2
def test_codecs_are_a_new_registry_each_time_with_the_builtins_first():
    pm = make_plugin_manager(autoload=False)
    first, second = pm.codecs(), pm.codecs()
    assert first is not second
    ids = [c.id for c in first]
    assert ids == [c.id for c in Codecs.default()]
    assert [c.id for c in Codecs.from_plugins(pm)] == ids


def test_a_codec_hook_that_raises_is_a_plugin_error_naming_the_plugin():
    class Broken:
        @hookimpl
        def durable_register_codecs(self, codecs: Any) -> None:
            raise RuntimeError("no luck")

    pm = make_plugin_manager(autoload=False, plugins=[("broken", Broken())])
    with pytest.raises(PluginError, match="plugin 'broken' failed while registering its codecs"):
        pm.codecs()


def test_executor_gives_an_instance_back_as_is_builds_a_name_and_refuses_the_rest():
    pm = make_plugin_manager(autoload=False)
    given = ThreadExecutor()
    try:
        assert pm.executor(given) == (given, False)
    finally:
        given.close()
    assert pm.executor(None) == (None, False)
    built, owned = pm.executor("thread")
    try:
        assert isinstance(built, ThreadExecutor) and owned
    finally:
        built.close()
    with pytest.raises(PluginError, match="unknown executor backend 'nope'"):
        pm.executor("nope")
    with pytest.raises(ConfigError, match="executor must be an Executor instance"):
        pm.executor(3)  # type: ignore[arg-type]


def test_recovery_events_reach_every_listener_even_when_one_raises(caplog):
    heard: list[tuple[Any, Any]] = []

    class Loud:
        @hookimpl
        def durable_recovery_event(self, event: Any) -> None:
            raise RuntimeError("loud")

    class Listener:
        @hookimpl
        def durable_recovery_event(self, event: Any, history: Any) -> None:
            heard.append((event, history))

    quiet = make_plugin_manager(autoload=False)
    assert not quiet.listens_to_recovery_events()
    pm = make_plugin_manager(autoload=False, plugins=[("loud", Loud()), ("listener", Listener())])
    assert pm.listens_to_recovery_events()
    target = HistoryTarget(MemoryStore(), "r1", "s" * 32)
    with caplog.at_level(logging.ERROR):
        pm.emit_recovery_event("an event", target)
    assert heard == [("an event", target)]
    assert "plugin 'loud' raised; the run goes on" in caplog.text


def _graph(*, tripled: bool = False) -> Graph:
    g = Graph("g", inputs=[N])

    @g.node("double", requires=[N], provides=[DOUBLED])
    def double(rc: Any) -> None:
        rc.set(DOUBLED, rc.get(N) * 2)

    if tripled:

        @g.node("triple", requires=[N], provides=[TRIPLED])
        def triple(rc: Any) -> None:
            rc.set(TRIPLED, rc.get(N) * 3)

    return g


# covers: R-REC-2, X-HIST
def test_a_refused_resume_asks_the_saved_definition_hook_not_the_run_logs_file(monkeypatch):
    monkeypatch.delenv("DURABLE_BLOCK_PLUGINS", raising=False)
    monkeypatch.delenv("DURABLE_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    store = MemoryStore()
    with_log = make_plugin_manager()
    assert with_log.has_plugin("runlog")
    Runtime(store, plugins=with_log).run(_graph(), run_id="r1", version="1", inputs={N: 2})
    assert run_history.flush()
    record = store.peek("r1")
    changed = _graph(tripled=True)

    told = definition_mismatch(changed, record, store=store, plugins=with_log)
    assert told.complete is True and told.added == ("triple",)
    target = HistoryTarget(store, "r1", record.root_scope)
    assert set(with_log.saved_inputs(target, record.inputs) or {}) == {"n"}  # the run log's
    assert with_log.saved_inputs(target, "0" * 64) is None  # none kept for other inputs

    without_log = make_plugin_manager(block=["runlog"])
    unknown = definition_mismatch(changed, record, store=store, plugins=without_log)
    assert isinstance(unknown, DefinitionMismatchError) and unknown.complete is False

    asked: list[tuple[HistoryTarget, str]] = []

    class Keeper:
        @hookimpl
        def durable_saved_definition(self, history: HistoryTarget, fingerprint: str) -> Any:
            asked.append((history, fingerprint))
            return {"graph:": "0", "node:double": "1", "node:gone": "2"}

    keeper = make_plugin_manager(autoload=False, plugins=[("keeper", Keeper())])
    named = definition_mismatch(changed, record, store=store, plugins=keeper)
    assert asked == [(HistoryTarget(store, "r1", record.root_scope), record.definition)]
    assert named.complete is True and named.removed == ("gone",)


def test_a_saved_parts_hook_that_raises_or_answers_nonsense_counts_as_none(caplog):
    class Raises:
        @hookimpl
        def durable_saved_inputs(self, history: Any, fingerprint: str) -> Any:
            raise OSError("unreadable")

    class Nonsense:
        @hookimpl
        def durable_saved_definition(self, history: Any, fingerprint: str) -> Any:
            return ["not", "a", "mapping"]

    pm = make_plugin_manager(autoload=False, plugins=[("raises", Raises()), ("odd", Nonsense())])
    target = HistoryTarget(MemoryStore(), "r1", "s" * 32)
    with caplog.at_level(logging.WARNING):
        assert pm.saved_inputs(target, "f" * 64) is None
    assert "durable_saved_inputs hook raised" in caplog.text
    assert pm.saved_definition(target, "f" * 64) is None


def test_the_first_saved_inputs_answer_wins():
    class Empty:
        @hookimpl
        def durable_saved_inputs(self, history: Any, fingerprint: str) -> Any:
            return None

    class Knows:
        @hookimpl
        def durable_saved_inputs(self, history: Any, fingerprint: str) -> Any:
            return {"n": fingerprint[:4]}

    pm = make_plugin_manager(autoload=False, plugins=[("knows", Knows()), ("empty", Empty())])
    assert pm.saved_inputs(HistoryTarget(MemoryStore(), "r", "s" * 32), "abcdef") == {"n": "abcd"}


def test_register_hooks_registers_a_module_with_hooks_once_and_refuses_a_wrong_one(tmp_path):
    good = type(sys)("graphmod_good")
    exec(  # a module defined in place, as a graph module would be
        "from durable_core import hookimpl\n"
        "@hookimpl\n"
        "def durable_register_codecs(codecs):\n"
        "    pass\n",
        good.__dict__,
    )
    plain = type(sys)("graphmod_plain")
    wrong = type(sys)("graphmod_wrong")
    exec(
        "from durable_core import hookimpl\n"
        "@hookimpl\n"
        "def durable_register_codecs(codecs, nonsense):\n"
        "    pass\n",
        wrong.__dict__,
    )
    pm = make_plugin_manager(autoload=False)
    assert pm.register_hooks(good, "graph:good") is True
    assert pm.register_hooks(good, "graph:good") is True  # already registered
    assert pm.register_hooks(plain, "graph:plain") is False
    with pytest.raises(PluginError, match="nonsense"):
        pm.register_hooks(wrong, "graph:wrong")
