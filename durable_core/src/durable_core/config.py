"""Run configuration: a TOML file parsed strictly into attrs classes (cattrs).

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

    [store]                              # optional; default: the file store (see below)
    backend = "sqlite"                   # "file" | "sqlite" | "postgres" | any plugin's name
    path = "runs.sqlite"                 # the backend's options, passed to its factory
    # dsn_env = "PG_DSN"                 # "<option>_env": <option> from an environment variable

    [runtime]
    max_running = 8

Every key is checked: an unknown key, a wrong type or a missing key raises
:class:`~durable_core.errors.ConfigError` naming the file, the table and the key. Relative paths
(input files, ``{ path = … }`` inputs, the store's path-like options) resolve against the folder
of the configuration file, and that folder is put on ``sys.path`` so that the graph's module can
sit next to its configuration.

Without a ``[store]`` table, runs are saved by the file store in ``$DURABLE_HOME/runs`` when the
environment variable ``DURABLE_HOME`` is set, else in ``platformdirs.user_data_dir("durable")``
``/runs`` (for example ``~/.local/share/durable/runs`` on Linux).

The reference for users is ``docs/cli.md`` ("Configuration").
"""

from __future__ import annotations

import datetime
import importlib
import inspect
import json
import os
import pathlib
import re
import sys
import tomllib
import types
import typing
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs
import cattrs
import platformdirs

from durable_core.errors import ConfigError, DurableError, PluginError

if typing.TYPE_CHECKING:
    from durable_core.plugins import DurablePluginManager

__all__ = [
    "DEFAULT_MAX_RUNNING",
    "HOME_ENV",
    "FileInput",
    "LiteralInput",
    "PathInput",
    "RunConfig",
    "RuntimeConfig",
    "StoreConfig",
    "default_store_config",
    "default_store_directory",
    "load_config",
    "load_graph",
    "parse_store_url",
]

HOME_ENV = "DURABLE_HOME"
"""Environment variable overriding the folder of the default file store (``$DURABLE_HOME/runs``)."""

DEFAULT_MAX_RUNNING = 8
"""Default cap on node bodies running at once (``[runtime] max_running``)."""

_FILE_FORMATS = ("text", "bytes", "json")

_PATH_OPTION = re.compile(r"^(directory|path|file|.+_(dir|directory|path|file))$")
"""Store options whose string value is a filesystem path, resolved against the config's folder."""

_ENV_SUFFIX = "_env"

_SECRET_OPTION = re.compile(r"(dsn|password|passwd|secret|token|url|uri|conninfo)", re.IGNORECASE)


# -- the classes ------------------------------------------------------------------------------


@attrs.frozen
class LiteralInput:
    """An input given as a literal TOML value (``n = 3`` or ``n = { value = 3 }``)."""

    value: Any


@attrs.frozen
class FileInput:
    """An input read from a file when the run starts: ``{ file = "x.txt", as = "text" }``.

    Attributes:
        file: the file's path; relative paths resolve against the config's folder.
        as_: how to read it (TOML key ``as``): ``"text"`` (UTF-8 text, a ``str``), ``"bytes"``
            (the raw bytes) or ``"json"`` (a JSON document, checked against the key's type).
    """

    file: str
    as_: Literal["text", "bytes", "json"] = "text"


@attrs.frozen
class PathInput:
    """A filesystem path given as input: ``{ path = "report" }``.

    The value given to the graph is the absolute path (a ``str``, or a ``pathlib.Path`` when
    the key's type is ``Path``); relative paths resolve against the config's folder. The path
    need not exist.
    """

    path: str


InputSource = LiteralInput | FileInput | PathInput


@attrs.frozen
class RuntimeConfig:
    """The ``[runtime]`` table.

    Attributes:
        max_running: cap on node bodies running at once across the whole run (G-7), >= 1.
    """

    max_running: int = DEFAULT_MAX_RUNNING


