"""Launchers: whole runs started elsewhere (a pool of local processes, a Dask cluster), and the
two operations on top of them, :func:`submit` and :func:`recover` (X-LAUNCH).

An executor moves a node's body and leaves the run with its owner; a launcher moves the run:
the worker that gets it owns it, checkpoints it and commits it. Launchers are plugins
(``durable_register_launchers``); the core registers ``local``, the Dask distribution
``dask``. See ``docs/fleet.md``.
"""

from durable_core.launchers.base import (
    FAILED_STATUSES,
    Launcher,
    LaunchStatus,
    RunJob,
    RunOutcome,
    split_target,
)
from durable_core.launchers.local import LocalLauncher, local_launcher
from durable_core.launchers.recover import Recovery, find_orphans, recover
from durable_core.launchers.runsfile import RunSpec, read_runs_file
from durable_core.launchers.submit import (
    Prepared,
    Submitter,
    check_store,
    open_launcher,
    prepare,
    probe_end,
    submit,
)

__all__ = [
    "FAILED_STATUSES",
    "LaunchStatus",
    "Launcher",
    "LocalLauncher",
    "Prepared",
    "Recovery",
    "RunJob",
    "RunOutcome",
    "RunSpec",
    "Submitter",
    "check_store",
    "find_orphans",
    "local_launcher",
    "open_launcher",
    "prepare",
    "probe_end",
    "read_runs_file",
    "recover",
    "split_target",
    "submit",
]
