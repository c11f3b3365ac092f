"""Submitting runs to a launcher: ``durable submit`` and its Python form, :func:`submit` (X-LAUNCH).

A submission turns a configuration and its runs (:class:`RunSpec`) into jobs, checks every
run's inputs before any is launched, refuses a store the launcher's workers cannot share, and
hands the jobs to the launcher, at most its capacity at once. Then, when told to wait, it
collects each run's end:

- a worker that died (a killed process, a Dask worker lost beyond its allowed failures) is not
  an end: the run is launched again, and the new launch resumes what the lost one confirmed;
- a run another process owns (``busy``) is neither failed nor run twice: its end is read from
  the store, polling its ownership until the owner lets go (at most ``busy_timeout`` seconds);
  a run its owner left unfinished (it died) is launched again.
"""

from __future__ import annotations

import collections
import concurrent.futures
import pathlib
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from durable_core.errors import BusyError, ConfigError, NotFoundError, UnsharedStoreError
from durable_core.launchers.base import Launcher, LaunchStatus, RunJob, RunOutcome, split_target
from durable_core.launchers.runsfile import RunSpec, check_unique

__all__ = [
    "DEFAULT_BUSY_TIMEOUT",
    "DEFAULT_RELAUNCHES",
    "Prepared",
    "Submitter",
    "check_store",
    "open_launcher",
    "prepare",
    "probe_end",
    "run_owned",
    "submit",
]

DEFAULT_BUSY_TIMEOUT = 600.0
"""Seconds a waiting submitter waits at most for a run that another process owns."""

DEFAULT_RELAUNCHES = 3
"""Times a run is launched again after its worker died, or after its other owner left it
unfinished, before it is reported ``lost``."""

_FIRST_POLL = 0.2
_LONGEST_POLL = 2.0
_SIGNAL_PAUSE = 0.5
"""Seconds the submitting thread waits at most at a time for its runs (see ``Submitter.run``)."""


def open_launcher(on: str | Launcher, pm: Any = None) -> tuple[Launcher, bool]:
    """The launcher ``on`` names, and whether the caller owns it (must close it).

    Args:
        on: a :class:`Launcher` (returned as is, not owned) or a ``--on`` target
            (``local``, ``local:4``, ``dask://HOST:PORT``) looked up in the plugin manager's
            launcher registry (``durable_register_launchers``).
        pm: the plugin manager; ``None``: the process's (``default_plugins()``).

    Raises:
        PluginError: no installed plugin registers that launcher (the message names the
            distribution that provides it).
        ConfigError: the target is malformed or its address is refused by the launcher.
    """
    if isinstance(on, Launcher):
        return on, False
    if not isinstance(on, str):
        raise ConfigError(
            f"on must be a Launcher or a target such as 'local:4', got {type(on).__name__}"
        )
    if pm is None:
        from durable_core.plugins import default_plugins

        pm = default_plugins()
    name, address = split_target(on)
    return pm.launcher_factory(name)(address), True


def check_store(store: Any, launcher: Launcher) -> None:
    """Refuse a store that the launcher's workers cannot all reach.

    Args:
        store: the runs' :class:`~durable_core.config.StoreConfig`.
        launcher: the launcher.

    Raises:
        UnsharedStoreError: a memory store (it lives in one process), or a SQLite store with
            workers on other hosts (its write-ahead log needs one host).
    """
    backend = store.backend
    if backend == "memory":
        raise UnsharedStoreError(
            f"a launcher cannot use the {store.describe()}: a memory store lives in one process "
            "and its workers would each see an empty one. Use a file or SQLite store for "
            "'local', PostgreSQL for workers on several hosts"
        )
    if backend == "sqlite" and not launcher.single_host():
        raise UnsharedStoreError(
            f"{launcher.describe()} has workers on other hosts, and the {store.describe()} "
            "needs every process on one host (SQLite's write-ahead log uses shared memory). "
            "Use PostgreSQL for workers on several hosts"
        )


@attrs.frozen
class Prepared:
    """One configuration's part of a submission: its config, graph and jobs.

    Attributes:
        config: the :class:`~durable_core.config.RunConfig` (with ``--store`` applied).
        graph: its graph.
        jobs: one :class:`RunJob` per run.
    """

    config: Any
    graph: Any
    jobs: tuple[RunJob, ...]


