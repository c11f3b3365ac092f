"""``--store URL`` names plugin stores: a store plugin claims URL schemes when it registers, and
``run``, ``resume``, ``list`` and ``inspect`` reach it through ``--store myfiles:…``."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from durable_core.cli import ExitCode
from durable_core.config import parse_store_url
from durable_core.errors import ConfigError, PluginError
from durable_core.plugins import make_plugin_manager
from durable_core.store.locks import run_key

PLUGIN = """
from durable_core import hookimpl


def _factory(root_dir):
    from durable_filestore import FileStore

    return FileStore(root_dir)


def _from_url(url):
    from durable_core.config import url_path

    return {"root_dir": url_path(url)}


@hookimpl
def durable_register_stores(register):
    register("myfiles", _factory, url_schemes=["myfiles"], from_url=_from_url)
"""


def _install(site: Path, dist: str, name: str, module: str, source: str) -> None:
    """A real (unpacked) distribution on sys.path with an entry point in the group durable."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[durable]\n{name} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("DURABLE_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("DURABLE_BLOCK_PLUGINS", raising=False)
    yield site
    for name in [m for m in sys.modules if m.startswith("urlplug_")]:
        del sys.modules[name]


@pytest.fixture
def myfiles(site):
    _install(site, "durable-myfiles", "myfiles", "urlplug_myfiles", PLUGIN)


# covers: foundation (store plugins), E-2
@pytest.mark.parametrize("ops", ["file"], indirect=True)
def test_run_list_inspect_and_resume_through_a_plugin_store_url(ops, myfiles):
    url = "myfiles:plugin-runs"  # relative: resolved against the current directory
    (ops.folder / "broken").touch()  # ``total`` fails for good
    failed = ops.invoke("run", ops.config, "--store", url)
    assert failed.exit_code == ExitCode.RUN_FAILED, failed.output
    assert f"inspect it with: durable inspect --store {url} ops-1" in failed.stderr
    # The plugin's store holds the run, not the config's [store].
    assert (ops.folder / "plugin-runs" / f"{run_key('ops-1')}.json").is_file()
    assert not (ops.folder / "runs").exists()
    assert ops.invoke("inspect", ops.config).exit_code == ExitCode.NOT_FOUND
    (ops.folder / "broken").unlink()
    done = ops.invoke("run", ops.config, "--run-id", "ops-2", "--store", url)
    assert done.exit_code == 0, done.output
    assert "in the myfiles store at" in done.stdout
    listed = ops.json("list", "--store", url)
    # Without the graph, a run whose every node is confirmed is "settled".
    assert [(row["run_id"], row["status"]) for row in listed] == [
        ("ops-2", "settled"),  # newest first
        ("ops-1", "failed"),
    ]
    inspected = ops.json("inspect", "--store", url, "ops-2")
    assert inspected["run_id"] == "ops-2" and inspected["status"] == "settled"
    assert "myfiles store" in inspected["store"]
    resumed = ops.invoke("resume", ops.config, "--run-id", "ops-2", "--store", url, "--json")
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["restored"] == 3  # nothing ran again
    assert ops.calls().count("double") == 2  # once per run


# covers: foundation (store plugins)
def test_durable_plugins_shows_the_schemes_a_plugin_claims(myfiles):
    from click.testing import CliRunner

    from durable_core.cli import cli

    result = CliRunner().invoke(cli, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    info = {row["name"]: row for row in json.loads(result.stdout)}
    assert info["myfiles"]["url_schemes"] == ["myfiles"]
    assert info["sqlite"]["url_schemes"] == ["sqlite"]
    assert info["postgres"]["url_schemes"] == ["postgres", "postgresql"]


# covers: foundation (store plugins)
def test_built_in_stores_claim_their_schemes_through_the_same_hook(monkeypatch):
    monkeypatch.setenv("DURABLE_BLOCK_PLUGINS", "sqlite")
    pm = make_plugin_manager()
    assert pm.stores().for_scheme("file") == (
        "file",
        pm.stores().for_scheme("file")[1],
    )
    assert "sqlite" not in pm.stores().schemes()
    with pytest.raises(ConfigError, match="distribution 'durable-sqlitestore': install it"):
        parse_store_url("sqlite:runs.sqlite", pm=pm)


# covers: foundation (store plugins)
def test_an_unknown_scheme_lists_the_known_ones_and_says_what_to_install():
    with pytest.raises(ConfigError) as caught:
        parse_store_url("redis://h/0", pm=make_plugin_manager())
    message = str(caught.value)
    assert "unknown store URL scheme 'redis'" in message
    assert "file:, memory:, postgres:, postgresql:, sqlite:" in message
    assert "Install the store plugin that provides redis: URLs" in message


# covers: foundation (store plugins)
def test_a_scheme_claimed_twice_names_both_plugins(site):
    _install(
        site,
        "durable-thief",
        "thief",
        "urlplug_thief",
        """
        from durable_core import hookimpl

        @hookimpl
        def durable_register_stores(register):
            register("thief", lambda **o: None, url_schemes=["sqlite"])
        """,
    )
    with pytest.raises(PluginError, match=r"'sqlite' is claimed twice.*'thief'"):
        make_plugin_manager().stores()


# covers: foundation (store plugins)
def test_a_plugin_store_without_from_url_gets_the_url_as_its_option(site):
    _install(
        site,
        "durable-urlonly",
        "urlonly",
        "urlplug_urlonly",
        """
        from durable_core import hookimpl

        @hookimpl
        def durable_register_stores(register):
            register("urlonly", lambda url: ("urlonly", url), url_schemes=["urlonly"])
        """,
    )
    pm = make_plugin_manager()
    config = parse_store_url("urlonly://bucket/prefix", pm=pm)
    assert config.backend == "urlonly" and dict(config.options) == {
        "url": "urlonly://bucket/prefix"
    }
    assert config.open(pm) == ("urlonly", "urlonly://bucket/prefix")


# covers: foundation (store plugins)
@pytest.mark.parametrize("bad", ["x", "My-Store", "1abc", "a b"])
def test_a_malformed_scheme_is_refused_when_registered(bad):
    class Plugin:
        from durable_core import hookimpl

        @hookimpl
        def durable_register_stores(self, register):
            register("bad", lambda **o: None, url_schemes=[bad])

    pm = make_plugin_manager(autoload=False, plugins=[("bad", Plugin())])
    with pytest.raises(PluginError, match="URL scheme"):
        pm.stores()


def test_a_plain_path_to_a_sqlite_database_says_to_open_it_as_sqlite(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from durable_core.cli import cli
    from durable_sqlitestore import SQLiteStore

    monkeypatch.chdir(tmp_path)
    SQLiteStore(tmp_path / "runs.sqlite").close()  # an empty SQLite store
    (tmp_path / "notes.txt").write_text("not a store")
    runner = CliRunner()
    database = runner.invoke(cli, ["list", "--store", "runs.sqlite"])
    assert database.exit_code == ExitCode.CONFIG, database.output
    suggested = f"--store sqlite://{tmp_path / 'runs.sqlite'}"  # sqlite:///abs/path
    assert f"It is a SQLite database: open it as the SQLite store ({suggested}" in database.stderr
    # the suggested URL works
    assert (
        runner.invoke(cli, ["list", "--store", f"sqlite://{tmp_path / 'runs.sqlite'}"]).exit_code
        == 0
    )
    other = runner.invoke(cli, ["list", "--store", "notes.txt"])
    assert other.exit_code == ExitCode.CONFIG
    assert "Choose another path or move the file away" in other.stderr
    assert (tmp_path / "notes.txt").read_text() == "not a store"