@attrs.frozen
class StoreConfig:
    """Which store backend to open, with which options.

    Attributes:
        backend: the store's registered name (``file``, ``sqlite``, ``postgres``, ``memory`` or
            a plugin's name; see ``durable plugins``).
        options: keyword arguments for the backend's factory, as written. An option named
            ``<name>_env`` is replaced by ``<name>`` read from that environment variable;
            path-like options (``directory``, ``path``, ``file``, ``*_dir``, ``*_directory``,
            ``*_path``, ``*_file``) resolve against ``base_dir``.
        base_dir: the folder relative paths resolve against (the config's folder, or the
            current directory for a ``--store`` URL).
        origin: where this came from, for messages (``"[store] of /x/audit.toml"``).
    """

    backend: str
    options: Mapping[str, Any] = attrs.field(factory=dict)
    base_dir: pathlib.Path = attrs.field(factory=pathlib.Path.cwd)
    origin: str = "the store settings"

    def resolved_options(self) -> dict[str, Any]:
        """The factory's keyword arguments: ``*_env`` options read, relative paths resolved.

        Raises:
            ConfigError: an ``*_env`` option names a variable that is not set or not a string,
                or both ``x`` and ``x_env`` are given.
        """
        out: dict[str, Any] = {}
        for name, value in self.options.items():
            if name.endswith(_ENV_SUFFIX) and len(name) > len(_ENV_SUFFIX):
                target = name[: -len(_ENV_SUFFIX)]
                if target in self.options:
                    raise ConfigError(
                        f"{self.origin}: both {target!r} and {name!r} are given; keep one"
                    )
                if not isinstance(value, str) or not value:
                    raise ConfigError(
                        f"{self.origin}: {name!r} must name an environment variable (a "
                        f"non-empty string), found {value!r}"
                    )
                if value not in os.environ:
                    raise ConfigError(
                        f"{self.origin}: {name!r} names the environment variable {value!r}, "
                        f"which is not set; export it (it holds the store's {target!r})"
                    )
                out[target] = os.environ[value]
            elif isinstance(value, str) and _PATH_OPTION.match(name):
                out[name] = str(_resolve_path(value, self.base_dir))
            else:
                out[name] = value
        return out

    def describe(self) -> str:
        """A one-line description for messages, without secrets (``file store at /x/.durable``)."""
        shown = []
        for name, value in self.options.items():
            if name.endswith(_ENV_SUFFIX):
                shown.append(f"{name[: -len(_ENV_SUFFIX)]} from ${value}")
            elif isinstance(value, str) and _PATH_OPTION.match(name):
                shown.append(str(_resolve_path(value, self.base_dir)))
            elif _SECRET_OPTION.search(name):
                shown.append(f"{name}={_redact(str(value))}")
            else:
                shown.append(f"{name}={value!r}")
        where = f" at {', '.join(shown)}" if shown else ""
        return f"{self.backend} store{where}"

    def open(self, pm: DurablePluginManager | None = None) -> Any:
        """Build the store through the backend's registered factory.

        Args:
            pm: the plugin manager to look the backend up in; ``None`` builds one.

        Returns:
            The store (call ``close()`` when done).

        Raises:
            PluginError: no installed plugin provides ``backend`` (the message lists the
                installed ones and the distribution to install), or its plugin failed to load.
            ConfigError: the backend's factory does not accept these options, or an ``*_env``
                variable is missing.
            DurableError / OSError: the backend could not open its storage.
        """
        if pm is None:
            from durable_core.plugins import make_plugin_manager

            pm = make_plugin_manager()
        try:
            factory = pm.store_factory(self.backend)
        except PluginError as exc:
            raise PluginError(f"{self.origin}: backend {self.backend!r}: {exc}") from exc
        options = self.resolved_options()
        try:
            inspect.signature(factory).bind(**options)
        except TypeError as exc:
            raise ConfigError(
                f"{self.origin}: the {self.backend!r} store does not accept these options "
                f"({', '.join(sorted(options)) or 'none'}): {exc}"
            ) from None
        except ValueError:  # no signature available (a builtin); let the call decide
            pass
        try:
            return factory(**options)
        except TypeError as exc:
            raise ConfigError(
                f"{self.origin}: the {self.backend!r} store rejected its options "
                f"({', '.join(sorted(options)) or 'none'}): {exc}"
            ) from exc
        except ConfigError as exc:
            raise ConfigError(f"{self.origin}: {exc}") from exc


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
        runtime: runtime options.
    """

    path: pathlib.Path
    graph: str
    run_id: str
    version: str
    inputs: Mapping[str, InputSource] = attrs.field(factory=dict)
    store: StoreConfig = attrs.field(factory=lambda: default_store_config())
    codecs: tuple[str, ...] = ()
    runtime: RuntimeConfig = RuntimeConfig()

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

    def load_graph(self) -> Any:
        """Import and return the graph named by ``graph`` (see :func:`load_graph`)."""
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
        keys = {key.name: key for key in _graph_inputs(graph)}
        where = f"{self.path}: [inputs]"
        unknown = sorted(set(self.inputs) - set(keys))
        if unknown:
            verb = "is not an input" if len(unknown) == 1 else "are not inputs"
            raise ConfigError(
                f"{where}: {_names(unknown)} {verb} of graph {_graph_name(graph)!r}; its inputs "
                f"are: {_names(sorted(keys)) or 'none'}"
            )
        missing = sorted(set(keys) - set(self.inputs))
        if missing:
            expected = ", ".join(f"{n} ({_type_name(keys[n].type)})" for n in missing)
            raise ConfigError(
                f"{where}: missing {'a value' if len(missing) == 1 else 'values'} for the "
                f"graph's input{'s' if len(missing) > 1 else ''} {expected}; add "
                f"{'it' if len(missing) == 1 else 'them'} to [inputs]"
            )
        return {
            keys[name]: _resolve_input(source, keys[name].type, self.base_dir, f"{where} {name}")
            for name, source in self.inputs.items()
        }

    def open_store(self, pm: DurablePluginManager | None = None) -> Any:
        """Open the configured store (see :meth:`StoreConfig.open`)."""
        return self.store.open(pm)

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
        import pluggy

        module_name = self.graph.partition(":")[0]
        module = sys.modules.get(module_name)
        if module is None:
            return False
        name = f"graph:{module_name}"
        if pm.get_plugin(name) is module:
            return True
        marker = f"{pm.project_name}_impl"
        if not any(hasattr(getattr(module, attr, None), marker) for attr in dir(module)):
            return False
        try:
            pm.register(module, name=name)
            pm.check_pending()
        except (pluggy.PluginValidationError, ValueError) as exc:
            raise PluginError(
                f"{self.path}: the graph's module {module_name!r} implements a Durable hook "
                f"wrongly: {exc}; see docs/plugins.md for the hooks and their arguments"
            ) from exc
        return True

    def make_codecs(self, pm: DurablePluginManager) -> Any:
        """The codec registry for the run: built-ins plus every loaded plugin's codecs.

        Raises:
            PluginError: a plugin named in ``codecs`` is missing (see
                :meth:`check_codec_plugins`).
        """
        from durable_core.codecs import Codecs

        self.check_codec_plugins(pm)
        return Codecs.from_plugins(pm)


# -- loading ----------------------------------------------------------------------------------


@attrs.frozen
class _ConfigFile:
    """The TOML document as written (the converter checks every key against this)."""

    graph: str
    run_id: str
    version: str
    inputs: dict[str, InputSource] = attrs.field(factory=dict)
    store: StoreConfig | None = None
    codecs: list[str] = attrs.field(factory=list)
    runtime: RuntimeConfig = RuntimeConfig()


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
        raise ConfigError(f"{file}: invalid TOML: {exc}") from None
    try:
        parsed = _CONFIG_CONVERTER.structure(document, _ConfigFile)
    except Exception as exc:
        raise ConfigError(f"{file}: {_explain(exc)}") from None
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
        codecs=tuple(parsed.codecs),
        runtime=parsed.runtime,
    )


def default_store_directory() -> pathlib.Path:
    """The default file store's directory: ``$DURABLE_HOME/runs``, else
    ``platformdirs.user_data_dir("durable")/runs``."""
    home = os.environ.get(HOME_ENV)
    if home:
        return pathlib.Path(home).expanduser().absolute() / "runs"
    return pathlib.Path(platformdirs.user_data_dir("durable")) / "runs"


def default_store_config() -> StoreConfig:
    """The store used when a configuration has no ``[store]`` table: the file store in
    :func:`default_store_directory`."""
    return StoreConfig(
        backend="file",
        options={"directory": str(default_store_directory())},
        origin=f"the default store (file store; set ${HOME_ENV} to move it)",
    )


def parse_store_url(url: str, base_dir: pathlib.Path | None = None) -> StoreConfig:
    """Turn a store URL (``--store``) into a :class:`StoreConfig`.

    Accepted forms:

    - ``file:///abs/dir`` or ``file:rel/dir`` — the file store in that directory; a URL
      without a scheme (``./runs``) is read as a file store directory too;
    - ``sqlite:///abs/runs.sqlite`` or ``sqlite:rel/runs.sqlite`` — the SQLite store;
    - ``postgres://…`` / ``postgresql://…`` — the PostgreSQL store, the URL is the DSN;
    - ``memory:`` — a memory store (empty; useful only inside one process);
    - ``default`` — the default file store (:func:`default_store_directory`).

    Args:
        url: the URL.
        base_dir: the folder relative paths resolve against (default: the current directory).

    Raises:
        ConfigError: the URL's scheme is not one of the above, or a path is missing.
    """
    base = base_dir or pathlib.Path.cwd()
    origin = f"--store {_redact(url)}"
    if url == "default":
        return default_store_config()
    scheme, sep, rest = url.partition(":")
    if not sep or len(scheme) == 1 or "/" in scheme or "\\" in scheme:
        # no scheme (or a Windows drive letter): a file store directory
        if not url:
            raise ConfigError("--store: empty URL; give file:///dir, sqlite:///db, postgres://…")
        return StoreConfig("file", {"directory": url}, base_dir=base, origin=origin)
    scheme = scheme.lower()
    if scheme in ("postgres", "postgresql"):
        return StoreConfig("postgres", {"dsn": url}, base_dir=base, origin=origin)
    if scheme == "memory":
        if rest.strip("/"):
            raise ConfigError(f"{origin}: a memory store takes no location; write 'memory:'")
        return StoreConfig("memory", {}, base_dir=base, origin=origin)
    if scheme in ("file", "sqlite"):
        path = _url_path(url, rest, origin)
        option = "directory" if scheme == "file" else "path"
        return StoreConfig(scheme, {option: path}, base_dir=base, origin=origin)
    raise ConfigError(
        f"{origin}: unknown store URL scheme {scheme!r}; use file:///dir, sqlite:///path.sqlite, "
        f"postgres://user@host/db, memory: or default (see docs/cli.md, 'Store URLs')"
    )


def _url_path(url: str, rest: str, origin: str) -> str:
    if rest.startswith("//"):
        parts = urllib.parse.urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(
                f"{origin}: a remote host ({parts.netloc!r}) is not supported; write "
                f"{parts.scheme}:///absolute/path or {parts.scheme}:relative/path"
            )
        path = urllib.parse.unquote(parts.path)
    else:
        path = urllib.parse.unquote(rest)
    if not path:
        raise ConfigError(f"{origin}: the URL has no path")
    return path


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
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(
            f"{origin}: expected 'package.module:attribute' (for example 'audit:graph'), "
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
        f"{origin}: {reference!r} is a {type(target).__name__}; expected a Graph or a function "
        f"taking no arguments that returns one"
    )


# -- inputs -----------------------------------------------------------------------------------


def _graph_inputs(graph: Any) -> list[Any]:
    return list(graph.inputs)


def _graph_name(graph: Any) -> str:
    return str(getattr(graph, "name", "?"))


def _resolve_input(source: InputSource, key_type: Any, base_dir: pathlib.Path, where: str) -> Any:
    if isinstance(source, PathInput):
        resolved = _resolve_path(source.path, base_dir)
        if key_type is pathlib.Path or key_type is pathlib.PurePath:
            return resolved
        value: Any = str(resolved)
    elif isinstance(source, FileInput):
        file = _resolve_path(source.file, base_dir)
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"{where}: cannot read the input file {file}: {exc.strerror or exc}"
            ) from exc
        if source.as_ == "bytes":
            value = data
        else:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"{where}: the input file {file} is not UTF-8 text ({exc}); read it with "
                    f'as = "bytes"'
                ) from None
            if source.as_ == "json":
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise ConfigError(
                        f"{where}: the input file {file} is not valid JSON: {exc}"
                    ) from None
            else:
                value = text
    else:
        value = source.value
    try:
        return _value_converter(base_dir).structure(value, key_type)
    except Exception as exc:
        detail = "" if isinstance(exc, _Invalid) else f" ({_explain(exc, top='value')})"
        hint = f"; {exc.hint}" if isinstance(exc, _Invalid) and exc.hint else ""
        raise ConfigError(
            f"{where}: the graph's input key has type {_type_name(key_type)}, found "
            f"{_describe_value(value)}{detail}{hint}"
        ) from None


class _Invalid(TypeError):
    """A value of the wrong type; the message is shown as is, ``hint`` says what to do."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def _strict(expected: type, label: str) -> Callable[[Any, Any], Any]:
    def hook(value: Any, _type: Any) -> Any:
        if isinstance(value, expected) and not (expected is not bool and isinstance(value, bool)):
            return value
        raise _Invalid(f"expected {label}, found {_describe_value(value)}")

    return hook


