"""The plugin manager: entry points, built-ins, blocking, errors (foundation; STYLE "Plugins")."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from durable_core import PluginError, hookimpl, make_plugin_manager
from durable_core.cli import cli
from durable_core.plugins import KNOWN_STORES


def _install_fake_distribution(
    site: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]
) -> None:
    """Write a real (unpacked) distribution into ``site``: dist-info + modules."""
    info = site / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    eps = "\n".join(f"{name} = {target}" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[durable]\n{eps}\n")
    for module, source in modules.items():
        (site / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A directory on sys.path that importlib.metadata scans for distributions."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("DURABLE_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("DURABLE_BLOCK_PLUGINS", raising=False)
    yield site
    for name in [m for m in sys.modules if m.startswith("fakeplug_")]:
        del sys.modules[name]


GOOD_PLUGIN = """
    from durable_core import hookimpl

    @hookimpl
    def durable_register_stores(register):
        register("fakestore", lambda **options: ("fakestore", options))
"""


# covers: foundation (entry-point discovery)
def test_entry_points_of_installed_distributions_are_discovered(site):
    _install_fake_distribution(
        site, "durable-fake", {"fakestore": "fakeplug_good"}, {"fakeplug_good": GOOD_PLUGIN}
    )
    pm = make_plugin_manager()
    assert pm.store_factory("fakestore")(path="x") == ("fakestore", {"path": "x"})
    info = {i.name: i for i in pm.describe()}
    assert info["fakestore"].distribution == "durable-fake"
    assert info["fakestore"].version == "1.2.3"
    assert info["fakestore"].stores == ("fakestore",)
    # Durable's own distributions are installed in the workspace.
    for name, dist in KNOWN_STORES.items():
        assert info[name].distribution == dist
        assert name in info[name].stores


# covers: foundation (built-ins through the same hooks; autoload off)
def test_builtins_register_through_hooks_even_without_autoload(site, monkeypatch):
    _install_fake_distribution(
        site, "durable-fake", {"fakestore": "fakeplug_good"}, {"fakeplug_good": GOOD_PLUGIN}
    )
    monkeypatch.setenv("DURABLE_DISABLE_PLUGIN_AUTOLOAD", "1")
    pm = make_plugin_manager()
    assert pm.stores().names() == ["memory"]
    assert pm.source("memory")[0] == "durable-core"


# covers: foundation (blocking)
def test_blocked_plugin_is_not_loaded(site, monkeypatch):
    _install_fake_distribution(
        site, "durable-fake", {"fakestore": "fakeplug_good"}, {"fakeplug_good": GOOD_PLUGIN}
    )
    monkeypatch.setenv("DURABLE_BLOCK_PLUGINS", "fakestore, sqlite")
    pm = make_plugin_manager()
    names = pm.stores().names()
    assert "fakestore" not in names and "sqlite" not in names
    assert "file" in names
    assert "fakeplug_good" not in sys.modules
    assert make_plugin_manager(block=[]).stores().names().count("fakestore") == 1


# covers: foundation (blocking)
def test_a_blocked_backend_is_named_blocked_not_missing(site, monkeypatch):
    monkeypatch.setenv("DURABLE_BLOCK_PLUGINS", "sqlite")
    pm = make_plugin_manager()
    with pytest.raises(PluginError) as refused:
        pm.store_factory("sqlite")
    message = str(refused.value)
    assert "blocked by the environment variable DURABLE_BLOCK_PLUGINS" in message
    assert "install it" not in message  # it is installed: installing again would not help


# covers: foundation (duplicate store name)
def test_duplicate_store_name_is_a_clear_error(site):
    dup = """
        from durable_core import hookimpl

        @hookimpl
        def durable_register_stores(register):
            register("file", lambda **options: None)
    """
    _install_fake_distribution(
        site, "durable-dup", {"dupfile": "fakeplug_dup"}, {"fakeplug_dup": dup}
    )
    pm = make_plugin_manager()
    with pytest.raises(PluginError) as exc:
        pm.stores()
    message = str(exc.value)
    assert "'file' is registered twice" in message
    assert "'dupfile'" in message and "'file'" in message
    assert "DURABLE_BLOCK_PLUGINS" in message


# covers: foundation (unknown store name)
def test_unknown_store_name_lists_installed_and_known(site, monkeypatch):
    monkeypatch.setenv("DURABLE_BLOCK_PLUGINS", "postgres")
    pm = make_plugin_manager()
    with pytest.raises(PluginError) as exc:
        pm.store_factory("nosuch")
    message = str(exc.value)
    assert "unknown store backend 'nosuch'" in message
    assert "Installed store backends: file, memory, sqlite" in message
    # not loaded and not blocked (blocked is another message): install it
    with pytest.raises(PluginError, match=r"durable-postgresstore.*install it"):
        make_plugin_manager(block=[], autoload=False).store_factory("postgres")


# covers: foundation (a broken plugin does not stop the others)
def test_broken_plugin_is_reported_with_its_distribution_and_others_still_load(site):
    _install_fake_distribution(
        site,
        "durable-broken",
        {"brokenstore": "fakeplug_broken"},
        {"fakeplug_broken": "raise RuntimeError('boom at import')\n"},
    )
    _install_fake_distribution(
        site, "durable-fake", {"fakestore": "fakeplug_good"}, {"fakeplug_good": GOOD_PLUGIN}
    )
    pm = make_plugin_manager()
    assert "fakestore" in pm.stores().names()
    error = pm.load_errors["brokenstore"]
    assert "durable-broken" in str(error) and "boom at import" in str(error)
    assert isinstance(error.__cause__, RuntimeError)
    with pytest.raises(PluginError, match="durable-broken"):
        pm.store_factory("brokenstore")
    info = {i.name: i for i in pm.describe()}
    assert "boom at import" in info["brokenstore"].error


# covers: foundation (a hook that does not exist)
def test_plugin_with_unknown_hook_is_refused():
    class Typo:
        @hookimpl
        def durable_register_storez(self, register):  # misspelt on purpose
            pass

    with pytest.raises(PluginError, match="durable_register_storez"):
        make_plugin_manager(autoload=False, plugins=[("typo", Typo())])


# covers: foundation (durable plugins)
def test_durable_plugins_command_lists_every_store_with_its_distribution():
    result = CliRunner().invoke(cli, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    listed = {p["name"]: p for p in json.loads(result.output)}
    for name, dist in KNOWN_STORES.items():
        assert listed[name]["distribution"] == dist
        assert name in listed[name]["stores"]
    text = CliRunner().invoke(cli, ["plugins"])
    assert text.exit_code == 0
    assert "sqlite  (durable-sqlitestore" in text.output


# covers: foundation (durable_register_commands)
def test_plugin_commands_are_added_to_the_durable_command(site, capsys):
    commands = """
        import click
        from durable_core import hookimpl

        @click.command("hello-fake")
        def hello():
            click.echo("hello from a plugin")

        @hookimpl
        def durable_register_commands(cli):
            cli.add_command(hello)
    """
    _install_fake_distribution(
        site, "durable-cmd", {"fakecmd": "fakeplug_cmd"}, {"fakeplug_cmd": commands}
    )
    from durable_core import cli as cli_module

    try:
        with pytest.raises(SystemExit) as exit_info:
            cli_module.main(["hello-fake"])
        assert exit_info.value.code == 0
        assert "hello from a plugin" in capsys.readouterr().out
        info = {i.name: i for i in make_plugin_manager().describe()}
        assert info["fakecmd"].commands == ("hello-fake",)
    finally:
        cli_module.cli.commands.pop("hello-fake", None)


class _Wrapper:
    """A ``wrapper=True`` plugin around every hook: it sees each implementation's call."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl(wrapper=True)
    def durable_register_stores(self, register):
        self.seen.append("stores")
        return (yield)

    @hookimpl(wrapper=True)
    def durable_register_codecs(self, codecs):
        self.seen.append("codecs")
        return (yield)

    @hookimpl(wrapper=True)
    def durable_recovery_event(self, event):
        self.seen.append(f"event:{event.kind}")
        return (yield)


