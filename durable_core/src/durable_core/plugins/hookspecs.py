"""Every hook of Durable's plugin system (pluggy project ``durable``), and the ``hookimpl``
marker plugins use.

Plugins are distributions declaring an entry point in the group ``durable``::

    [project.entry-points.durable]
    mystore = "my_package.durable_plugin"

The entry point names a module (or object) holding functions marked with
:data:`durable_core.hookimpl`. Implementations may accept fewer arguments than the spec lists;
new arguments are only ever added, never changed.

This module imports pluggy alone (``from durable_core import hookimpl`` loads nothing else of
Durable). The hooks are called only through the typed methods of
:class:`~durable_core.plugins.manager.DurablePluginManager`: a new hook goes in the section it
belongs to here, with its method there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import click

    from durable_core.codecs import Codecs
    from durable_core.history import HistoryTarget
    from durable_core.plugins.registries import (
        ExecutorRegistry,
        LauncherRegistry,
        StoreRegistry,
    )

PROJECT_NAME = "durable"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

StoreFactory = Callable[..., Any]
"""A store factory: called with the backend's options as keyword arguments, returns a Store."""


# -------------------------------------------------------------------------------------------------
# Registration hooks: what a plugin provides (called once per manager or registry)
# -------------------------------------------------------------------------------------------------


@hookspec
def durable_register_stores(register: StoreRegistry) -> None:
    """Register store backends by name.

    Called once per plugin manager, when the first store is looked up. Call
    ``register(name, factory)`` for each backend; ``factory(**options)`` builds the store from
    the options of a config's ``[store]`` table (everything but ``backend``). Registering a name
    twice raises :class:`~durable_core.errors.PluginError` naming both providers.

    To be named by ``--store URL`` too, claim URL schemes:
    ``register(name, factory, url_schemes=["mystore"], from_url=parse)``, where
    ``parse(url) -> dict`` returns the factory's options for a ``mystore:…`` URL (raise
    :class:`~durable_core.errors.ConfigError` for one it cannot read); without ``from_url`` the
    options are ``{"url": url}``. A scheme claimed twice is a ``PluginError`` naming both
    plugins. The built-in stores claim ``memory``, ``file``, ``sqlite``, ``postgres`` and
    ``postgresql`` this way. The return value is ignored.
    """


@hookspec
def durable_register_executors(register: ExecutorRegistry) -> None:
    """Register executors (where function-form node bodies run) by name.

    Called once per plugin manager, when the first executor is looked up. Call
    ``register(name, factory)`` for each executor; ``factory(**options)`` builds an
    :class:`~durable_core.executors.Executor` from the options of a config's ``[executor]``
    table (everything but ``backend``) and raises
    :class:`~durable_core.errors.ConfigError` for a bad option. The core registers ``thread``
    and ``process``. Registering a name twice raises
    :class:`~durable_core.errors.PluginError` naming both providers. The return value is
    ignored. See ``docs/executors.md``.
    """


@hookspec
def durable_register_launchers(register: LauncherRegistry) -> None:
    """Register launchers (where whole runs are started: ``durable submit --on NAME:…``) by name.

    Called once per plugin manager, when the first launcher is looked up. Call
    ``register(name, factory)`` for each launcher; ``factory(address)`` builds a
    :class:`~durable_core.launchers.Launcher` from what follows the name in a ``--on`` target
    (``"4"`` for ``local:4``, ``"10.0.0.5:8786"`` for ``dask://10.0.0.5:8786``, ``""`` for a
    bare name) and raises :class:`~durable_core.errors.ConfigError` for an address it cannot
    read. The core registers ``local``. Registering a name twice raises
    :class:`~durable_core.errors.PluginError` naming both providers. The return value is
    ignored. See ``docs/fleet.md``.
    """


@hookspec
def durable_register_codecs(codecs: Codecs) -> None:
    """Add codecs to a :class:`~durable_core.codecs.Codecs` registry.

    Called by the manager's ``codecs()`` (``Codecs.from_plugins()``, and so the ``durable``
    command) once per registry,
    for every loaded plugin in load order: the core's built-in JSON codecs first. Call
    ``codecs.register(codec)`` for each codec (or ``codecs.register_json(cls)``); a duplicate
    type or id raises :class:`~durable_core.errors.ConflictError` naming the plugin, and keeps
    the first entry (C-2). The return value is ignored. See ``docs/codecs.md``.
    """


# -------------------------------------------------------------------------------------------------
# Run hooks: a durable run's recovery events, and what its history kept
# -------------------------------------------------------------------------------------------------


@hookspec
def durable_recovery_event(event: Any, history: Any) -> None:
    """Receive one recovery event of a durable run (run started/resumed, node restored, attempt
    adopted/started/failed, message failed, node confirmed, run finished).

    ``history`` is the :class:`~durable_core.history.HistoryTarget` of the event's run: its
    store, run id and root scope, where the run's history goes (an implementation may take
    ``event`` alone). Called synchronously on the runtime's commit path, after the save the
    event describes; keep it fast (the plugin ``runlog`` only queues the event for
    :data:`~durable_core.history.WRITER`). An exception raised here is logged and never fails
    the run. The return value is ignored.
    """


@hookspec(firstresult=True)
def durable_saved_definition(history: HistoryTarget, fingerprint: str) -> dict[str, str] | None:
    """Return the fingerprints of the parts of the definition a run was started with.

    Asked when ``resume`` is refused because the graph's definition changed (and by
    ``durable inspect``), so that the error can name what changed. ``history`` is the run's
    :class:`~durable_core.history.HistoryTarget`; ``fingerprint`` the whole definition's
    SHA-256 hex that its record keeps. Return the parts kept for that very fingerprint (by
    name: ``"node:PATH"``, ``"key:PATH"``, ``"input:PATH"``, ``"graph:PATH"``; see
    :mod:`durable_core.durable.definition_diff`), or None when you have none. The plugin
    ``runlog`` answers from the run's log. An exception is logged and taken as None.

    Stops at first non-None result.
    """


@hookspec(firstresult=True)
def durable_saved_inputs(history: HistoryTarget, fingerprint: str) -> dict[str, str] | None:
    """Return the fingerprint of each root input, by input name, a run was started with.

    Asked when ``resume`` is refused because the inputs differ, so that the error can name
    the input that changed. ``history`` is the run's
    :class:`~durable_core.history.HistoryTarget`; ``fingerprint`` the record's whole
    ``Inputs`` fingerprint. Return the per-input fingerprints kept for that very
    fingerprint, or None when you have none. The plugin ``runlog`` answers from the run's
    log. An exception is logged and taken as None.

    Stops at first non-None result.
    """


# -------------------------------------------------------------------------------------------------
# Command-line hooks
# -------------------------------------------------------------------------------------------------


@hookspec
def durable_register_commands(cli: click.Group) -> None:
    """Add click commands to the ``durable`` command group (``cli.add_command(...)``).

    Called when the ``durable`` command is given a name that is not a built-in command; the
    return value is ignored.
    """
