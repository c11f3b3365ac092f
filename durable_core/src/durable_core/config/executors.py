"""The ``[executor]`` table: which executor runs function-form bodies, with which options."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from durable_core.errors import ConfigError, PluginError
from durable_core.plugins.manager import DurablePluginManager, default_plugins

if TYPE_CHECKING:
    from durable_core.executors import Executor

__all__ = ["ExecutorConfig"]


@attrs.frozen
class ExecutorConfig:
    """Which executor to build, with which options (see ``docs/executors.md``).

    Attributes:
        backend: the executor's registered name (``thread``, ``process``, ``dask`` or a
            plugin's name; see ``durable plugins``).
        options: keyword arguments for the executor's factory, as written
            (``max_workers = 2``; ``address = "tcp://…"``).
        origin: where this came from, for messages (``"/x/audit.toml: [executor]"``).
    """

    backend: str
    options: Mapping[str, Any] = attrs.field(factory=dict)
    origin: str = "the executor settings"

    def describe(self) -> str:
        """A one-line description for messages (``process executor (max_workers=2)``)."""
        shown = ", ".join(f"{name}={value!r}" for name, value in self.options.items())
        return f"{self.backend} executor" + (f" ({shown})" if shown else "")

    def open(self, pm: DurablePluginManager | None = None) -> Executor:
        """Build the executor through its registered factory (no worker starts yet).

        Args:
            pm: the plugin manager to look the executor up in; ``None``: the process-wide one
                (:func:`~durable_core.plugins.default_plugins`).

        Returns:
            The executor (call ``close()`` when done).

        Raises:
            PluginError: no installed plugin provides ``backend`` (the message lists the
                installed ones and the distribution to install), or its plugin failed to load.
            ConfigError: the factory does not accept these options or rejects a value.
        """
        if pm is None:
            pm = default_plugins()
        try:
            factory = pm.executor_factory(self.backend)
        except PluginError as exc:
            raise PluginError(f"{self.origin}: backend {self.backend!r}: {exc}") from exc
        options = dict(self.options)
        try:
            inspect.signature(factory).bind(**options)
        except TypeError as exc:
            raise ConfigError(
                f"{self.origin}: the {self.backend!r} executor does not accept these options "
                f"({', '.join(sorted(options)) or 'none'}): {exc}"
            ) from None
        except ValueError:  # no signature available; let the call decide
            pass
        try:
            return factory(**options)
        except TypeError as exc:
            raise ConfigError(
                f"{self.origin}: the {self.backend!r} executor rejected its options "
                f"({', '.join(sorted(options)) or 'none'}): {exc}"
            ) from exc
        except ConfigError as exc:
            raise ConfigError(f"{self.origin}: {exc}") from exc
