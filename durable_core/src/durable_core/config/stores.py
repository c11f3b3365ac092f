"""Store options: which backend a configuration or a ``--store`` URL opens, with which options.

A ``[store]`` table names a ``backend`` and passes its other keys to the backend's factory.
An option named ``<name>_env`` is read from that environment variable; path-like options resolve
against the configuration's folder. Without a ``[store]`` table, runs are saved by the file store
in ``$DURABLE_HOME/runs`` when ``DURABLE_HOME`` is set, else in
``platformdirs.user_data_dir("durable")/runs``.
"""

from __future__ import annotations

import inspect
import os
import pathlib
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

import attrs
import platformdirs

from durable_core.config._text import redact, resolve_path
from durable_core.errors import ConfigError, DurableError, PluginError
from durable_core.plugins.builtins import memory_url_options
from durable_core.plugins.manager import DurablePluginManager, default_plugins
from durable_core.plugins.registries import KNOWN_STORE_SCHEMES

__all__ = [
    "HOME_ENV",
    "StoreConfig",
    "default_store_config",
    "default_store_directory",
    "memory_url_options",
    "parse_store_url",
    "url_path",
]

HOME_ENV = "DURABLE_HOME"
"""Environment variable overriding the folder of the default file store (``$DURABLE_HOME/runs``)."""

_PATH_OPTION = re.compile(r"^(directory|path|file|.+_(dir|directory|path|file))$")
"""Store options whose string value is a filesystem path, resolved against the config's folder."""

_ENV_SUFFIX = "_env"

_SECRET_OPTION = re.compile(r"(dsn|password|passwd|secret|token|url|uri|conninfo)", re.IGNORECASE)


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
                out[name] = str(resolve_path(value, self.base_dir))
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
                shown.append(str(resolve_path(value, self.base_dir)))
            elif _SECRET_OPTION.search(name):
                shown.append(f"{name}={redact(str(value))}")
            else:
                shown.append(f"{name}={value!r}")
        where = f" at {', '.join(shown)}" if shown else ""
        return f"{self.backend} store{where}"

    def open(self, pm: DurablePluginManager | None = None) -> Any:
        """Build the store through the backend's registered factory.

        Args:
            pm: the plugin manager to look the backend up in; ``None``: the process-wide one
                (:func:`~durable_core.plugins.default_plugins`).

        Returns:
            The store (call ``close()`` when done).

        Raises:
            PluginError: no installed plugin provides ``backend`` (the message lists the
                installed ones and the distribution to install), or its plugin failed to load.
            ConfigError: the backend's factory does not accept these options or rejects a
                value (``ValueError``: a timeout that is a string), or an ``*_env`` variable
                is missing; the message names the file, the table and the key.
            DurableError / OSError: the backend could not open its storage.
        """
        if pm is None:
            pm = default_plugins()
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
        except ValueError as exc:
            if isinstance(exc, DurableError):  # a corrupt database is not a bad option
                raise
            # A factory checks its option values (a timeout that is a string); name the key.
            raise ConfigError(f"{self._where_option(str(exc))}{exc}") from exc

    def _where_option(self, message: str) -> str:
        """``<origin> <key>: `` for the one option a factory's message names, else
        ``<origin>: the <backend> store rejected its options (…): ``."""
        named = [name for name in self.options if re.search(rf"\b{re.escape(name)}\b", message)]
        if len(named) == 1:
            value = self.options[named[0]]
            return f"{self.origin} {named[0]}: the {self.backend!r} store rejected {value!r}: "
        options = ", ".join(sorted(self.options)) or "none"
        return f"{self.origin}: the {self.backend!r} store rejected its options ({options}): "


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