def _float_hook(value: Any, _type: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _Invalid(f"expected a number, found {_describe_value(value)}")


def _bytes_hook(value: Any, _type: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    raise _Invalid(
        f"expected bytes, found {_describe_value(value)}",
        hint='read bytes from a file with { file = "…", as = "bytes" }',
    )


def _passthrough(value: Any, _type: Any) -> Any:
    return value


def _value_converter(base_dir: pathlib.Path) -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, _strict(str, "a string"))
    conv.register_structure_hook(int, _strict(int, "an integer"))
    conv.register_structure_hook(bool, _strict(bool, "a boolean"))
    conv.register_structure_hook(float, _float_hook)
    conv.register_structure_hook(bytes, _bytes_hook)
    conv.register_structure_hook(datetime.datetime, _strict(datetime.datetime, "a date-time"))
    conv.register_structure_hook(datetime.date, _strict(datetime.date, "a date"))
    conv.register_structure_hook(datetime.time, _strict(datetime.time, "a time"))
    conv.register_structure_hook_func(lambda t: t is Any or t is object, _passthrough)

    def path_hook(value: Any, _type: Any) -> pathlib.Path:
        if isinstance(value, pathlib.PurePath):
            return pathlib.Path(value)
        if isinstance(value, str):
            return _resolve_path(value, base_dir)
        raise _Invalid(f"expected a path (a string), found {_describe_value(value)}")

    conv.register_structure_hook(pathlib.Path, path_hook)
    return conv


# -- the TOML converter -----------------------------------------------------------------------


def _structure_input(value: Any, _type: Any) -> InputSource:
    if isinstance(value, dict):
        if "file" in value:
            return _CONFIG_CONVERTER.structure(value, FileInput)
        if "path" in value:
            return _CONFIG_CONVERTER.structure(value, PathInput)
        if "value" in value:
            if set(value) != {"value"}:
                extra = sorted(set(value) - {"value"})
                raise _Invalid(
                    f"{{ value = … }} takes no other key, found {', '.join(map(repr, extra))}"
                )
            return LiteralInput(value["value"])
    return LiteralInput(value)


def _structure_store(value: Any, _type: Any) -> StoreConfig:
    if not isinstance(value, dict):
        raise _Invalid(f"expected a table, found {_describe_value(value)}")
    if "backend" not in value:
        raise _Invalid("missing required key 'backend' (for example backend = \"sqlite\")")
    backend = value["backend"]
    if not isinstance(backend, str):
        raise _Invalid(f"backend: expected a string, found {_describe_value(backend)}")
    options = {k: v for k, v in value.items() if k != "backend"}
    return StoreConfig(backend=backend, options=options)


def _structure_file_format(value: Any, _type: Any) -> str:
    if value in _FILE_FORMATS:
        return value
    raise _Invalid(
        f"expected one of {', '.join(map(repr, _FILE_FORMATS))}, found {_describe_value(value)}"
    )


def _make_config_converter() -> cattrs.Converter:
    from cattrs.gen import make_dict_structure_fn, override

    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, _strict(str, "a string"))
    conv.register_structure_hook(int, _strict(int, "an integer"))
    conv.register_structure_hook(bool, _strict(bool, "a boolean"))
    conv.register_structure_hook(InputSource, _structure_input)
    conv.register_structure_hook(StoreConfig, _structure_store)
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


