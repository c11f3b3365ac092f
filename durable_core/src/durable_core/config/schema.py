"""The configuration's schema: the attrs classes a TOML run configuration is checked against,
and the strict cattrs converter that checks it.

Adding a table: define a frozen attrs class for it (defaults for optional keys), add a field to
:class:`ConfigFile` and :class:`RunConfig`, list its keys in :data:`TABLE_KEYS` (for the
"allowed keys" hint), and pass it on in :func:`durable_core.config.loading.load_config`.
"""

from __future__ import annotations

import os
import pathlib
import sys
import typing
from collections.abc import Mapping
from typing import Any, Literal

import attrs
import cattrs

from durable_core.config._text import Invalid, describe_value, strict
from durable_core.config.executors import ExecutorConfig
from durable_core.config.inputs import (
    FILE_FORMATS,
    FileInput,
    InputSource,
    LiteralInput,
    PathInput,
    input_identity,
    resolve_inputs,
)
from durable_core.config.stores import StoreConfig, default_store_config
from durable_core.errors import ConfigError, PluginError

if typing.TYPE_CHECKING:
    from durable_core.plugins import DurablePluginManager

__all__ = [
    "CONFIG_CONVERTER",
    "DEFAULT_MAX_RUNNING",
    "TABLE_KEYS",
    "ConfigFile",
    "RunConfig",
    "RuntimeConfig",
]

DEFAULT_MAX_RUNNING = 8
"""Default cap on node bodies running at once (``[runtime] max_running``)."""


@attrs.frozen
class RuntimeConfig:
    """The ``[runtime]`` table.

    Attributes:
        max_running: cap on node bodies running at once across the whole run (G-7), >= 1.
    """

    max_running: int = DEFAULT_MAX_RUNNING


