"""What every launcher shares: the job that travels to a worker, the outcome that comes back,
the :class:`Launcher` base class, and how a ``--on`` target names a registered launcher (X-LAUNCH).

A launcher starts whole runs somewhere else (a pool of local processes, a Dask cluster). Every
job is ``run_or_resume``: a run with a record is resumed, never started again, so launching a
run twice is harmless. A launch that finds the run owned by another process reports
:attr:`LaunchStatus.BUSY`; it neither fails the run nor runs it a second time.
"""

from __future__ import annotations

import abc
import concurrent.futures
import enum
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from durable_core.errors import ConfigError

__all__ = [
    "FAILED_STATUSES",
    "LaunchStatus",
    "Launcher",
    "RunJob",
    "RunOutcome",
    "split_target",
]


class LaunchStatus(enum.StrEnum):
    """How one launched run ended, as its submitter saw it.

    - ``completed``, ``failed``, ``canceled``: the run's own end (its ``DurableResult.status``),
      from the worker that ran it, or read from the store after it ran elsewhere.
    - ``waiting``: launched with ``suspend``, the run had nothing to do but wait for inbox
      messages or a timer, and ended its worker's part with a waiting note (X-WAIT); a post or
      its deadline makes it due, and ``durable send``/``durable recover`` launch it again.
    - ``busy``: another process owned the run when it was launched (not waited for).
    - ``incomplete``: the run ran elsewhere and was released unfinished (its owner stopped or
      died); ``durable recover`` continues it.
    - ``running``: the run still ran elsewhere when the wait for it ended.
    - ``submitted``: handed to a launcher whose runs go on without the submitter (not waited).
    - ``error``: the run was refused before it started (a bad input, a mismatch, a store error).
    - ``lost``: the worker running it died more often than allowed; the record stays resumable.
    """

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    WAITING = "waiting"
    BUSY = "busy"
    INCOMPLETE = "incomplete"
    RUNNING = "running"
    SUBMITTED = "submitted"
    ERROR = "error"
    LOST = "lost"


FAILED_STATUSES = frozenset(
    {
        LaunchStatus.FAILED,
        LaunchStatus.CANCELED,
        LaunchStatus.INCOMPLETE,
        LaunchStatus.ERROR,
        LaunchStatus.LOST,
    }
)
"""The ends that make ``durable submit --wait`` exit 1: every end but completed and waiting,
and but a run still running elsewhere, busy or submitted (those are someone else's to
report)."""


@attrs.frozen
class RunJob:
    """One run to start or resume, as it travels to a worker (picklable; paths absolute).

    Attributes:
        config: the configuration file's absolute path (the same path on every worker).
        run_id: the run's id.
        inputs: replacements of ``[inputs]`` entries by key name
            (:class:`~durable_core.config.inputs.LiteralInput`, ``FileInput``, ``PathInput``).
        store: the store to use instead of the config's ``[store]`` (a
            :class:`~durable_core.config.StoreConfig`), or ``None``.
        max_running: ``[runtime] max_running`` override, or ``None``.
        busy_grace: seconds a worker retries a run that is owned before it reports ``busy``
            (a probe such as ``durable list`` holds a run for milliseconds, an owner for long).
        suspend: a run with nothing to do but wait ends with status ``waiting`` instead of
            holding its worker (``durable run --suspend``, X-WAIT).
    """

    config: str
    run_id: str
    inputs: Mapping[str, Any] = attrs.field(factory=dict)
    store: Any = None
    max_running: int | None = None
    busy_grace: float = 0.5
    suspend: bool = False


@attrs.frozen
class RunOutcome:
    """What became of one launched run.

    Attributes:
        run_id: the run.
        status: its :class:`LaunchStatus`.
        error: ``"Type: message"`` of a failed run's error or of a refused launch, else None.
        outputs: a completed run's root results nobody in the graph consumes, JSON values as
            they are and anything else as its ``repr`` (None unless the worker saw it end).
        revision: the record's revision at the end, where known.
        elapsed: seconds the worker spent on it (0 when it did not run it).
        worker: where it ran (``host:pid``), where known.
        busy: another process owned the run when this launch reached it.
        launches: how many times it was launched (more than 1 after a worker died).
    """

    run_id: str
    status: LaunchStatus
    error: str | None = None
    outputs: dict[str, Any] | None = None
    revision: int | None = None
    elapsed: float = 0.0
    worker: str = ""
    busy: bool = False
    launches: int = 1

    def to_json(self) -> dict[str, Any]:
        """The outcome as a JSON object (``durable submit --json``)."""
        out = attrs.asdict(self)
        out["status"] = str(self.status)
        out["elapsed"] = round(self.elapsed, 3)
        return out


class Launcher(abc.ABC):
    """Where whole runs go: the base of every launcher (``durable_register_launchers``).

    A subclass runs :func:`~durable_core.launchers.job.run_job` for each job somewhere else and
    hands back a future of its :class:`RunOutcome`. The future raises only when the worker was
    lost (a dead process, a dead Dask worker beyond its allowed failures): the submitter then
    launches the run again, and the new launch resumes what the lost one confirmed.

    Class attributes:
        name: the registered name (``local``, ``dask``).
        detached: the runs go on when the submitter exits (a cluster); ``False`` when the
            workers are the submitter's own children.
    """

    name: ClassVar[str] = "?"
    detached: ClassVar[bool] = False

    @property
    def capacity(self) -> int | None:
        """Runs at once this launcher takes (more wait in the submitter); None: no bound here
        (the cluster's own workers bound them)."""
        return None

    @abc.abstractmethod
    def single_host(self) -> bool:
        """Whether every worker runs on this machine (so a file or SQLite store is shared)."""

    @abc.abstractmethod
    def submit(self, job: RunJob) -> concurrent.futures.Future[RunOutcome]:
        """Start ``job`` (``run_or_resume`` of its run) and return the future of its outcome."""

    def detach(self) -> None:  # noqa: B027 - optional: only a detached launcher has work here
        """Let every submitted run go on after :meth:`close` (a detached launcher only)."""

    def describe(self) -> str:
        """A short description for messages (``local:2``, ``dask://10.0.0.5:8786``)."""
        return self.name

    @abc.abstractmethod
    def close(self, *, cancel: bool = False) -> None:
        """Release the launcher; ``cancel`` stops runs still running (they stay resumable)."""

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close(cancel=exc_info[0] is not None)


def split_target(target: str) -> tuple[str, str]:
    """``(launcher name, address)`` of a ``--on`` target.

    ``local`` → ``("local", "")``; ``local:4`` → ``("local", "4")``; ``dask://10.0.0.5:8786``
    → ``("dask", "10.0.0.5:8786")``.

    Raises:
        ConfigError: the target is empty or has no name before ``:``.
    """
    text = target.strip()
    name, sep, rest = text.partition(":")
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(
            f"--on {target!r}: expected a launcher such as 'local', 'local:4' or 'dask://HOST:PORT'"
        )
    if sep and rest.startswith("//"):
        rest = rest[2:]
    return name.lower(), rest