_CONFIG_CONVERTER = _make_config_converter()


# -- messages ---------------------------------------------------------------------------------


def _format_exception(exc: BaseException, _type: Any) -> str:
    if isinstance(exc, _Invalid):
        return f"!{exc}"
    if isinstance(exc, KeyError):
        return "!missing"
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return "!unknown:" + ",".join(sorted(exc.extra_fields))
    if isinstance(exc, TypeError) and "not iterable" in str(exc):
        return "!expected a list"
    if isinstance(exc, AttributeError) and "items" in str(exc):
        return "!expected a table"
    return f"!{type(exc).__name__}: {exc}"


_PATH_TOKEN = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]")

_TABLE_KEYS = {
    "": [a.name for a in attrs.fields(_ConfigFile)],
    "runtime": [a.name for a in attrs.fields(RuntimeConfig)],
}


def _explain(exc: BaseException, top: str = "") -> str:
    """Turn a cattrs error into "table key: problem" phrases joined by "; ".

    ``top`` names the value being checked (an input's value) instead of the TOML document.
    """
    if isinstance(exc, (_Invalid, KeyError)):
        return _format_exception(exc, None).removeprefix("!")
    if not isinstance(exc, cattrs.BaseValidationError):
        return f"{type(exc).__name__}: {exc}"
    phrases = []
    for line in cattrs.transform_error(exc, path="$", format_exception=_format_exception):
        message, _, path = line.rpartition(" @ ")
        parts = [
            _ATTRIBUTE_KEYS.get(m.group(1), m.group(1)) or m.group(2) or m.group(3)
            for m in _PATH_TOKEN.finditer(path.lstrip("$"))
        ]
        message = message.removeprefix("!")
        if message.startswith("unknown:"):
            names = message.removeprefix("unknown:").split(",")
            allowed = None if top else _TABLE_KEYS.get(".".join(parts))
            hint = f" (allowed keys: {', '.join(allowed)})" if allowed else ""
            plural = "s" if len(names) > 1 else ""
            phrases.append(
                f"{_where(parts, top)}unknown key{plural} {', '.join(map(repr, names))}{hint}"
            )
        elif message == "missing" and parts:
            phrases.append(f"{_where(parts[:-1], top)}missing required key {parts[-1]!r}")
        elif message.startswith("missing required key"):  # raised by a table's own hook
            phrases.append(f"{_where(parts, top)}{message}")
        else:
            phrases.append(f"{_where(parts, top, has_key=True)}{message}")
    return "; ".join(phrases)