def parse_store_url(
    url: str, base_dir: pathlib.Path | None = None, pm: DurablePluginManager | None = None
) -> StoreConfig:
    """Turn a store URL (``--store``) into a :class:`StoreConfig`.

    The URL's scheme names the store: every store plugin may claim schemes when it registers
    (``register(name, factory, url_schemes=[...], from_url=...)``, see
    :class:`~durable_core.plugins.StoreRegistry`), and Durable's own stores claim theirs the
    same way:

    - ``file:///abs/dir`` or ``file:rel/dir`` — the file store in that directory;
    - ``sqlite:///abs/runs.sqlite`` or ``sqlite:rel/runs.sqlite`` — the SQLite store;
    - ``postgres://…`` / ``postgresql://…`` — the PostgreSQL store, the URL is the DSN;
    - ``memory:`` — a memory store (empty; useful only inside one process).

    Two forms have no scheme: ``default`` (the default file store,
    :func:`default_store_directory`) and a plain path (``./runs``, ``/abs/dir``, ``C:\\runs``),
    read as a file store directory.

    Args:
        url: the URL.
        base_dir: the folder relative paths resolve against (default: the current directory).
        pm: the plugin manager whose stores claim the schemes; ``None``: the process-wide one
                (:func:`~durable_core.plugins.default_plugins`).

    Raises:
        ConfigError: no installed store claims the URL's scheme (the message lists the known
            schemes and which distribution or plugin to install), or the store cannot read the
            URL (a path is missing, a remote host is given …).
        PluginError: two plugins claim the same scheme or store name.
    """
    base = base_dir or pathlib.Path.cwd()
    origin = f"--store {redact(url)}"
    if url == "default":
        return default_store_config()
    scheme, sep, _rest = url.partition(":")
    if not sep or len(scheme) == 1 or "/" in scheme or "\\" in scheme:
        # no scheme (or a Windows drive letter): a file store directory
        if not url:
            raise ConfigError("--store: empty URL; give file:///dir, sqlite:///db, postgres://…")
        return StoreConfig("file", {"directory": url}, base_dir=base, origin=origin)
    scheme = scheme.lower()
    if pm is None:
        pm = default_plugins()
    registry = pm.stores()
    found = registry.for_scheme(scheme)
    if found is None:
        raise ConfigError(f"{origin}: {_unknown_scheme(scheme, registry.schemes(), pm)}")
    backend, from_url = found
    try:
        options = {"url": url} if from_url is None else from_url(url)
    except ConfigError as exc:
        raise ConfigError(f"{origin}: {exc}") from exc
    except ValueError as exc:
        if isinstance(exc, DurableError):
            raise
        raise ConfigError(f"{origin}: the {backend!r} store cannot read this URL: {exc}") from exc
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise PluginError(
            f"{origin}: the {backend!r} store's from_url returned {type(options).__name__}, "
            f"not a mapping of option names to values (plugin {registry.provider(backend)!r})"
        )
    return StoreConfig(backend, dict(options), base_dir=base, origin=origin)


def _unknown_scheme(scheme: str, schemes: list[str], pm: DurablePluginManager) -> str:
    """What to say about a URL scheme no installed store claims."""
    known = ", ".join(f"{s}:" for s in schemes) or "none"
    text = f"unknown store URL scheme {scheme!r}: no installed store claims it (known: {known}"
    text += (
        "; without a scheme, a path is a file store directory, and 'default' the default store)."
    )
    if scheme in KNOWN_STORE_SCHEMES:
        return f"{text} It comes with the distribution {KNOWN_STORE_SCHEMES[scheme]!r}: install it"
    text += (
        f" Install the store plugin that provides {scheme}: URLs (a distribution with an entry "
        "point in the group 'durable'; 'durable plugins' lists what is installed)"
    )
    if pm.load_errors:
        text += f"; these plugins failed to load: {', '.join(sorted(pm.load_errors))}"
    return text + ". See docs/cli.md, 'Store URLs'"


def url_path(url: str) -> str:
    """The local path of a ``scheme:///abs/path`` or ``scheme:rel/path`` URL, percent-escapes
    decoded (for stores on a local file system; their ``from_url``).

    Raises:
        ConfigError: the URL names a remote host, or has no path.
    """
    scheme, _, rest = url.partition(":")
    if rest.startswith("//"):
        parts = urllib.parse.urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(
                f"a remote host ({parts.netloc!r}) is not supported; write "
                f"{scheme}:///absolute/path or {scheme}:relative/path"
            )
        path = urllib.parse.unquote(parts.path)
    else:
        path = urllib.parse.unquote(rest)
    if not path:
        raise ConfigError("the URL has no path")
    return path