@attrs.frozen
class RunConfig:
    """A parsed run configuration (see the module documentation for the TOML layout).

    Attributes:
        path: the configuration file (absolute).
        graph: the graph reference, ``"package.module:attribute"``.
        run_id: the run's business identity.
        version: the host's business version, stored in the record and checked on resume.
        inputs: the root inputs by key name, as written (resolved by :meth:`resolve_inputs`).
        store: the store to open (the default file store when the file has no ``[store]``).
        codecs: plugin names that must be loaded for their codecs.
        json_classes: ``"package.module:Class"`` references of the attrs classes, dataclasses
            and enums to store as JSON (``[codecs] json``), registered with
            ``Codecs.register_json`` by :meth:`make_codecs`.
        runtime: runtime options.
        executor: where function-form bodies run (the ``[executor]`` table); None: the run's
            worker threads.
    """

    path: pathlib.Path
    graph: str
    run_id: str
    version: str
    inputs: Mapping[str, InputSource] = attrs.field(factory=dict)
    store: StoreConfig = attrs.field(factory=lambda: default_store_config())
    codecs: tuple[str, ...] = ()
    runtime: RuntimeConfig = RuntimeConfig()
    executor: ExecutorConfig | None = None
    json_classes: tuple[str, ...] = ()

    @property
    def base_dir(self) -> pathlib.Path:
        """The folder relative paths resolve against: the configuration file's folder."""
        return self.path.parent

    def with_run_id(self, run_id: str | None) -> RunConfig:
        """A copy with another run id (``--run-id``); ``None`` keeps this one.

        Raises:
            ConfigError: ``run_id`` is empty.
        """
        if run_id is None:
            return self
        if not run_id:
            raise ConfigError("--run-id must not be empty")
        return attrs.evolve(self, run_id=run_id)

    def with_overrides(
        self,
        inputs: Mapping[str, InputSource] | None = None,
        max_running: int | None = None,
        store: StoreConfig | None = None,
    ) -> RunConfig:
        """A copy with command-line overrides: ``inputs`` replace those entries of
        ``[inputs]`` (see :func:`~durable_core.config.inputs.parse_input_override`),
        ``max_running`` replaces ``[runtime] max_running``, ``store`` (``--store URL``) the
        ``[store]`` table; ``None`` keeps the file's.

        Raises:
            ConfigError: ``max_running`` is less than 1.
        """
        out = self
        if store is not None:
            out = attrs.evolve(out, store=store)
        if inputs:
            out = attrs.evolve(out, inputs={**out.inputs, **inputs})
        if max_running is not None:
            if max_running < 1:
                raise ConfigError(f"--max-running must be at least 1, found {max_running}")
            out = attrs.evolve(out, runtime=attrs.evolve(out.runtime, max_running=max_running))
        return out

    def load_graph(self) -> Any:
        """Import and return the graph named by ``graph`` (see
        :func:`~durable_core.config.loading.load_graph`)."""
        from durable_core.config.loading import load_graph

        return load_graph(self.graph, self.base_dir, origin=f"{self.path}: 'graph'")

    def resolve_inputs(self, graph: Any) -> dict[Any, Any]:
        """Match the configured inputs to the graph's root input keys and check their types.

        Files are read now; ``{ path = … }`` values become absolute paths.

        Args:
            graph: the graph whose root inputs (``graph.inputs``, a sequence of keys with
                ``name`` and ``type``) are to be fed.

        Returns:
            ``{key: value}`` for every root input key of the graph.

        Raises:
            ConfigError: a root input is missing, an input names no root input key, a file
                cannot be read, or a value does not have the key's type.
        """
        return resolve_inputs(self.inputs, graph, self.base_dir, f"{self.path}: [inputs]")

    def input_identity(self, graph: Any) -> dict[Any, Any]:
        """What stands for path inputs in the run's input fingerprint: their paths relative to
        the configuration's folder, for those under it (see
        :func:`~durable_core.config.inputs.input_identity`). Give it to the runtime as
        ``input_identity``."""
        return input_identity(self.inputs, graph, self.base_dir)

    def open_store(self, pm: DurablePluginManager | None = None) -> Any:
        """Open the configured store (see :meth:`StoreConfig.open`)."""
        return self.store.open(pm)

    def open_executor(self, pm: DurablePluginManager | None = None) -> Any:
        """Build the configured executor (see :meth:`ExecutorConfig.open`); None when the file
        has no ``[executor]`` table (the run's worker threads)."""
        return self.executor.open(pm) if self.executor is not None else None

    def check_codec_plugins(self, pm: DurablePluginManager) -> None:
        """Check that every plugin named in ``codecs`` is loaded.

        Raises:
            PluginError: a named plugin is not installed, is blocked, or failed to load.
        """
        for name in self.codecs:
            if name in pm.load_errors:
                raise pm.load_errors[name]
            if pm.get_plugin(name) is not None:
                continue
            if pm.is_blocked(name):
                raise PluginError(
                    f"{self.path}: 'codecs' needs the plugin {name!r}, which is blocked "
                    f"(DURABLE_BLOCK_PLUGINS); unblock it or remove it from 'codecs'"
                )
            loaded = ", ".join(sorted(n for n, p in pm.list_name_plugin() if p is not None))
            if os.environ.get("DURABLE_DISABLE_PLUGIN_AUTOLOAD", "") not in ("", "0"):
                raise PluginError(
                    f"{self.path}: 'codecs' needs the plugin {name!r}, but plugin autoload is "
                    f"disabled (DURABLE_DISABLE_PLUGIN_AUTOLOAD); unset it, or remove {name!r} "
                    f"from 'codecs'. Loaded plugins: {loaded or 'none'}"
                )
            raise PluginError(
                f"{self.path}: 'codecs' needs the plugin {name!r}, which is not installed; "
                f"install the distribution that declares the entry point {name!r} in the group "
                f"'durable'. Loaded plugins: {loaded or 'none'}"
            )

    def register_graph_module(self, pm: DurablePluginManager) -> bool:
        """Register the graph's module as a plugin when it implements Durable hooks.

        A graph whose values need codecs of its own (``register_json(MyClass)``) defines
        ``@durable_core.hookimpl def durable_register_codecs(codecs)`` next to the graph; the
        module is registered under the name ``graph:<module>``. Call after :meth:`load_graph`.

        Returns:
            True when the module was registered (now or earlier).

        Raises:
            PluginError: the module implements a hook Durable does not define, or with
                arguments the hook does not offer.
        """
        module_name = self.graph.partition(":")[0]
        module = sys.modules.get(module_name)
        if module is None:
            return False
        try:
            return pm.register_hooks(module, f"graph:{module_name}")
        except PluginError as exc:
            raise PluginError(
                f"{self.path}: the graph's module {module_name!r} implements a Durable hook "
                f"wrongly: {exc}; see docs/plugins.md for the hooks and their arguments"
            ) from exc

    def make_codecs(self, pm: DurablePluginManager) -> Any:
        """The codec registry for the run: built-ins, every loaded plugin's codecs, and a JSON
        codec for each class named in ``[codecs] json``.

        Raises:
            PluginError: a plugin named in ``codecs`` is missing (see
                :meth:`check_codec_plugins`).
            ConfigError: a ``[codecs] json`` reference does not import, is not a class, or is
                a class that cannot be stored as JSON (not an attrs class, dataclass or enum).
        """
        from durable_core.config.loading import import_reference
        from durable_core.errors import CodecError

        self.check_codec_plugins(pm)
        codecs = pm.codecs()
        origin = f"{self.path}: [codecs] json"
        for reference in self.json_classes:
            target = import_reference(reference, self.base_dir, origin=origin)
            if not isinstance(target, type):
                raise ConfigError(
                    f"{origin}: {reference!r} is not a class; name an attrs class, a dataclass "
                    "or an enum ('module:Class')"
                )
            try:
                codecs.register_json(target)
            except CodecError as exc:
                raise ConfigError(
                    f"{origin}: {reference!r} cannot be stored as JSON: {exc}"
                ) from exc
        return codecs


