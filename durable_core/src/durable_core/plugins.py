"""The plugin manager factory, the store, executor and launcher registries (pluggy; entry points
``durable``).

Nothing is loaded at import time: call :func:`make_plugin_manager` to get a manager with the
core's built-ins and every installed plugin registered.

Environment:
    ``DURABLE_DISABLE_PLUGIN_AUTOLOAD``: when set to a non-empty value other than ``0``, no entry
        point is loaded (the core's built-ins still are).
    ``DURABLE_BLOCK_PLUGINS``: comma-separated plugin (entry-point) names never to load.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import pluggy

from durable_core import hookspecs
from durable_core.errors import PluginError

__all__ = [
    "ENTRY_POINT_GROUP",
    "KNOWN_EXECUTORS",
    "KNOWN_LAUNCHERS",
    "KNOWN_STORES",
    "KNOWN_STORE_SCHEMES",
    "DurablePluginManager",
    "ExecutorRegistry",
    "LauncherRegistry",
    "PluginInfo",
    "StoreRegistry",
    "each_implementation",
    "make_plugin_manager",
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

_CORE_PLUGIN = "memory"


@attrs.frozen
class _Source:
    distribution: str
    version: str


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


@attrs.frozen
class PluginInfo:
    """What ``durable plugins`` shows about one plugin."""

    name: str
    distribution: str
    version: str
    stores: tuple[str, ...] = ()
    url_schemes: tuple[str, ...] = ()
    executors: tuple[str, ...] = ()
    launchers: tuple[str, ...] = ()
    codecs: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    error: str | None = None


class DurablePluginManager(pluggy.PluginManager):
    """A pluggy manager that remembers where each plugin came from and what failed to load."""

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT_NAME)
        self.add_hookspecs(hookspecs)
        self.load_errors: dict[str, PluginError] = {}
        self._sources: dict[str, _Source] = {}
        self._stores: StoreRegistry | None = None
        self._executors: ExecutorRegistry | None = None
        self._launchers: LauncherRegistry | None = None

    def source(self, plugin_name: str) -> tuple[str, str]:
        """(distribution, version) that provided ``plugin_name``."""
        src = self._sources.get(plugin_name)
        return (src.distribution, src.version) if src else ("?", "?")

    def stores(self) -> StoreRegistry:
        """The store registry, filled through ``durable_register_stores`` on first use.

        Raises:
            PluginError: two plugins registered the same store name.
        """
        if self._stores is None:
            self._stores = self._filled(StoreRegistry(), "durable_register_stores")
        return self._stores

    def store_factory(self, name: str) -> Callable[..., Any]:
        """The factory of store backend ``name`` (see :meth:`StoreRegistry.factory`).

        When the plugin expected to provide ``name`` failed to load, its load error is raised.
        """
        return self._factory(self.stores(), name)

    def executors(self) -> ExecutorRegistry:
        """The executor registry, filled through ``durable_register_executors`` on first use.

        Raises:
            PluginError: two plugins registered the same executor name.
        """
        if self._executors is None:
            self._executors = self._filled(ExecutorRegistry(), "durable_register_executors")
        return self._executors

    def executor_factory(self, name: str) -> Callable[..., Any]:
        """The factory of executor ``name`` (see :meth:`ExecutorRegistry.factory`).

        When the plugin expected to provide ``name`` failed to load, its load error is raised.
        """
        return self._factory(self.executors(), name)

    def launchers(self) -> LauncherRegistry:
        """The launcher registry, filled through ``durable_register_launchers`` on first use.

        Raises:
            PluginError: two plugins registered the same launcher name.
        """
        if self._launchers is None:
            self._launchers = self._filled(LauncherRegistry(), "durable_register_launchers")
        return self._launchers

    def launcher_factory(self, name: str) -> Callable[..., Any]:
        """The factory of launcher ``name`` (see :meth:`LauncherRegistry.factory`).

        When the plugin expected to provide ``name`` failed to load, its load error is raised.
        """
        return self._factory(self.launchers(), name)

    def _filled(self, registry: Any, hook_name: str) -> Any:
        """``registry`` after every implementation of ``hook_name`` registered into it (first
        registered plugin first), each under its own plugin name."""
        for plugin_name, call in each_implementation(self, hook_name, reverse=True):
            registry._current_plugin = plugin_name
            call(register=registry)
        return registry

    def _factory(self, registry: Any, name: str) -> Callable[..., Any]:
        """``registry.factory(name)``; when ``name`` is missing because the plugin named so
        failed to load, that load error instead, and a :class:`PluginError` saying so when
        that plugin is blocked (``DURABLE_BLOCK_PLUGINS``)."""
        if name not in registry.names():
            error = self.load_errors.get(name)
            if error is not None:
                raise error
            if self.is_blocked(name):  # installed, but not loaded: "install it" would mislead
                raise PluginError(
                    f"{registry.kind} backend {name!r} is provided by the plugin {name!r}, "
                    "which is blocked by the environment variable DURABLE_BLOCK_PLUGINS: "
                    "remove it from that list to use this backend"
                )
        return registry.factory(name)

    def describe(self) -> list[PluginInfo]:
        """One :class:`PluginInfo` per registered plugin and per plugin that failed to load."""
        from durable_core.codecs import Codecs

        infos: dict[str, PluginInfo] = {}
        stores = self.stores()
        executors = self.executors()
        launchers = self.launchers()
        for plugin_name, plugin in self.list_name_plugin():
            if plugin is None:
                continue
            dist, version = self.source(plugin_name)
            codec_ids: list[str] = []
            commands: list[str] = []
            for name, call in each_implementation(self, "durable_register_codecs"):
                if name == plugin_name:
                    codecs = Codecs()
                    call(codecs=codecs)
                    codec_ids.extend(f"{c.id}@{c.version}" for c in codecs)
            for name, call in each_implementation(self, "durable_register_commands"):
                if name == plugin_name:
                    import click

                    group = click.Group("probe")
                    call(cli=group)
                    commands.extend(sorted(group.commands))
            own_stores = tuple(n for n in stores.names() if stores.provider(n) == plugin_name)
            infos[plugin_name] = PluginInfo(
                name=plugin_name,
                distribution=dist,
                version=version,
                stores=own_stores,
                url_schemes=tuple(s for n in own_stores for s in stores.schemes_of(n)),
                executors=tuple(
                    n for n in executors.names() if executors.provider(n) == plugin_name
                ),
                launchers=tuple(
                    n for n in launchers.names() if launchers.provider(n) == plugin_name
                ),
                codecs=tuple(codec_ids),
                commands=tuple(commands),
            )
        for plugin_name, error in self.load_errors.items():
            dist, version = self.source(plugin_name)
            infos[plugin_name] = PluginInfo(
                name=plugin_name, distribution=dist, version=version, error=str(error)
            )
        return [infos[k] for k in sorted(infos)]


def each_implementation(
    pm: pluggy.PluginManager, hook_name: str, *, reverse: bool = False
) -> list[tuple[str, Callable[..., Any]]]:
    """One caller per implementation of hook ``hook_name``, each called on its own.

    Each caller goes through pluggy with every other plain implementation left out, so that
    ``wrapper=True`` (and old-style ``hookwrapper=True``) implementations run around it, and
    an implementation that raises stops only its own call: the caller decides what its error
    means.

    Args:
        pm: the plugin manager.
        hook_name: the hook, e.g. ``"durable_recovery_event"``.
        reverse: registration order reversed (the order pluggy itself calls them) instead of
            registration order.

    Returns:
        ``(plugin name, call)`` pairs; ``call(**hook_arguments)`` returns that implementation's
        result (``None`` when it returned nothing).
    """
    impls = [
        impl
        for impl in getattr(pm.hook, hook_name).get_hookimpls()
        if not (impl.wrapper or impl.hookwrapper)
    ]
    if reverse:
        impls.reverse()
    calls = []
    for impl in impls:
        others = [other.plugin for other in impls if other is not impl]
        caller = pm.subset_hook_caller(hook_name, others)

        def call(caller: Any = caller, **kwargs: Any) -> Any:
            results = caller(**kwargs)
            return results[0] if results else None

        calls.append((impl.plugin_name, call))
    return calls


def _env_flag(name: str) -> bool:
    value = os.environ.get(name, "")
    return value not in ("", "0")


def make_plugin_manager(
    *,
    autoload: bool | None = None,
    block: Iterable[str] | None = None,
    plugins: Iterable[tuple[str, object]] = (),
) -> DurablePluginManager:
    """Build a plugin manager: the core's built-ins, then every installed plugin.

    Args:
        autoload: load entry points of the group ``durable``; ``None`` reads
            ``DURABLE_DISABLE_PLUGIN_AUTOLOAD``.
        block: plugin names never to load; ``None`` reads ``DURABLE_BLOCK_PLUGINS``.
        plugins: extra ``(name, plugin)`` pairs to register (tests, embedding hosts).

    A plugin that raises while loading does not stop the others: its error is kept in
    ``manager.load_errors`` as a :class:`PluginError` naming the distribution, shown by
    ``durable plugins`` and raised when its store is asked for.

    Returns:
        The manager; ``manager.check_pending()`` has passed.

    Raises:
        PluginError: a plugin implements a hook that does not exist (``check_pending``).
    """
    from durable_core import builtins

    if autoload is None:
        autoload = not _env_flag("DURABLE_DISABLE_PLUGIN_AUTOLOAD")
    if block is None:
        block = [b.strip() for b in os.environ.get("DURABLE_BLOCK_PLUGINS", "").split(",")]
    pm = DurablePluginManager()
    for name in block:
        if name:
            pm.set_blocked(name)
    core_version = _version_of("durable-core")
    if not pm.is_blocked(_CORE_PLUGIN):
        pm.register(builtins, name=_CORE_PLUGIN)
        pm._sources[_CORE_PLUGIN] = _Source("durable-core", core_version)
    for name, plugin in plugins:
        pm.register(plugin, name=name)
        pm._sources[name] = _Source("(registered in process)", "")
    if autoload:
        _load_entry_points(pm)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(
            f"plugin {exc.plugin!r} implements a hook Durable does not define: {exc}; "
            "update the plugin or Durable, or block the plugin with DURABLE_BLOCK_PLUGINS"
        ) from exc
    return pm


def _version_of(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _load_entry_points(pm: DurablePluginManager) -> None:
    seen: set[str] = set()
    for dist in importlib.metadata.distributions():
        dist_name = dist.metadata["Name"] or "?"
        for ep in dist.entry_points:
            if ep.group != ENTRY_POINT_GROUP or ep.name in seen:
                continue
            seen.add(ep.name)
            if pm.is_blocked(ep.name) or pm.has_plugin(ep.name):
                continue
            pm._sources[ep.name] = _Source(dist_name, dist.version)
            try:
                plugin = ep.load()
                pm.register(plugin, name=ep.name)
            except Exception as exc:  # a broken plugin must not stop the others
                pm.load_errors[ep.name] = PluginError(
                    f"plugin {ep.name!r} from distribution {dist_name!r} {dist.version} failed "
                    f"to load ({ep.value}): {type(exc).__name__}: {exc}. Reinstall or fix that "
                    f"distribution, or block it with DURABLE_BLOCK_PLUGINS={ep.name}"
                )
                pm.load_errors[ep.name].__cause__ = exc
