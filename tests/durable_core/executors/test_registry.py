"""The durable_register_executors hook, the registry, Runtime(executor=) and durable plugins."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from durable_core import (
    ConfigError,
    Executor,
    MemoryStore,
    PluginError,
    ProcessExecutor,
    Runtime,
    ThreadExecutor,
    hookimpl,
    make_plugin_manager,
)
from durable_core.cli import cli
from durable_core.plugins import KNOWN_EXECUTORS


class _Inline(Executor):
    name = "inline"


class _Plugin:
    @staticmethod
    @hookimpl
    def durable_register_executors(register):
        register("inline", _Inline)


def test_builtins_register_thread_and_process_through_the_hook():
    pm = make_plugin_manager(autoload=False)
    assert {"thread", "process"} <= set(pm.executors().names())
    assert isinstance(pm.executor_factory("thread")(), ThreadExecutor)
    process = pm.executor_factory("process")(max_workers=3)
    assert isinstance(process, ProcessExecutor) and process.max_workers == 3
    assert pm.executors().provider("process") == "memory"


def test_a_plugin_registers_an_executor_with_durable_register_executors():
    pm = make_plugin_manager(autoload=False, plugins=[("inline-plugin", _Plugin())])
    assert isinstance(pm.executor_factory("inline")(), _Inline)
    info = {i.name: i for i in pm.describe()}
    assert info["inline-plugin"].executors == ("inline",)


def test_a_name_registered_twice_names_both_plugins():
    pm = make_plugin_manager(autoload=False, plugins=[("p1", _Plugin()), ("p2", _Plugin())])
    with pytest.raises(PluginError, match=r"'inline' is registered twice"):
        pm.executors()


def test_an_unknown_name_lists_installed_and_known_executors():
    pm = make_plugin_manager(autoload=False)
    with pytest.raises(PluginError, match=r"durable-executor-dask.*Installed executor backends"):
        pm.executor_factory("dask")
    assert KNOWN_EXECUTORS["dask"] == "durable-executor-dask"


def test_runtime_takes_an_executor_a_name_or_nothing():
    assert Runtime(MemoryStore()).executor is None
    executor = ProcessExecutor(max_workers=1)
    assert Runtime(MemoryStore(), executor=executor).executor is executor
    built = Runtime(MemoryStore(), executor="process", plugins=make_plugin_manager(autoload=False))
    assert isinstance(built.executor, ProcessExecutor)
    with pytest.raises(PluginError, match="unknown executor backend 'nope'"):
        Runtime(MemoryStore(), executor="nope", plugins=make_plugin_manager(autoload=False))
    with pytest.raises(ConfigError, match="executor must be"):
        Runtime(MemoryStore(), executor=42)


def test_durable_plugins_lists_executors():
    out = CliRunner().invoke(cli, ["plugins", "--json"])
    assert out.exit_code == 0, out.output
    by_name = {p["name"]: p for p in json.loads(out.output)}
    assert by_name["memory"]["executors"] == ["process", "thread"]
    assert by_name["dask"]["executors"] == ["dask"]
    assert by_name["dask"]["distribution"] == "durable-executor-dask"
