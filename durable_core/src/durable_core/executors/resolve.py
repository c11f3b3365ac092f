"""Turn what a caller passes as ``executor=`` into an executor instance (through a plugin
manager's :meth:`~durable_core.plugins.manager.DurablePluginManager.executor`)."""

from __future__ import annotations

from typing import Any

from durable_core.executors.base import Executor

__all__ = ["resolve_executor"]


def resolve_executor(executor: Executor | str | None, plugins: Any = None) -> tuple[Any, bool]:
    """An executor instance for ``executor``, and whether the caller owns it (must close it).

    The same as ``plugins.executor(executor)``; an :class:`Executor` or None needs no manager.

    Args:
        executor: an :class:`Executor` (returned as is, not owned), a registered name (built
            with default options through the ``durable_register_executors`` hook, owned), or
            None (None: the run's worker threads).
        plugins: the plugin manager to look a name up in; None: the process-wide one
            (:func:`~durable_core.plugins.default_plugins`).

    Raises:
        PluginError: no installed plugin registers the name (the message lists those that do).
        ConfigError: ``executor`` is of another type.
    """
    if executor is None or isinstance(executor, Executor):
        return executor, False
    if plugins is None:
        # The plugin wing sits above the executors: only a caller that hands in no manager
        # (Runtime(executor="name") without plugins) reaches up for the shared one.
        from durable_core.plugins.manager import default_plugins

        plugins = default_plugins()
    resolved: tuple[Any, bool] = plugins.executor(executor)
    return resolved