@attrs.frozen
class ConfigFile:
    """The TOML document as written (the converter checks every key against this)."""

    graph: str
    run_id: str
    version: str
    inputs: dict[str, InputSource] = attrs.field(factory=dict)
    store: StoreConfig | None = None
    codecs: list[str] | CodecsTable = attrs.field(factory=list)
    runtime: RuntimeConfig = RuntimeConfig()
    executor: ExecutorConfig | None = None


@attrs.frozen
class CodecsTable:
    """The ``[codecs]`` table (the list form ``codecs = ["numpy"]`` is ``plugins`` alone).

    Attributes:
        plugins: plugin names that must be loaded for their codecs.
        json: ``"package.module:Class"`` references of attrs classes, dataclasses and enums to
            store as JSON; a module resolves as the graph's does (next to the file first).
    """

    plugins: list[str] = attrs.field(factory=list)
    json: list[str] = attrs.field(factory=list)


TABLE_KEYS: dict[str, list[str]] = {
    "": [a.name for a in attrs.fields(ConfigFile)],
    "runtime": [a.name for a in attrs.fields(RuntimeConfig)],
    "codecs": [a.name for a in attrs.fields(CodecsTable)],
}
"""The allowed keys of each table (``""``: the top level), shown after an unknown key."""


# -- the TOML converter -----------------------------------------------------------------------


def _structure_input(value: Any, _type: Any) -> InputSource:
    if isinstance(value, dict):
        if "file" in value:
            return CONFIG_CONVERTER.structure(value, FileInput)
        if "path" in value:
            return CONFIG_CONVERTER.structure(value, PathInput)
        if "value" in value:
            if set(value) != {"value"}:
                extra = sorted(set(value) - {"value"})
                raise Invalid(
                    f"{{ value = … }} takes no other key, found {', '.join(map(repr, extra))}"
                )
            return LiteralInput(value["value"])
    return LiteralInput(value)


def _structure_store(value: Any, _type: Any) -> StoreConfig:
    if not isinstance(value, dict):
        raise Invalid(f"expected a table, found {describe_value(value)}")
    if "backend" not in value:
        raise Invalid("missing required key 'backend' (for example backend = \"sqlite\")")
    backend = value["backend"]
    if not isinstance(backend, str):
        raise Invalid(f"backend: expected a string, found {describe_value(backend)}")
    options = {k: v for k, v in value.items() if k != "backend"}
    return StoreConfig(backend=backend, options=options)


def _structure_executor(value: Any, _type: Any) -> ExecutorConfig:
    if not isinstance(value, dict):
        raise Invalid(f"expected a table, found {describe_value(value)}")
    if "backend" not in value:
        raise Invalid("missing required key 'backend' (for example backend = \"process\")")
    backend = value["backend"]
    if not isinstance(backend, str):
        raise Invalid(f"backend: expected a string, found {describe_value(backend)}")
    options = {k: v for k, v in value.items() if k != "backend"}
    return ExecutorConfig(backend=backend, options=options)


def _structure_codecs(value: Any, _type: Any) -> list[str] | CodecsTable:
    if isinstance(value, dict):
        return CONFIG_CONVERTER.structure(value, CodecsTable)
    if not isinstance(value, list):
        raise Invalid(
            f"expected a list of plugin names or a [codecs] table, found {describe_value(value)}"
        )
    return CONFIG_CONVERTER.structure(value, list[str])


def _structure_file_format(value: Any, _type: Any) -> str:
    if value in FILE_FORMATS:
        return value
    raise Invalid(
        f"expected one of {', '.join(map(repr, FILE_FORMATS))}, found {describe_value(value)}"
    )


def _strict_list_factory(tp: Any, conv: cattrs.Converter) -> Any:
    """Lists are lists: a string is never split into its characters (``codecs = "money"``)."""
    from cattrs.cols import list_structure_factory

    structure_items = list_structure_factory(tp, conv)

    def hook(value: Any, _type: Any) -> list[Any]:
        if not isinstance(value, list):
            raise Invalid(f"expected a list, found {describe_value(value)}")
        return structure_items(value, _type)

    return hook


def _make_config_converter() -> cattrs.Converter:
    from cattrs.gen import make_dict_structure_fn, override

    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, strict(str, "a string"))
    conv.register_structure_hook(int, strict(int, "an integer"))
    conv.register_structure_hook(bool, strict(bool, "a boolean"))
    conv.register_structure_hook_factory(
        lambda t: typing.get_origin(t) is list, _strict_list_factory
    )
    conv.register_structure_hook(InputSource, _structure_input)
    conv.register_structure_hook(StoreConfig, _structure_store)
    conv.register_structure_hook(ExecutorConfig, _structure_executor)
    conv.register_structure_hook_func(lambda t: t == list[str] | CodecsTable, _structure_codecs)
    conv.register_structure_hook_func(
        lambda t: t == Literal["text", "bytes", "json"], _structure_file_format
    )
    conv.register_structure_hook(
        FileInput,
        make_dict_structure_fn(
            FileInput, conv, _cattrs_forbid_extra_keys=True, as_=override(rename="as")
        ),
    )
    return conv


CONFIG_CONVERTER = _make_config_converter()