class _Failing:
    @hookimpl
    def durable_recovery_event(self, event):
        raise RuntimeError("this plugin is broken")


class _Listening:
    def __init__(self) -> None:
        self.events: list[str] = []

    @hookimpl
    def durable_recovery_event(self, event):
        self.events.append(str(event.kind))


def test_wrapper_implementations_run_around_every_hook_call(caplog):
    from durable_core import Codecs, Graph, Key, MemoryStore, Runtime

    wrapper, listening = _Wrapper(), _Listening()
    pm = make_plugin_manager(
        autoload=False,
        plugins=[("wrap", wrapper), ("broken", _Failing()), ("listen", listening)],
    )
    assert "memory" in pm.stores().names()
    assert wrapper.seen == ["stores"]  # around the built-ins' registration
    Codecs.from_plugins(pm)
    assert wrapper.seen == ["stores", "codecs"]

    wrapper.seen.clear()
    n = Key("n", int)
    graph = Graph("g", inputs=[n])

    @graph.node("a", requires=[n], provides=[])
    def a(rc):
        pass

    result = Runtime(MemoryStore(), plugins=pm).run(graph, run_id="r", version="1", inputs={n: 1})
    assert result.status == "completed"
    # Each implementation is called on its own, with the wrapper around it: the failing one
    # is logged and stops neither the listener nor the wrapper.
    assert listening.events and wrapper.seen
    events = [seen for seen in wrapper.seen if seen.startswith("event:")]
    assert events == [f"event:{kind}" for kind in listening.events for _ in range(2)]
    assert any("plugin 'broken' raised" in r.getMessage() for r in caplog.records)
