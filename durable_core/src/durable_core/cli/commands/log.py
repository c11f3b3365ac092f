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
    """Print the run log of RUN_ID: when it started and resumed, each attempt, each failed
    try's error, each node's duration, how it ended.

    The run is named as for inspect: CONFIG (its run id, or RUN_ID after it), --store URL
    RUN_ID, or RUN_ID alone; --run-id ID is the same as RUN_ID. The log is the run's history in
    that store (see docs/operations.md): every host sharing the store sees the same one, and a
    run of the same id in another store has its own. It is written by the plugin 'runlog'. A
    failed try shows its error and where it failed (file:line); --traceback adds its
    traceback. With --follow, new events are printed as they come until the run finishes (or
    Ctrl-C). --json prints one JSON object per line (a failed try's "where" and "traceback"
    included).
    """
    from durable_core.cli.context import plugin_manager
    from durable_core.cli.targets import not_found, require_existing_store, store_target
    from durable_core.errors import NotFoundError
    from durable_core.history import root_scope_of
    from durable_core.plugins.runlog import read_log

    pm = plugin_manager()
    store_config, run_id, _ = store_target(
        with_run_id(args, run_id_option), store_url, want_run_id=True, pm=pm
    )
    assert run_id is not None
    require_existing_store(store_config)
    store = store_config.open(pm)
    try:
        root_scope = None
        while root_scope is None:
            try:
                root_scope = root_scope_of(store, run_id)
            except NotFoundError as exc:
                if not follow:
                    raise not_found(run_id, store_config) from exc
                time.sleep(0.2)  # --follow: wait for the run to start
        shown = 0
        while True:
            entries = read_log(store, run_id, root_scope)
            if not entries and shown == 0 and not follow:
                raise NotFoundError(
                    f"run {run_id!r} in the {store_config.describe()} has no run log: it was "
                    "made where the plugin 'runlog' was blocked, or copied from another store"
                )
            finished = False
            for entry in entries[shown:]:
                click.echo(json.dumps(entry) if as_json else format_entry(entry, tracebacks))
                finished = entry.get("event") == "run_finished"
            shown = max(shown, len(entries))
            if not follow or finished:
                return
            time.sleep(0.2)
    finally:
        store.close()


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
        parts.append(f"ran {entry['seconds']:.3f} s")
    if "waiting" in entry:
        parts.append(f"waited {entry['waiting']:.3f} s")
    if "status" in entry:
        parts.append(str(entry["status"]))
    if entry.get("event") == "definition":
        nodes = sum(1 for name in entry.get("parts") or () if str(name).startswith("node:"))
        parts.append(f"fingerprint {str(entry.get('definition', '?'))[:12]}…, {nodes} nodes")
    if entry.get("event") == "inputs":
        count = len(entry.get("keys") or ())
        parts.append(f"fingerprint {str(entry.get('inputs', '?'))[:12]}…, {count} inputs")
    parts.append(f"rev {entry.get('revision', '?')}")
    line = "  ".join(parts)
    if "error" in entry:
        line += f"\n    {entry['error']}"
    if entry.get("where"):
        line += f"\n    at {entry['where']}"
    if traceback and entry.get("traceback"):
        line += "\n" + "\n".join(f"    | {t}" for t in str(entry["traceback"]).splitlines())
    return line
