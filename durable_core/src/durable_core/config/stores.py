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
import typing
import urllib.parse
from collections.abc import Mapping
from typing import Any

import attrs
import platformdirs

from durable_core.config._text import redact, resolve_path
from durable_core.errors import ConfigError, DurableError, PluginError

if typing.TYPE_CHECKING:
    from durable_core.plugins import DurablePluginManager

__all__ = [
    "HOME_ENV",
    "StoreConfig",
    "default_store_config",
    "default_store_directory",
    "parse_store_url",
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
            pm: the plugin manager to look the backend up in; ``None`` builds one.

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
    origin = f"--store {redact(url)}"
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
