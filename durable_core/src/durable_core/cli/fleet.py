"""What ``durable submit`` and ``durable recover`` share: their launch options and how they
print each run's end and the summary."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

import click

from durable_core.cli.options import json_option

__all__ = ["fleet_options", "print_busy", "print_end", "report"]


def fleet_options(command: Any) -> Any:
    """``--on``, ``--store``, ``--per-graph``, ``--wait``, ``--busy-timeout`` and ``--json``."""
    decorators = [
        click.option(
            "--on",
            "on",
            required=True,
            metavar="TARGET",
            help="Where the runs go: local, local:N (N worker processes), dask://HOST:PORT[?runs=N].",
        ),
        click.option(
            "--store",
            "store_url",
            metavar="URL",
            help="The store, instead of the config's [store]; every worker must reach it.",
        ),
        click.option(
            "--per-graph",
            type=click.IntRange(min=1),
            metavar="N",
            help="At most N runs of each CONFIG's graph at once (besides the launcher's bound).",
        ),
        click.option("--wait", is_flag=True, help="Print each run's end; exit 1 if any failed."),
        click.option(
            "--busy-timeout",
            type=click.FloatRange(min=0),
            default=600.0,
            show_default=True,
            metavar="SECONDS",
            help="With --wait: how long to wait for a run that another process runs.",
        ),
        json_option("Print the outcomes as JSON."),
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def print_end(outcome: Any, as_json: bool) -> None:
    """One line on stdout as a run ends (nothing with ``--json``)."""
    if as_json:
        return
    from durable_core.launchers import LaunchStatus

    status = outcome.status
    where = f" on {outcome.worker}" if outcome.worker else ""
    again = f", launched {outcome.launches} times" if outcome.launches > 1 else ""
    if status is LaunchStatus.RUNNING:
        line = f"run {outcome.run_id!r} is still running elsewhere (stopped waiting for it)"
    elif outcome.busy:
        line = f"run {outcome.run_id!r} {status} (it ran elsewhere{again})"
    elif status is LaunchStatus.SUBMITTED:
        return
    else:
        line = f"run {outcome.run_id!r} {status} in {outcome.elapsed:.1f} s{where}{again}"
    click.echo(line)
    if outcome.error and status is not LaunchStatus.COMPLETED and not outcome.busy:
        click.echo(f"  {outcome.run_id}: {outcome.error}", err=True)


def print_busy(outcome: Any, as_json: bool) -> None:
    """A launch found its run owned: say so on stderr (it is waited for, never failed)."""
    if not as_json:
        click.echo(f"run {outcome.run_id!r} is running elsewhere: waiting for its end", err=True)


def report(
    outcomes: Sequence[Any], launcher: str, as_json: bool, extra: dict[str, Any] | None = None
) -> None:
    """The summary (or the JSON document), then exit 1 when a run did not complete."""
    from durable_core.cli.exitcodes import ExitCode
    from durable_core.launchers import FAILED_STATUSES

    counts = Counter(str(o.status) for o in outcomes)
    if as_json:
        document = {
            **(extra or {}),
            "launcher": launcher,
            "counts": dict(sorted(counts.items())),
            "runs": [o.to_json() for o in outcomes],
        }
        click.echo(json.dumps(document, indent=2))
    else:
        parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        noun = "run" if len(outcomes) == 1 else "runs"
        click.echo(f"{len(outcomes)} {noun} on {launcher}: {parts or 'none'}")
        if counts.get("submitted"):
            click.echo(
                "the runs go on on the cluster; follow them with 'durable list', continue "
                "those whose worker host vanished with 'durable recover'",
                err=True,
            )
    if any(o.status in FAILED_STATUSES for o in outcomes):
        sys.exit(ExitCode.RUN_FAILED)
