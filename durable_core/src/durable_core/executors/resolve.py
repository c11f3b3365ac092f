"""Turn what a caller passes as ``executor=`` into an executor instance."""

from __future__ import annotations

from typing import Any

from durable_core.errors import ConfigError
from durable_core.executors.base import Executor

__all__ = ["resolve_executor"]


def resolve_executor(executor: Executor | str | None, plugins: Any = None) -> tuple[Any, bool]:
    """An executor instance for ``executor``, and whether the caller owns it (must close it).

    Args:
        executor: an :class:`Executor` (returned as is, not owned), a registered name (built
            with default options through the ``durable_register_executors`` hook, owned), or
            None (None: the run's worker threads).
        plugins: the plugin manager to look a name up in; None builds one.

    Raises:
        PluginError: no installed plugin registers the name (the message lists those that do).
        ConfigError: ``executor`` is of another type.
    """
    if executor is None or isinstance(executor, Executor):
        return executor, False
    if isinstance(executor, str):
        if plugins is None:
            from durable_core.plugins import make_plugin_manager

            plugins = make_plugin_manager()
        return plugins.executor_factory(executor)(), True
    raise ConfigError(
        f"executor must be an Executor instance, a registered executor name such as "
        f"'process', or None, got {executor!r}"
    )
