"""Recovering orphaned runs: ``durable recover`` and its Python form, :func:`recover` (X-LAUNCH).

An orphan is an incomplete run of one of the given graphs that no process owns: its owner died
(or was stopped) before the run ended. :func:`find_orphans` lists the store's runs (the store
capability ``LIST_RUNS``) and reads each through a short exclusive session, as
``durable list`` does; a run that is owned is left alone. Every orphan is then submitted like
any run (:mod:`durable_core.launchers.submit`), so recovery is ``run_or_resume`` too.

Running it from cron, or twice at once, is safe: ownership is exclusive, so two recoveries that
launch the same orphan make one run and one ``busy`` report. A probe that meets another
recovery's probe (both hold a run for an instant) tries again a few times before it counts the
run as owned.

A **waiting** run (it ended its process to wait for inbox messages or a timer, X-WAIT) is left
alone until it is due (a message was posted to it, or its deadline passed): then it is
launched like an orphan. Every recovered run is launched with ``suspend``, so that one with
nothing to do but wait ends waiting again instead of holding a worker.

A run's record keeps a fingerprint of its inputs, not the inputs: a recovered run gets its
inputs from ``runs_file`` (the JSON-lines file it was submitted with) when listed there, else
from its configuration's ``[inputs]``. With ``runs_file``, the runs listed there that have no
record yet (the submitter died before launching them) are submitted too.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from durable_core.errors import BusyError, ConfigError, NotFoundError
from durable_core.launchers.base import Launcher, RunOutcome
from durable_core.launchers.runsfile import RunSpec, read_runs_file
from durable_core.launchers.submit import (
    DEFAULT_BUSY_TIMEOUT,
    DEFAULT_RELAUNCHES,
    Submitter,
    open_launcher,
    prepare,
    run_owned,
)

__all__ = ["Recovery", "find_orphans", "recover"]

PROBE_TRIES = 4
"""Times a run found owned is probed again before it counts as owned (another probe may hold
it for an instant)."""

_PROBE_PAUSE = 0.1


@attrs.frozen
class Recovery:
    """What :func:`recover` found and did.

    Attributes:
        orphans: run ids found incomplete and unowned (in the order of the store's listing).
        unstarted: run ids listed in ``runs_file`` with no record, submitted too.
        owned: run ids of the graphs skipped because a process owns them.
        waiting: run ids of the graphs left alone because they wait for a message or a
            deadline that has not passed (``durable send`` or the deadline brings them back).
        outcomes: one :class:`RunOutcome` per submitted run.
    """

    orphans: tuple[str, ...] = ()
    unstarted: tuple[str, ...] = ()
    owned: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    outcomes: tuple[RunOutcome, ...] = ()


def _probe(store: Any, run_id: str) -> Any:
    """The run's record through a short session, ``None`` without one, or ``BusyError``."""
    for attempt in range(PROBE_TRIES):
        try:
            session = store.acquire(run_id)
        except BusyError:
            if attempt == PROBE_TRIES - 1:
                raise
            time.sleep(_PROBE_PAUSE * (attempt + 1))
            continue
        with session:
            try:
                return session.load()
            except NotFoundError:
                return None
    raise AssertionError("unreachable")  # pragma: no cover


def find_orphans(
    store: Any, graph: Any, not_due: list[str] | None = None
) -> tuple[list[str], list[str], set[str]]:
    """The incomplete, unowned runs of ``graph`` in ``store`` (a waiting one only when due).

    ``not_due``, when given, receives the run ids of ``graph`` that wait, unowned, for a message
    or a deadline that has not passed (left alone).

    A run belongs to ``graph`` when its record's definition fingerprint is the graph's. Records
    that cannot be read are left out (``durable list`` shows them).

    Returns:
        ``(orphans, owned, known)``: orphan run ids, owned run ids of any graph, and every run
        id listed.

    Raises:
        ConfigError: the store cannot list its runs.
    """
    from durable_core.durable.waiting import is_due, waiting_of
    from durable_core.ops.runinfo import RunStatus, run_status
    from durable_core.store.capabilities import Capability, capabilities

    if Capability.LIST_RUNS not in capabilities(store):
        raise ConfigError(
            f"a {type(store).__name__} cannot list its runs, so recover cannot find them; "
            "resume each run with 'durable resume' instead"
        )
    fingerprint = graph.fingerprint()
    nodes = list(graph.nodes)
    orphans, owned, known = [], [], set()
    for summary in store.list_runs():
        if getattr(summary, "error", None) is not None or not summary.run_id:
            continue
        known.add(summary.run_id)
        try:
            record = _probe(store, summary.run_id)
        except BusyError:
            owned.append(summary.run_id)
            continue
        if record is None or record.definition != fingerprint:
            continue
        if run_status(record, nodes) != RunStatus.INCOMPLETE:
            continue
        note = waiting_of(store, summary.run_id)
        if note is None or is_due(store, note):  # a waiting run only once it is due
            orphans.append(summary.run_id)
        elif not_due is not None:
            not_due.append(summary.run_id)
    return orphans, owned, known


def recover(
    configs: str | pathlib.Path | Sequence[str | pathlib.Path],
    *,
    on: str | Launcher,
    store: str | None = None,
    runs_file: str | pathlib.Path | None = None,
    wait: bool = True,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    relaunches: int = DEFAULT_RELAUNCHES,
    on_end: Callable[[RunOutcome], None] | None = None,
    on_busy: Callable[[RunOutcome], None] | None = None,
    per_graph: int | None = None,
    pm: Any = None,
) -> Recovery:
    """Find the orphaned runs of the graphs of ``configs`` and submit them to ``on``.

    Args:
        configs: one configuration file or several; each one's graph names its runs.
        on: a :class:`Launcher` or a target (``local:4``, ``dask://HOST:PORT``).
        store: a store URL replacing every config's ``[store]``.
        runs_file: the JSON-lines file the runs were submitted with: the inputs of the runs
            listed there, and its runs without a record are submitted too (one config only).
        wait, busy_timeout, relaunches, on_end, on_busy, per_graph: as
            :class:`~durable_core.launchers.submit.Submitter` (``per_graph``: at most that many
            runs of each configuration's graph at once).
        pm: the plugin manager; ``None``: the process's (``default_plugins()``).

    Returns:
        A :class:`Recovery`.

    Raises:
        ConfigError: a config or the runs file is wrong, the store cannot list its runs, or a
            runs file is given with several configs.
        UnsharedStoreError: the store cannot be shared by the launcher's workers.
    """
    paths = [configs] if isinstance(configs, (str, pathlib.Path)) else list(configs)
    if not paths:
        raise ConfigError("recover needs at least one configuration file")
    if runs_file is not None and len(paths) > 1:
        raise ConfigError(
            "--inputs-file belongs to one configuration: recover each configuration with its "
            "own runs file"
        )
    if pm is None:
        from durable_core.plugins import default_plugins

        pm = default_plugins()
    listed = {s.run_id: s for s in read_runs_file(runs_file)} if runs_file is not None else {}
    parts, orphans, unstarted, owned, waiting = [], [], [], [], []
    seen: set[str] = set()
    for path in paths:
        probe = prepare(path, [], store=store, pm=pm)
        opened = probe.config.open_store(pm)
        try:
            found, busy, known = find_orphans(opened, probe.graph, waiting)
        finally:
            opened.close()
        owned.extend(r for r in busy if r not in owned)
        found = [r for r in found if r not in seen]
        fresh = [r for r in listed if r not in known] if listed else []
        seen.update(found)
        specs = [listed.get(r, RunSpec(run_id=r)) for r in [*found, *fresh]]
        orphans.extend(found)
        unstarted.extend(fresh)
        if specs:
            parts.append(prepare(path, specs, store=store, suspend=True, pm=pm))
    if not parts:
        return Recovery(owned=tuple(owned), waiting=tuple(waiting))
    launcher, is_owned = open_launcher(on, pm)
    submitter = Submitter(
        launcher,
        wait=wait,
        busy_timeout=busy_timeout,
        relaunches=relaunches,
        on_end=on_end,
        on_busy=on_busy,
        per_graph=per_graph,
        pm=pm,
    )
    outcomes = run_owned(submitter, parts, is_owned)
    return Recovery(
        orphans=tuple(orphans),
        unstarted=tuple(unstarted),
        owned=tuple(owned),
        waiting=tuple(waiting),
        outcomes=tuple(outcomes),
    )
