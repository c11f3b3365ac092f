"""Run configuration: strict TOML parsing, store options and URLs, codec plugins.

Graph loading and input matching against a real graph are tested in test_graph.py.
"""

from __future__ import annotations

import pathlib
import textwrap

import pytest

from durable_core import ConfigError, PluginError, make_plugin_manager
from durable_core.config import (
    HOME_ENV,
    FileInput,
    LiteralInput,
    PathInput,
    RunConfig,
    StoreConfig,
    default_store_config,
    default_store_directory,
    load_config,
    parse_store_url,
)

MINIMAL = """
graph = "mod:graph"
run_id = "r1"
version = "1"
"""


def write(tmp_path: pathlib.Path, text: str, name: str = "run.toml") -> pathlib.Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def config_error(tmp_path: pathlib.Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message  # every message names the file
    return message


def test_minimal_config_gets_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    config = load_config(write(tmp_path, MINIMAL))
    assert isinstance(config, RunConfig)
    assert (config.graph, config.run_id, config.version) == ("mod:graph", "r1", "1")
    assert config.inputs == {}
    assert config.codecs == ()
    assert config.runtime.max_running == 8
    assert config.store.backend == "file"
    assert config.store.resolved_options() == {"directory": str(tmp_path / "home" / "runs")}
    assert config.base_dir == tmp_path


def test_full_config_is_parsed_into_classes(tmp_path):
    config = load_config(
        write(
            tmp_path,
            """
            graph = "pkg.mod:build"
            run_id = "audit"
            version = "2024.1"
            codecs = ["numpy"]

            [inputs]
            n = 3
            words = ["a", "b"]
            text = { file = "in.txt" }
            blob = { file = "in.bin", as = "bytes" }
            doc = { file = "in.json", as = "json" }
            out = { path = "report" }
            table = { value = { file = "not a file input" } }
            plain = { a = 1 }

            [store]
            backend = "sqlite"
            path = "db/runs.sqlite"

            [runtime]
            max_running = 2
            """,
        )
    )
    assert config.inputs == {
        "n": LiteralInput(3),
        "words": LiteralInput(["a", "b"]),
        "text": FileInput("in.txt", "text"),
        "blob": FileInput("in.bin", "bytes"),
        "doc": FileInput("in.json", "json"),
        "out": PathInput("report"),
        "table": LiteralInput({"file": "not a file input"}),
        "plain": LiteralInput({"a": 1}),
    }
    assert config.codecs == ("numpy",)
    assert config.runtime.max_running == 2
    assert config.store.backend == "sqlite"
    # relative store paths resolve against the config's folder, not the current directory
    assert config.store.resolved_options() == {"path": str(tmp_path / "db" / "runs.sqlite")}


def test_unknown_top_level_key_is_named(tmp_path):
    message = config_error(tmp_path, MINIMAL + 'grpah = "x"\n')
    assert "top level: unknown key 'grpah'" in message
    assert "allowed keys: graph" in message


def test_unknown_key_in_a_table_names_the_table(tmp_path):
    message = config_error(tmp_path, MINIMAL + "[runtime]\nmax_running = 2\nworkers = 3\n")
    assert "[runtime]: unknown key 'workers'" in message


@pytest.mark.parametrize("missing", ["graph", "run_id", "version"])
def test_missing_required_key_is_named(tmp_path, missing):
    text = "\n".join(line for line in MINIMAL.splitlines() if not line.startswith(missing))
    message = config_error(tmp_path, text)
    assert f"missing required key {missing!r}" in message


def test_wrong_types_are_named_with_what_was_found(tmp_path):
    message = config_error(
        tmp_path,
        """
        graph = "mod:graph"
        run_id = 7
        version = "1"
        codecs = ["numpy", 3]
        [runtime]
        max_running = "8"
        """,
    )
    assert "key 'run_id': expected a string, found an integer (7)" in message
    assert "key 'codecs[1]': expected a string, found an integer (3)" in message
    assert "[runtime] max_running: expected an integer, found a string ('8')" in message


def test_boolean_is_not_an_integer(tmp_path):
    message = config_error(tmp_path, MINIMAL + "[runtime]\nmax_running = true\n")
    assert "[runtime] max_running: expected an integer, found a boolean" in message


def test_max_running_must_be_positive(tmp_path):
    message = config_error(tmp_path, MINIMAL + "[runtime]\nmax_running = 0\n")
    assert "[runtime] max_running: must be at least 1" in message


def test_empty_run_id_is_refused(tmp_path):
    message = config_error(tmp_path, MINIMAL.replace('"r1"', '""'))
    assert "'run_id': must not be empty" in message


def test_file_input_checks_its_keys(tmp_path):
    message = config_error(
        tmp_path, MINIMAL + '[inputs]\ntext = { file = "a.txt", as = "xml", encoding = "latin1" }\n'
    )
    assert "[inputs.text] as: expected one of 'text', 'bytes', 'json'" in message
    assert "[inputs.text]: unknown key 'encoding'" in message


def test_store_table_needs_a_backend(tmp_path):
    message = config_error(tmp_path, MINIMAL + '[store]\ndirectory = "runs"\n')
    assert "[store]: missing required key 'backend'" in message


def test_invalid_toml_names_the_line(tmp_path):
    message = config_error(tmp_path, MINIMAL + "[runtime\n")
    assert "invalid TOML" in message
    assert "line 5" in message


def test_a_graph_module_given_as_config_says_to_write_the_toml_file(tmp_path):
    module = tmp_path / "jobs.py"
    module.write_text("from durable_core import Graph\n\ngraph = Graph('g')\n")
    with pytest.raises(ConfigError) as refused:
        load_config(module)
    message = str(refused.value)
    assert "invalid TOML" in message
    assert "CONFIG is the run's TOML file, not the graph's module" in message
    assert 'graph = "jobs:graph"' in message
    assert "not the graph's module" not in config_error(tmp_path, MINIMAL + "[runtime\n")


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_config(tmp_path / "absent.toml")


def test_run_id_override(tmp_path):
    config = load_config(write(tmp_path, MINIMAL))
    assert config.with_run_id("other").run_id == "other"
    assert config.with_run_id(None) is config
    with pytest.raises(ConfigError, match="--run-id must not be empty"):
        config.with_run_id("")


# -- store options ------------------------------------------------------------------------------


def test_env_option_reads_the_variable_and_hides_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_PG_DSN", "postgresql://user:s3cret@db.example/runs")
    config = load_config(
        write(tmp_path, MINIMAL + '[store]\nbackend = "postgres"\ndsn_env = "TEST_PG_DSN"\n')
    )
    assert config.store.resolved_options() == {"dsn": "postgresql://user:s3cret@db.example/runs"}
    assert "s3cret" not in config.store.describe()
    assert "$TEST_PG_DSN" in config.store.describe()


def test_env_option_with_unset_variable_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.delenv("TEST_PG_DSN_UNSET", raising=False)
    config = load_config(
        write(tmp_path, MINIMAL + '[store]\nbackend = "postgres"\ndsn_env = "TEST_PG_DSN_UNSET"\n')
    )
    with pytest.raises(ConfigError, match="'TEST_PG_DSN_UNSET', which is not set"):
        config.store.resolved_options()


def test_option_and_its_env_variant_together_are_refused(tmp_path):
    config = load_config(
        write(tmp_path, MINIMAL + '[store]\nbackend = "postgres"\ndsn = "x"\ndsn_env = "Y"\n')
    )
    with pytest.raises(ConfigError, match="both 'dsn' and 'dsn_env'"):
        config.store.resolved_options()


def test_unknown_backend_lists_the_installed_ones(tmp_path):
    config = load_config(write(tmp_path, MINIMAL + '[store]\nbackend = "cassandra"\n'))
    with pytest.raises(PluginError) as info:
        config.open_store(make_plugin_manager())
    assert "unknown store backend 'cassandra'" in str(info.value)
    assert "memory" in str(info.value)


def test_options_a_backend_does_not_accept_are_a_config_error(tmp_path):
    config = load_config(write(tmp_path, MINIMAL + '[store]\nbackend = "memory"\ncolour = 3\n'))
    with pytest.raises(ConfigError, match=r"'memory' store .*colour"):
        config.open_store(make_plugin_manager())


def test_default_store_follows_durable_home(tmp_path, monkeypatch):
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    assert default_store_directory() == tmp_path / "runs"
    assert default_store_config().resolved_options() == {"directory": str(tmp_path / "runs")}
    monkeypatch.delenv(HOME_ENV)
    assert default_store_directory().name == "runs"
    assert default_store_directory().parent.name == "durable"


# -- store URLs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "backend", "options"),
    [
        ("file:///var/runs", "file", {"directory": "/var/runs"}),
        ("file://localhost/var/runs", "file", {"directory": "/var/runs"}),
        ("file:runs", "file", {"directory": "{cwd}/runs"}),
        ("./runs", "file", {"directory": "{cwd}/runs"}),
        ("/abs/runs", "file", {"directory": "/abs/runs"}),
        ("sqlite:///var/db/runs.sqlite", "sqlite", {"path": "/var/db/runs.sqlite"}),
        ("sqlite:runs.sqlite", "sqlite", {"path": "{cwd}/runs.sqlite"}),
        ("file:///with%20space", "file", {"directory": "/with space"}),
        ("postgres://u@h/db", "postgres", {"dsn": "postgres://u@h/db"}),
        ("postgresql://u:pw@h:5433/db", "postgres", {"dsn": "postgresql://u:pw@h:5433/db"}),
        ("memory:", "memory", {}),
    ],
)
def test_store_urls(tmp_path, monkeypatch, url, backend, options):
    monkeypatch.chdir(tmp_path)
    store = parse_store_url(url)
    assert isinstance(store, StoreConfig)
    assert store.backend == backend
    expected = {k: v.replace("{cwd}", str(tmp_path)) for k, v in options.items()}
    assert store.resolved_options() == expected


