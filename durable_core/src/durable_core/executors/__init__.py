"""Executors: where function-form node bodies run (``thread``, ``process``, plugins).

See ``docs/executors.md``. The owner process always keeps the run: attempts, Retry budgets,
Timeouts, ``max_running`` and every commit. Executors are registered through the
``durable_register_executors`` hook and chosen with ``Runtime(..., executor=...)`` or the
``[executor]`` table of a run config.
"""

from durable_core.executors.base import Executor
from durable_core.executors.process import ProcessExecutor
from durable_core.executors.thread import ThreadExecutor
from durable_core.executors.transport import RemoteCall

__all__ = ["Executor", "ProcessExecutor", "RemoteCall", "ThreadExecutor"]
