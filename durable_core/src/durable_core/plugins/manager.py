"""The plugin manager: pluggy's, with one typed method per hook (the facade every caller goes
through), built by :func:`make_plugin_manager` or shared by :func:`default_plugins`.

No caller outside this package names a hook as a string or reaches into pluggy: the run asks
:meth:`DurablePluginManager.codecs`, :meth:`~DurablePluginManager.executor`,
:meth:`~DurablePluginManager.emit_recovery_event`,
:meth:`~DurablePluginManager.saved_definition` …, the CLI
:meth:`~DurablePluginManager.add_commands`. A new hook gets its spec in
:mod:`durable_core.plugins.hookspecs` and its method here.

Nothing is loaded at import time: :func:`make_plugin_manager` loads the core's built-ins and
every installed plugin.

Environment:
    ``DURABLE_DISABLE_PLUGIN_AUTOLOAD``: when set to a non-empty value other than ``0``, no entry
        point is loaded (the core's built-ins still are).
    ``DURABLE_BLOCK_PLUGINS``: comma-separated plugin (entry-point) names never to load.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from durable_core.codecs import Codecs
from durable_core.errors import CodecError, ConfigError, ConflictError, PluginError
from durable_core.executors.base import Executor
from durable_core.plugins import builtins, hookspecs
from durable_core.plugins.registries import (
    ENTRY_POINT_GROUP,
    ExecutorRegistry,
    LauncherRegistry,
    StoreRegistry,
)

if TYPE_CHECKING:
    import click

    from durable_core.history import HistoryTarget

__all__ = [
    "DurablePluginManager",
    "PluginInfo",
    "default_plugins",
    "each_implementation",
    "make_plugin_manager",
]

log = logging.getLogger(__name__)

_CORE_PLUGIN = "memory"


@attrs.frozen
class _Source:
    distribution: str
    version: str


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
        self._event_impls: tuple[Any, ...] = ()
        self._event_calls: list[tuple[str, Callable[..., Any]]] = []

    # --- registries: stores and executors ------------------------------------------------------

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

    def executor(self, executor: Executor | str | None) -> tuple[Executor | None, bool]:
        """An executor instance for what a caller passes as ``executor=``, and whether the
        caller owns it (must close it).

        Args:
            executor: an :class:`~durable_core.executors.Executor` (returned as is, not
                owned), a registered name (built with default options through the
                ``durable_register_executors`` hook, owned), or None (None: the run's worker
                threads).

        Raises:
            PluginError: no installed plugin registers the name (the message lists those
                that do).
            ConfigError: ``executor`` is of another type.
        """
        if executor is None or isinstance(executor, Executor):
            return executor, False
        if isinstance(executor, str):
            return self.executor_factory(executor)(), True
        raise ConfigError(
            f"executor must be an Executor instance, a registered executor name such as "
            f"'process', or None, got {executor!r}"
        )

    # --- codecs ------------------------------------------------------------------------------

    def codecs(self) -> Codecs:
        """A new codec registry filled through the ``durable_register_codecs`` hook of every
        plugin (C-2).

        The core's built-in plugin (``memory``) registers the built-in JSON codecs first; then
        every other plugin, in the order this manager loaded them.

        Returns:
            A new registry (add your own codecs to it).

        Raises:
            ConflictError: two plugins register a codec for the same type or with the same id;
                the message names the plugin.
            CodecError: a plugin registers something that is not a valid codec.
            PluginError: a plugin's hook raised another error.
        """
        codecs = Codecs()
        # Registration order (built-ins first), so the first registration of a type is kept.
        for plugin_name, call in each_implementation(self, "durable_register_codecs"):
            try:
                call(codecs=codecs)
            except (ConflictError, CodecError) as exc:
                raise type(exc)(
                    f"while plugin {plugin_name!r} registered its codecs: {exc}"
                ) from exc
            except Exception as exc:
                raise PluginError(
                    f"plugin {plugin_name!r} failed while registering its codecs: "
                    f"{type(exc).__name__}: {exc}; fix or reinstall it, or block it with "
                    f"DURABLE_BLOCK_PLUGINS={plugin_name}"
                ) from exc
        return codecs

    # --- a run's recovery events and history -------------------------------------------------

    def listens_to_recovery_events(self) -> bool:
        """Whether any plugin implements ``durable_recovery_event`` (read as a run starts:
        without one, a resume builds no event per restored node)."""
        return bool(self._recovery_calls())

    def emit_recovery_event(self, event: Any, history: HistoryTarget | None = None) -> None:
        """Give ``event`` to every ``durable_recovery_event`` implementation, each on its own.

        An implementation that raises is logged and the others still get the event: a
        plugin never fails the run (the hook's contract).

        Args:
            event: the :class:`~durable_core.durable.events.RecoveryEvent`.
            history: where the event's run keeps its history (its store, run id and root
                scope).
        """
        for plugin_name, call in self._recovery_calls():
            try:
                call(event=event, history=history)
            except Exception:
                log.exception(
                    "the durable_recovery_event hook of plugin %r raised; the run goes on",
                    plugin_name,
                )

    def _recovery_calls(self) -> list[tuple[str, Callable[..., Any]]]:
        """The callers of the ``durable_recovery_event`` implementations, built again only when
        the implementations changed (events come several times per node)."""
        impls = tuple(self.hook.durable_recovery_event.get_hookimpls())
        if impls != self._event_impls:
            self._event_impls = impls
            self._event_calls = (
                each_implementation(self, "durable_recovery_event", reverse=True) if impls else []
            )
        return self._event_calls

    def saved_definition(self, history: HistoryTarget, fingerprint: str) -> dict[str, str] | None:
        """The parts' fingerprints of the definition ``fingerprint`` that the run of
        ``history`` was started with, as a plugin kept them (``durable_saved_definition``; the
        run log); None when no plugin has them or one failed to read them (logged: this only
        explains a refused resume)."""
        return self._saved("durable_saved_definition", history, fingerprint)

    def saved_inputs(self, history: HistoryTarget, fingerprint: str) -> dict[str, str] | None:
        """The fingerprint of each root input, by name, of the run of ``history`` whose inputs
        have the whole fingerprint ``fingerprint``, as a plugin kept them
        (``durable_saved_inputs``; the run log); None as for :meth:`saved_definition`."""
        return self._saved("durable_saved_inputs", history, fingerprint)

    def _saved(self, hook_name: str, history: HistoryTarget, fingerprint: str) -> Any:
        try:
            found = getattr(self.hook, hook_name)(history=history, fingerprint=fingerprint)
        except Exception:
            log.warning("the %s hook raised; the saved parts are not known", hook_name)
            log.debug("the %s hook raised", hook_name, exc_info=True)
            return None
        if not isinstance(found, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in found.items()
        ):
            return None
        return found

    # --- the command line --------------------------------------------------------------------

    def add_commands(self, cli: click.Group) -> None:
        """Let every plugin add its click commands to ``cli`` (``durable_register_commands``)."""
        self.hook.durable_register_commands(cli=cli)

    # --- plugins registered in process ------------------------------------------------------

    def register_hooks(self, module: object, name: str) -> bool:
        """Register ``module`` as the plugin ``name`` when it implements Durable hooks (a
        graph's module defining ``durable_register_codecs`` beside the graph).

        Returns:
            True when the module is registered under ``name`` (now or earlier), False when it
            implements no hook.

        Raises:
            PluginError: the module implements a hook Durable does not define, or with
                arguments the hook does not offer, or ``name`` is taken by another plugin.
        """
        if self.get_plugin(name) is module:
            return True
        marker = f"{self.project_name}_impl"
        if not any(hasattr(getattr(module, attr, None), marker) for attr in dir(module)):
            return False
        try:
            self.register(module, name=name)
            self.check_pending()
        except (pluggy.PluginValidationError, ValueError) as exc:
            raise PluginError(str(exc)) from exc
        return True

    # --- what is installed -------------------------------------------------------------------

    def describe(self) -> list[PluginInfo]:
        """One :class:`PluginInfo` per registered plugin and per plugin that failed to load."""
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


_default_lock = threading.Lock()
_default: list[DurablePluginManager] = []  # the one default manager, once built


def default_plugins() -> DurablePluginManager:
    """The process-wide plugin manager, for library callers that hand none in.

    Built once, on first use, by :func:`make_plugin_manager` (so the environment variables are
    read then), and the same manager after that. The ``durable`` command does not use it: it
    builds one manager per invocation.

    Raises:
        PluginError: as :func:`make_plugin_manager` (and again on the next call).
    """
    with _default_lock:
        if not _default:
            _default.append(make_plugin_manager())
        return _default[0]