def prepare(
    config: str | pathlib.Path,
    runs: Iterable[RunSpec] = (RunSpec(),),
    *,
    store: str | None = None,
    max_running: int | None = None,
    busy_grace: float | None = None,
    suspend: bool = False,
    pm: Any = None,
) -> Prepared:
    """The jobs of ``runs`` of ``config``, every run's inputs checked now.

    Args:
        config: the configuration file.
        runs: the runs (default: one, the config's run id and inputs).
        store: a store URL replacing the config's ``[store]``.
        max_running: ``[runtime] max_running`` override for every run.
        busy_grace: seconds a worker retries an owned run before it reports ``busy``.
        suspend: a run with nothing to do but wait ends ``waiting`` (see :class:`RunJob`).
        pm: the plugin manager; ``None``: the process's (``default_plugins()``).

    Raises:
        ConfigError: the config, a run's inputs (the message names its line) or the store URL
            is wrong, or a run is listed twice.
    """
    from durable_core.config import InputSource, load_config, parse_store_url
    from durable_core.config.schema import CONFIG_CONVERTER

    if pm is None:
        from durable_core.plugins import default_plugins

        pm = default_plugins()
    specs = list(runs)
    check_unique(specs)
    base = load_config(config)
    graph = base.load_graph()
    override = None if store is None else parse_store_url(store, pm=pm)
    base = base.with_overrides(store=override, max_running=max_running)
    jobs = []
    for spec in specs:
        where = spec.where or f"run {spec.run_id or base.run_id!r}"
        inputs: dict[str, Any] = {}
        for name, value in spec.inputs.items():
            if isinstance(value, InputSource):  # already parsed (--input)
                inputs[name] = value
                continue
            try:
                inputs[name] = CONFIG_CONVERTER.structure(value, InputSource)
            except Exception as exc:
                raise ConfigError(f"{where}: input {name!r}: {exc}") from None
        one = base.with_run_id(spec.run_id).with_overrides(inputs=inputs)
        try:
            one.resolve_inputs(graph)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        options = {} if busy_grace is None else {"busy_grace": busy_grace}
        jobs.append(
            RunJob(
                config=str(base.path),
                run_id=one.run_id,
                inputs=inputs,
                store=override,
                max_running=max_running,
                suspend=suspend,
                **options,
            )
        )
    return Prepared(config=base, graph=graph, jobs=tuple(jobs))


def probe_end(store: Any, run_id: str, graph: Any) -> LaunchStatus | None:
    """A run's end as its record tells it, or ``None`` while another process owns it.

    The run is read through a short exclusive session (as ``durable list`` reads it).

    Returns:
        ``completed``, ``failed``, ``incomplete`` (released unfinished, or no record), or
        ``None`` (owned).
    """
    from durable_core.ops.runinfo import RunStatus, run_status

    try:
        session = store.acquire(run_id)
    except BusyError:
        return None
    with session:
        try:
            record = session.load()
        except NotFoundError:
            return LaunchStatus.INCOMPLETE
    status = run_status(record, list(graph.nodes))
    if status == RunStatus.COMPLETED:
        return LaunchStatus.COMPLETED
    if status == RunStatus.FAILED:
        return LaunchStatus.FAILED
    return LaunchStatus.INCOMPLETE


@attrs.define
class _Entry:
    part: Prepared
    job: RunJob
    launches: int = 0
    busy: bool = False
    busy_since: float = 0.0
    next_poll: float = 0.0
    poll: float = _FIRST_POLL


