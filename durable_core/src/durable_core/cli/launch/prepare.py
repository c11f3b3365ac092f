"""The first step of a launch: the CONFIG read and completed by the command line, the graph
imported, the plugins, codecs and inputs ready, the executor and the store open."""

from __future__ import annotations

import pathlib
from typing import Any

import attrs

from durable_core.cli.launch.request import LaunchRequest

__all__ = ["Prepared", "prepare"]


@attrs.frozen
class Prepared:
    """Everything a launch needs before the runtime exists; close it when the launch ends.

    Attributes:
        config: the run configuration, with the command line's run id, inputs, ``--max-running``
            and ``--store`` applied.
        pm: this invocation's plugin manager.
        graph: the configuration's graph.
        codecs: the run's codec registry.
        inputs: the root inputs, resolved and type-checked.
        executor: the configured executor, or ``None`` for the run's worker threads.
        store: the open store.
    """

    config: Any
    pm: Any
    graph: Any
    codecs: Any
    inputs: dict[Any, Any]
    executor: Any
    store: Any

    @property
    def run_id(self) -> str:
        """The run's id (the config's, or the command line's)."""
        return str(self.config.run_id)

    def close(self) -> None:
        """Close the store, then the executor."""
        try:
            self.store.close()
        finally:
            if self.executor is not None:
                self.executor.close()


def prepare(request: LaunchRequest) -> Prepared:
    """Load the CONFIG and apply the command line to it; open the executor and the store.

    Raises:
        ConfigError: the configuration, an ``--input`` or the ``--store`` URL is invalid.
        CodecError: a configured codec cannot be built.
        DurableError: the graph cannot be imported, or the store cannot be opened.
    """
    from durable_core.cli.context import plugin_manager
    from durable_core.config import load_config, parse_store_url
    from durable_core.config.inputs import parse_input_override

    config = load_config(request.config_arg).with_run_id(request.run_id_option)
    pm = plugin_manager()
    graph = config.load_graph()
    overrides = dict(
        parse_input_override(text, graph, pathlib.Path.cwd()) for text in request.input_options
    )
    store_url = request.store_url
    store_override = None if store_url is None else parse_store_url(store_url, pm=pm)
    config = config.with_overrides(
        inputs=overrides, max_running=request.max_running, store=store_override
    )
    config.register_graph_module(pm)
    codecs = config.make_codecs(pm)
    inputs = config.resolve_inputs(graph)
    executor = config.open_executor(pm)
    try:
        store = config.open_store(pm)
    except BaseException:
        if executor is not None:
            executor.close()
        raise
    return Prepared(config, pm, graph, codecs, inputs, executor, store)
