"""The store, executor and launcher registries: factories by name, filled through the
``durable_register_stores``, ``durable_register_executors`` and ``durable_register_launchers``
hooks, and the names Durable's own distributions provide."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from durable_core.errors import PluginError

__all__ = [
    "ENTRY_POINT_GROUP",
    "KNOWN_EXECUTORS",
    "KNOWN_LAUNCHERS",
    "KNOWN_STORES",
    "KNOWN_STORE_SCHEMES",
    "ExecutorRegistry",
    "LauncherRegistry",
    "StoreRegistry",
    "UrlParser",
]

ENTRY_POINT_GROUP = "durable"

KNOWN_STORES: dict[str, str] = {
    "memory": "durable-core",
    "file": "durable-filestore",
    "sqlite": "durable-sqlitestore",
    "postgres": "durable-postgresstore",
}
"""Store names Durable's own distributions provide, and which distribution to install for each."""

KNOWN_STORE_SCHEMES: dict[str, str] = {
    "memory": "durable-core",
    "file": "durable-filestore",
    "sqlite": "durable-sqlitestore",
    "postgres": "durable-postgresstore",
    "postgresql": "durable-postgresstore",
}
"""``--store`` URL schemes Durable's own distributions claim, and which distribution to install."""

# RFC 3986 scheme syntax, at least two characters (one letter is a Windows drive: C:\runs).
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]+")

UrlParser = Callable[[str], Mapping[str, Any]]

KNOWN_EXECUTORS: dict[str, str] = {
    "thread": "durable-core",
    "process": "durable-core",
    "dask": "durable-executor-dask",
}
"""Executor names Durable's own distributions provide, and which distribution to install."""

KNOWN_LAUNCHERS: dict[str, str] = {
    "local": "durable-core",
    "dask": "durable-executor-dask",
}
"""Launcher names Durable's own distributions provide, and which distribution to install."""


class _NameRegistry:
    """Factories by name, filled through one ``durable_register_*`` hook.

    Call an instance as ``register(name, factory)``.
    """

    kind = "?"
    example = "?"
    known: dict[str, str] = {}  # noqa: RUF012 - read-only, set per subclass

    def __init__(self) -> None:
        self._factories: dict[str, Callable[..., Any]] = {}
        self._providers: dict[str, str] = {}
        self._current_plugin = "?"

    def __call__(self, name: str, factory: Callable[..., Any]) -> None:
        kind = self.kind
        if not isinstance(name, str) or not name:
            raise PluginError(
                f"plugin {self._current_plugin!r} registered a {kind} with an empty or "
                f"non-string name {name!r}; a {kind} name is a non-empty string such as "
                f"{self.example!r}"
            )
        if not callable(factory):
            raise PluginError(
                f"plugin {self._current_plugin!r} registered {kind} {name!r} with a factory "
                f"that is not callable ({type(factory).__name__})"
            )
        if name in self._factories:
            raise PluginError(
                f"{kind} name {name!r} is registered twice: by plugin "
                f"{self._providers[name]!r} and by plugin {self._current_plugin!r}; uninstall "
                f"one of them or block it with DURABLE_BLOCK_PLUGINS"
            )
        self._factories[name] = factory
        self._providers[name] = self._current_plugin

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._factories)

    def provider(self, name: str) -> str:
        """The plugin name that registered ``name``."""
        return self._providers[name]

    def factory(self, name: str) -> Callable[..., Any]:
        """Return the factory registered for ``name``.

        Raises:
            PluginError: ``name`` is unknown; the message lists the installed names and, for a
                name Durable knows, the distribution that provides it.
        """
        try:
            return self._factories[name]
        except KeyError:
            pass
        installed = ", ".join(self.names()) or "none"
        hint = ""
        if name in self.known:
            hint = f"; it is provided by the distribution {self.known[name]!r}: install it"
        known = ", ".join(f"{n} ({d})" for n, d in sorted(self.known.items()))
        raise PluginError(
            f"unknown {self.kind} backend {name!r}{hint}. Installed {self.kind} backends: "
            f"{installed}. Durable's own backends: {known}"
        )