def test_store_url_password_is_never_described():
    assert "pw" not in parse_store_url("postgresql://u:pw@h/db").describe()


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("redis://h/0", "unknown store URL scheme 'redis'"),
        ("file://otherhost/x", "remote host"),
        ("sqlite:", "no path"),
        ("memory:somewhere", "takes no location"),
    ],
)
def test_bad_store_urls(url, match):
    with pytest.raises(ConfigError, match=match):
        parse_store_url(url)


def test_default_store_url(tmp_path, monkeypatch):
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    assert parse_store_url("default").resolved_options() == {"directory": str(tmp_path / "runs")}


# -- codec plugins ------------------------------------------------------------------------------


def test_codec_plugins_must_be_loaded(tmp_path):
    config = load_config(write(tmp_path, MINIMAL + 'codecs = ["memory", "no-such-plugin"]\n'))
    with pytest.raises(PluginError, match=r"needs the plugin 'no-such-plugin'.*not installed"):
        config.check_codec_plugins(make_plugin_manager(autoload=False))


def test_codec_plugin_missing_because_autoload_is_off_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("DURABLE_DISABLE_PLUGIN_AUTOLOAD", "1")
    config = load_config(write(tmp_path, MINIMAL + 'codecs = ["numpy"]\n'))
    with pytest.raises(PluginError, match="autoload is disabled") as caught:
        config.check_codec_plugins(make_plugin_manager())
    assert "not installed" not in str(caught.value)


def test_blocked_codec_plugin_is_named(tmp_path):
    config = load_config(write(tmp_path, MINIMAL + 'codecs = ["numpy"]\n'))
    with pytest.raises(PluginError, match="'numpy', which is blocked"):
        config.check_codec_plugins(make_plugin_manager(block=["numpy"]))


def test_loaded_codec_plugin_passes(tmp_path):
    config = load_config(write(tmp_path, MINIMAL + 'codecs = ["memory"]\n'))
    config.check_codec_plugins(make_plugin_manager(autoload=False))
