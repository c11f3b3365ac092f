"""Loading: reading a TOML run configuration file, and importing the graph it names.

A configuration names the graph to run, the run id and business version, the root inputs, the
store, the codec plugins that must be loaded and runtime options::

    graph = "audit:build_graph"          # "package.module:attribute"; a Graph or a factory
    run_id = "stdlib-audit"
    version = "1"
    codecs = ["numpy"]                   # plugins that must be loaded (optional)

    [inputs]
    shards = 16                          # a literal TOML value
    text = { file = "input.txt" }        # a file's content; as = "text" | "bytes" | "json"
    out_dir = { path = "report" }        # a path, resolved against the config's folder

    [store]                              # optional; default: the file store
    backend = "sqlite"                   # "file" | "sqlite" | "postgres" | any plugin's name
    path = "runs.sqlite"                 # the backend's options, passed to its factory

    [runtime]
    max_running = 8

Every key is checked: an unknown key, a wrong type or a missing key raises
:class:`~durable_core.errors.ConfigError` naming the file, the table and the key. Relative paths
resolve against the folder of the configuration file, and that folder is put on ``sys.path`` so
that the graph's module can sit next to its configuration.
"""

from __future__ import annotations

import importlib
import os
import pathlib
import sys
import tomllib
from typing import Any

import attrs

from durable_core._words import a
from durable_core.config._text import explain
from durable_core.config.schema import (
    CONFIG_CONVERTER,
    TABLE_KEYS,
    CodecsTable,
    ConfigFile,
    RunConfig,
)
from durable_core.config.stores import default_store_config
from durable_core.errors import ConfigError, DurableError

__all__ = ["import_reference", "load_config", "load_graph"]


def load_config(path: str | os.PathLike[str]) -> RunConfig:
    """Read and check a run configuration file.

    Only the file's own content is checked here; the graph is imported by
    :meth:`RunConfig.load_graph` and inputs are matched by :meth:`RunConfig.resolve_inputs`.

    Args:
        path: the TOML file.

    Returns:
        The configuration, with the default store when the file has no ``[store]`` table.

    Raises:
        ConfigError: the file cannot be read or is not valid TOML, or a key is unknown, has the
            wrong type, or a required key (``graph``, ``run_id``, ``version``) is missing; the
            message names the file, the table and the key.
    """
    file = pathlib.Path(path).expanduser().absolute()
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such configuration file") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the configuration file: {exc}") from exc
    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text ({exc}); TOML files are UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        hint = ""
        if file.suffix == ".py":
            hint = (
                f". CONFIG is the run's TOML file, not the graph's module: write one that "
                f'names it (graph = "{file.stem}:graph", run_id, version, [inputs]; see '
                "docs/cli.md, 'Configuration reference')"
            )
        raise ConfigError(f"{file}: invalid TOML: {exc}{hint}") from None
    try:
        parsed = CONFIG_CONVERTER.structure(document, ConfigFile)
    except Exception as exc:
        raise ConfigError(f"{file}: {explain(exc, table_keys=TABLE_KEYS)}") from None
    problems = []
    if not parsed.graph:
        problems.append("top level, key 'graph': must not be empty")
    if not parsed.run_id:
        problems.append("top level, key 'run_id': must not be empty")
    if parsed.runtime.max_running < 1:
        problems.append(
            f"[runtime] max_running: must be at least 1, found {parsed.runtime.max_running}"
        )
    if parsed.store is not None and not parsed.store.backend:
        problems.append("[store] backend: must not be empty")
    if parsed.executor is not None and not parsed.executor.backend:
        problems.append("[executor] backend: must not be empty")
    if problems:
        raise ConfigError(f"{file}: {'; '.join(problems)}")
    store = (
        attrs.evolve(parsed.store, base_dir=file.parent, origin=f"{file}: [store]")
        if parsed.store is not None
        else default_store_config()
    )
    return RunConfig(
        path=file,
        graph=parsed.graph,
        run_id=parsed.run_id,
        version=parsed.version,
        inputs=dict(parsed.inputs),
        store=store,
        codecs=tuple(
            parsed.codecs.plugins if isinstance(parsed.codecs, CodecsTable) else parsed.codecs
        ),
        json_classes=(tuple(parsed.codecs.json) if isinstance(parsed.codecs, CodecsTable) else ()),
        runtime=parsed.runtime,
        executor=(
            attrs.evolve(parsed.executor, origin=f"{file}: [executor]")
            if parsed.executor is not None
            else None
        ),
    )


def load_graph(reference: str, base_dir: pathlib.Path, *, origin: str = "graph") -> Any:
    """Import the graph named ``"package.module:attribute"``.

    ``base_dir`` is put at the front of ``sys.path`` first, so a module next to its
    configuration imports. The attribute may be dotted (``module:holder.graph``). It is a
    ``Graph``, or a callable taking no arguments that returns one.

    Args:
        reference: ``"package.module:attribute"``.
        base_dir: the folder to put on ``sys.path``.
        origin: where the reference was written, for messages.

    Returns:
        The graph.

    Raises:
        ConfigError: the reference is malformed, the module cannot be imported (or raised while
            importing), the attribute is missing, or it is not a graph or graph factory.
        GraphError: building the graph broke a static rule (G-5).
    """
    target = import_reference(reference, base_dir, origin=origin, example="audit:graph")
    from durable_core.graph import Graph

    if isinstance(target, Graph):
        return target
    if callable(target):
        try:
            built = target()
        except DurableError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"{origin}: calling {reference!r} failed: {type(exc).__name__}: {exc}; it must "
                f"take no arguments and return a Graph"
            ) from exc
        if isinstance(built, Graph):
            return built
        raise ConfigError(
            f"{origin}: {reference!r} returned {type(built).__name__}, expected a Graph"
        )
    raise ConfigError(
        f"{origin}: {reference!r} is {a(type(target).__name__)}; expected a Graph or a function "
        f"taking no arguments that returns one"
    )


def import_reference(
    reference: str, base_dir: pathlib.Path, *, origin: str, example: str = "pipeline:Acc"
) -> Any:
    """The object named ``"package.module:attribute"`` (a dotted attribute is followed), with
    ``base_dir`` at the front of ``sys.path`` first.

    Raises:
        ConfigError: the reference is malformed, the module cannot be imported (or raised while
            importing), or the attribute is missing.
    """
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(
            f"{origin}: expected 'package.module:attribute' (for example {example!r}), "
            f"found {reference!r}"
        )
    folder = str(base_dir)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except DurableError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise ConfigError(
                f"{origin}: cannot import module {module_name!r}: no such module in {folder} "
                f"or on sys.path; check the spelling, or install the package that provides it"
            ) from exc
        raise ConfigError(
            f"{origin}: importing module {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        raise ConfigError(
            f"{origin}: importing module {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ConfigError(
                f"{origin}: module {module_name!r} has no attribute {attribute!r}"
            ) from None
    return target