class StoreRegistry(_NameRegistry):
    """Store factories by name, and the ``--store`` URL schemes each claims, filled through
    the ``durable_register_stores`` hook.

    Call an instance as ``register(name, factory, url_schemes=(), from_url=None)``:

    - ``name``: the backend name a config's ``[store] backend`` gives;
    - ``factory(**options)``: builds the store from a ``[store]`` table's other keys;
    - ``url_schemes``: lowercase URL schemes (``"mystore"`` for ``mystore://…``; RFC 3986
      syntax, two characters or more) that name this store in ``--store URL``;
    - ``from_url(url) -> dict``: the factory's options for a URL of those schemes (the whole
      URL is given, as typed). Raise :class:`~durable_core.errors.ConfigError` (or
      ``ValueError``) for a URL it cannot read. Without it, the options are ``{"url": url}``.
      Options are treated as a ``[store]`` table's: ``directory``/``path``/``*_path`` … resolve
      against the current directory, ``x_env`` reads an environment variable.

    Raises (when registering):
        PluginError: the name or a scheme is already registered (both plugins are named), a
            scheme is malformed, or ``from_url`` is given without schemes or is not callable.
    """

    kind = "store"
    example = "sqlite"
    known = KNOWN_STORES

    def __init__(self) -> None:
        super().__init__()
        self._schemes: dict[str, tuple[str, UrlParser | None]] = {}

    def __call__(
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        url_schemes: Iterable[str] = (),
        from_url: UrlParser | None = None,
    ) -> None:
        plugin = self._current_plugin
        schemes = [url_schemes] if isinstance(url_schemes, str) else list(url_schemes)
        for scheme in schemes:
            if not isinstance(scheme, str) or not _SCHEME.fullmatch(scheme):
                raise PluginError(
                    f"plugin {plugin!r} registered store {name!r} with the URL scheme "
                    f"{scheme!r}; a scheme is lowercase letters, digits, '+', '-' or '.', "
                    "starts with a letter and has two characters or more (e.g. 'mystore')"
                )
            if scheme in self._schemes:
                owner = self._schemes[scheme][0]
                raise PluginError(
                    f"the store URL scheme {scheme!r} is claimed twice: by store {owner!r} "
                    f"(plugin {self._providers[owner]!r}) and by store {name!r} (plugin "
                    f"{plugin!r}); uninstall one of them or block it with DURABLE_BLOCK_PLUGINS"
                )
        if from_url is not None and (not schemes or not callable(from_url)):
            raise PluginError(
                f"plugin {plugin!r} registered store {name!r} with from_url but "
                + ("no url_schemes" if not schemes else "from_url is not callable")
                + "; give url_schemes=[...] and a callable from_url(url) -> options"
            )
        super().__call__(name, factory)
        for scheme in schemes:
            self._schemes[scheme] = (name, from_url)

    def schemes(self) -> list[str]:
        """The registered URL schemes, sorted."""
        return sorted(self._schemes)

    def schemes_of(self, name: str) -> list[str]:
        """The URL schemes store ``name`` claims, sorted."""
        return sorted(s for s, (store, _) in self._schemes.items() if store == name)

    def for_scheme(self, scheme: str) -> tuple[str, UrlParser | None] | None:
        """``(store name, from_url)`` of the store that claims ``scheme``, or ``None``."""
        return self._schemes.get(scheme.lower())


class ExecutorRegistry(_NameRegistry):
    """Executor factories by name, filled through the ``durable_register_executors`` hook.

    Call an instance as ``register(name, factory)``; ``factory(**options)`` returns an
    :class:`~durable_core.executors.Executor`.
    """

    kind = "executor"
    example = "process"
    known = KNOWN_EXECUTORS


class LauncherRegistry(_NameRegistry):
    """Launcher factories by name, filled through the ``durable_register_launchers`` hook.

    Call an instance as ``register(name, factory)``; ``factory(address)`` returns a
    :class:`~durable_core.launchers.Launcher`.
    """

    kind = "launcher"
    example = "local"
    known = KNOWN_LAUNCHERS
