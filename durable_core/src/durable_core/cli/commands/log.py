"""``durable log``: a run's event log (times, failed tries and their errors, durations)."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from durable_core.cli.options import json_option, run_id_option, with_run_id

__all__ = ["log_command"]


@click.command("log")
@click.argument("args", nargs=-1, metavar="[CONFIG] [RUN_ID]")
@click.option("--store", "store_url", metavar="URL", help="The store, instead of a CONFIG.")
@run_id_option()
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events until the run ends.")
@click.option(
    "--traceback", "tracebacks", is_flag=True, help="Print each failed try's traceback too."
)
@json_option()
def log_command(
    args: tuple[str, ...],
    store_url: str | None,
    run_id_option: str | None,
    follow: bool,
    tracebacks: bool,
    as_json: bool,
) -> None:
    """Print the run log of RUN_ID on this machine: when it started and resumed, each attempt,
    each failed try's error, each node's duration, how it ended.

    The run is named as for inspect: CONFIG (its run id, or RUN_ID after it), --store URL
    RUN_ID, or RUN_ID alone; --run-id ID is the same as RUN_ID. The log is kept next to the
    stores (see docs/operations.md), written by the plugin 'runlog'. A failed try shows its
    error and where it failed (file:line); --traceback adds its traceback. With --follow, new
    events are printed as they come until the run finishes (or Ctrl-C). --json prints one JSON
    object per line (a failed try's "where" and "traceback" included).
    """
    from durable_core.cli.targets import store_target
    from durable_core.errors import NotFoundError
    from durable_core.runlog import log_path

    _, run_id, _ = store_target(with_run_id(args, run_id_option), store_url, want_run_id=True)
    assert run_id is not None

    path = log_path(run_id)
    if not path.exists() and not follow:
        raise NotFoundError(
            f"no run log of run {run_id!r} at {path}: the run never ran on this machine, or "
            "the plugin 'runlog' is blocked"
        )
    offset = 0
    while True:
        finished = False
        if path.exists():
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]  # never print a torn last line
            offset += len(complete)
            for raw in complete.splitlines():
                try:
                    entry = json.loads(raw)
                except json.JSONDecodeError:
                    continue
                click.echo(json.dumps(entry) if as_json else format_entry(entry, tracebacks))
                finished = entry.get("event") == "run_finished"
        if not follow or finished:
            return
        time.sleep(0.2)


def format_entry(entry: dict[str, Any], traceback: bool = False) -> str:
    """One entry of ``durable log``: a line, and for a failed try its error, where it failed
    and (``traceback``) its traceback on the lines below."""
    parts = [str(entry.get("time", "?")), f"{entry.get('event', '?'):<15}"]
    if "node" in entry:
        parts.append(str(entry["node"]))
    if "sequence" in entry:
        parts.append(f"message {entry['sequence']}")
    if "attempt" in entry:
        parts.append(f"try {entry['attempt']}")
    if "seconds" in entry:
        parts.append(f"{entry['seconds']:.3f} s")
    if "status" in entry:
        parts.append(str(entry["status"]))
    if entry.get("event") == "definition":
        nodes = sum(1 for name in entry.get("parts") or () if str(name).startswith("node:"))
        parts.append(f"fingerprint {str(entry.get('definition', '?'))[:12]}…, {nodes} nodes")
    parts.append(f"rev {entry.get('revision', '?')}")
    line = "  ".join(parts)
    if "error" in entry:
        line += f"\n    {entry['error']}"
    if entry.get("where"):
        line += f"\n    at {entry['where']}"
    if traceback and entry.get("traceback"):
        line += "\n" + "\n".join(f"    | {t}" for t in str(entry["traceback"]).splitlines())
    return line