class Submitter:
    """Hands jobs to a launcher and collects their ends (see the module documentation).

    Args:
        launcher: the launcher (not closed here).
        wait: collect each run's end; without it, a detached launcher's runs are handed over
            and reported ``submitted`` (a local launcher's runs always end before it returns,
            and a bounded launcher's are handed out as earlier ones end: both are waited for).
        busy_timeout: seconds to wait at most for a run another process owns.
        relaunches: times a run is launched again after its worker died (or its other owner
            left it unfinished) before it is reported ``lost``.
        on_end: called with each run's final :class:`RunOutcome`, as it comes.
        on_busy: called with the outcome of a launch that found the run owned.
        per_graph: at most this many runs of each part (one configuration, so one graph) at
            once, besides the launcher's own bound; None: no such bound. A bound makes the
            submitter hand runs out as earlier ones end, so it waits for them.
        pm: the plugin manager (for the stores a busy run is watched in).

    Raises:
        ConfigError: ``per_graph`` is less than 1.
    """

    def __init__(
        self,
        launcher: Launcher,
        *,
        wait: bool = True,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        relaunches: int = DEFAULT_RELAUNCHES,
        on_end: Callable[[RunOutcome], None] | None = None,
        on_busy: Callable[[RunOutcome], None] | None = None,
        per_graph: int | None = None,
        pm: Any = None,
    ) -> None:
        if per_graph is not None and per_graph < 1:
            raise ConfigError(
                f"the bound of runs at once per graph must be >= 1, found {per_graph}"
            )
        self.per_graph = per_graph
        self.launcher = launcher
        self.wait = wait
        self.busy_timeout = busy_timeout
        self.relaunches = relaunches
        self.on_end = on_end
        self.on_busy = on_busy
        self.pm = pm
        self._stores: dict[int, Any] = {}

    def run(self, parts: Sequence[Prepared]) -> list[RunOutcome]:
        """Launch every job of ``parts``; their outcomes in the order given.

        Raises:
            UnsharedStoreError: a part's store cannot be shared by the launcher's workers
                (checked before anything is launched).
        """
        for part in parts:
            check_store(part.config.store, self.launcher)
        entries = [_Entry(part, job) for part in parts for job in part.jobs]
        ends: dict[int, RunOutcome] = {}
        try:
            bounded = self.launcher.capacity is not None or self.per_graph is not None
            if not self.wait and self.launcher.detached and not bounded:
                self._hand_over(entries, ends)
            else:
                self._collect(entries, ends)
        finally:
            for store in self._stores.values():
                store.close()
            self._stores.clear()
        return [ends[id(e)] for e in entries]

    def _hand_over(self, entries: list[_Entry], ends: dict[int, RunOutcome]) -> None:
        for entry in entries:
            self.launcher.submit(entry.job)
        self.launcher.detach()
        for entry in entries:
            self._end(entry, ends, RunOutcome(entry.job.run_id, LaunchStatus.SUBMITTED))

    def _collect(self, entries: list[_Entry], ends: dict[int, RunOutcome]) -> None:
        pending = collections.deque(entries)
        running: dict[concurrent.futures.Future[RunOutcome], _Entry] = {}
        watched: list[_Entry] = []
        capacity = self.launcher.capacity
        try:
            while pending or running or watched:
                while pending and (capacity is None or len(running) < capacity):
                    entry = self._next(pending, running)
                    if entry is None:  # every pending run's graph is at its bound
                        break
                    entry.launches += 1
                    running[self.launcher.submit(entry.job)] = entry
                # Wake at least every _SIGNAL_PAUSE seconds: a Ctrl-C that another thread
                # received is acted on only once this (main) thread runs Python code again.
                timeout = _SIGNAL_PAUSE
                if watched:
                    timeout = max(
                        0.0,
                        min(_SIGNAL_PAUSE, min(e.next_poll for e in watched) - time.monotonic()),
                    )
                done, _ = concurrent.futures.wait(
                    running, timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in done:
                    entry = running.pop(future)
                    try:
                        outcome = future.result()
                    except Exception as exc:  # the worker was lost: launch the run again
                        if entry.launches <= self.relaunches:
                            pending.appendleft(entry)
                            continue
                        outcome = RunOutcome(
                            entry.job.run_id,
                            LaunchStatus.LOST,
                            error=f"{type(exc).__name__}: {exc}",
                        )
                    if outcome.status is LaunchStatus.BUSY:
                        entry.busy = True
                        if self.on_busy is not None:
                            self.on_busy(outcome)
                        if not self.wait:
                            self._end(entry, ends, outcome)
                            continue
                        now = time.monotonic()
                        entry.busy_since = entry.busy_since or now
                        entry.next_poll, entry.poll = now + _FIRST_POLL, _FIRST_POLL
                        watched.append(entry)
                        continue
                    self._end(entry, ends, outcome)
                for entry in [e for e in watched if e.next_poll <= time.monotonic()]:
                    self._poll(entry, watched, pending, ends)
        except BaseException:
            if self.launcher.detached:
                self.launcher.detach()  # the cluster goes on with them
            raise

    def _next(
        self,
        pending: collections.deque[_Entry],
        running: dict[concurrent.futures.Future[RunOutcome], _Entry],
    ) -> _Entry | None:
        """The first pending entry whose graph is under ``per_graph`` (taken off ``pending``)."""
        if self.per_graph is None:
            return pending.popleft()
        counts = collections.Counter(id(e.part) for e in running.values())
        for entry in pending:
            if counts[id(entry.part)] < self.per_graph:
                pending.remove(entry)
                return entry
        return None

    def _poll(
        self,
        entry: _Entry,
        watched: list[_Entry],
        pending: collections.deque[_Entry],
        ends: dict[int, RunOutcome],
    ) -> None:
        """Read the end of a run owned elsewhere; launch it again when its owner left it
        unfinished; give up waiting after ``busy_timeout``."""
        store = self._store(entry.part)
        end = probe_end(store, entry.job.run_id, entry.part.graph)
        now = time.monotonic()
        if end is None:
            if now - entry.busy_since >= self.busy_timeout:
                watched.remove(entry)
                self._end(entry, ends, self._busy_end(entry, LaunchStatus.RUNNING))
                return
            entry.poll = min(entry.poll * 2, _LONGEST_POLL)
            entry.next_poll = now + entry.poll
            return
        watched.remove(entry)
        if end is LaunchStatus.INCOMPLETE and entry.launches <= self.relaunches:
            pending.append(entry)  # its owner stopped or died: at-least-once launching
            return
        self._end(entry, ends, self._busy_end(entry, end))

    def _busy_end(self, entry: _Entry, status: LaunchStatus) -> RunOutcome:
        return RunOutcome(entry.job.run_id, status, busy=True, launches=entry.launches)

    def _store(self, part: Prepared) -> Any:
        store = self._stores.get(id(part))
        if store is None:
            store = self._stores[id(part)] = part.config.open_store(self.pm)
        return store

    def _end(self, entry: _Entry, ends: dict[int, RunOutcome], outcome: RunOutcome) -> None:
        outcome = attrs.evolve(
            outcome, busy=outcome.busy or entry.busy, launches=max(entry.launches, 1)
        )
        ends[id(entry)] = outcome
        if self.on_end is not None:
            self.on_end(outcome)


def submit(
    config: str | pathlib.Path,
    runs: Iterable[RunSpec] = (RunSpec(),),
    *,
    on: str | Launcher,
    store: str | None = None,
    wait: bool = True,
    max_running: int | None = None,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    relaunches: int = DEFAULT_RELAUNCHES,
    on_end: Callable[[RunOutcome], None] | None = None,
    on_busy: Callable[[RunOutcome], None] | None = None,
    per_graph: int | None = None,
    suspend: bool = False,
    pm: Any = None,
) -> list[RunOutcome]:
    """Submit runs of ``config`` to a launcher: the Python form of ``durable submit``.

    Each run is ``run_or_resume``: an existing run is resumed, never started again; a run
    another process owns is reported (and, with ``wait``, its end read from the store), never
    failed nor run twice.

    Args:
        config: the configuration file (the same path must hold it on every worker).
        runs: the runs (:class:`RunSpec`; see
            :func:`~durable_core.launchers.runsfile.read_runs_file`); default: one, the config's
            run id and inputs.
        on: a :class:`Launcher`, or a target: ``local``, ``local:N``, ``dask://HOST:PORT``.
        store: a store URL replacing the config's ``[store]``.
        wait: collect each run's end (see :class:`Submitter`).
        max_running: ``[runtime] max_running`` for every run.
        busy_timeout: seconds to wait at most for a run another process owns.
        relaunches: launches again after a lost worker (see :class:`Submitter`).
        on_end: called with each run's outcome as it ends.
        on_busy: called with the outcome of a launch that found its run owned elsewhere.
        per_graph: at most this many of the runs at once (see :class:`Submitter`).
        suspend: a run with nothing to do but wait for inbox messages or a timer ends
            ``waiting`` instead of holding its worker (``durable run --suspend``).
        pm: the plugin manager; ``None``: the process's (``default_plugins()``).

    Returns:
        One :class:`RunOutcome` per run, in the order given.

    Raises:
        ConfigError: the config, a run's inputs, the store URL or the target is wrong
            (nothing is launched).
        UnsharedStoreError: the store cannot be shared by the launcher's workers.
        PluginError: the launcher is not installed.
    """
    if pm is None:
        from durable_core.plugins import default_plugins

        pm = default_plugins()
    part = prepare(config, runs, store=store, max_running=max_running, suspend=suspend, pm=pm)
    launcher, owned = open_launcher(on, pm)
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
    return run_owned(submitter, [part], owned)


def run_owned(submitter: Submitter, parts: Sequence[Prepared], owned: bool) -> list[RunOutcome]:
    """``submitter.run(parts)``, then the launcher closed when ``owned``: after an error or
    Ctrl-C its runs still running are stopped (each stays resumable)."""
    try:
        outcomes = submitter.run(parts)
    except BaseException:
        if owned:
            submitter.launcher.close(cancel=True)
        raise
    if owned:
        submitter.launcher.close()
    return outcomes