_ATTRIBUTE_KEYS = {"as_": "as"}
"""Attribute names spelled differently in TOML."""


def _where(parts: list[str], top: str, *, has_key: bool = False) -> str:
    """Render a path as ``[table] key: `` (document) or ``value[2].name: `` (a value)."""
    if top:
        path = top + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in parts)
        return "" if path == top else f"{path}: "
    if not has_key or not parts:
        return f"[{'.'.join(parts)}]: " if parts else "top level: "
    # the key is the last name plus any list indexes after it: codecs[1]
    cut = len(parts)
    while cut > 0 and parts[cut - 1].isdigit():
        cut -= 1
    cut = max(cut - 1, 0)
    tables, key_parts = parts[:cut], parts[cut:]
    key = key_parts[0] + "".join(f"[{p}]" for p in key_parts[1:])
    if tables:
        return f"[{'.'.join(tables)}] {key}: "
    return f"top level, key {key!r}: "


def _names(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _type_name(tp: Any) -> str:
    """A short readable spelling of a type: ``list[Record]``, ``int | None``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join("None" if a is type(None) else _type_name(a) for a in args)
    if origin is not None and args:
        inner = ", ".join("..." if a is Ellipsis else _type_name(a) for a in args)
        return f"{getattr(origin, '__name__', repr(origin))}[{inner}]"
    if isinstance(tp, type):
        return tp.__name__
    return repr(tp).replace("typing.", "")


def _describe_value(value: Any) -> str:
    kinds = {
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a float",
        list: "a list",
        dict: "a table",
        bytes: "bytes",
    }
    kind = kinds.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} ({text})" if not isinstance(value, (list, dict)) else kind


def _resolve_path(value: str, base_dir: pathlib.Path) -> pathlib.Path:
    path = pathlib.Path(value).expanduser()
    return path if path.is_absolute() else (base_dir / path).absolute()


def _redact(text: str) -> str:
    """Hide the password of a URL-shaped DSN (``postgres://u:secret@h/db`` -> ``u:***@h``)."""
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError:
        return "***"
    if parts.scheme and parts.password is not None:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    if "password" in text.lower():
        return re.sub(r"(?i)(password\s*=\s*)(\S+)", r"\1***", text)
    return text
