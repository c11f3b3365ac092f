"""``durable list``: every run of a store, with its status, revision and definition."""

from __future__ import annotations

import json
from typing import Any

import click

from durable_core.cli.options import json_option

__all__ = ["list_command"]


STATUSES = (
    "completed",
    "failed",
    "incomplete",
    "settled",
    "running",
    "waiting",
    "corrupt",
    "unreadable",
    "unknown",
)
"""The statuses ``--status`` takes (see docs/cli.md)."""


@click.command("list")
@click.argument("args", nargs=-1, metavar="[CONFIG]")
@click.option("--store", "store_url", metavar="URL", help="The store, instead of a CONFIG.")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(STATUSES),
    help="Only runs with this status (repeatable).",
)
@click.option("--since", metavar="AGE", help="Only runs last saved within AGE (30m, 12h, 7d).")
@click.option("--graph", "graph_name", metavar="NAME", help="Only runs of the graph NAME.")
@click.option(
    "--limit", type=click.IntRange(min=1), metavar="N", help="At most N runs, the newest."
)
@json_option()
def list_command(
    args: tuple[str, ...],
    store_url: str | None,
    statuses: tuple[str, ...],
    since: str | None,
    graph_name: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """List the runs of a store, newest first, with their status and revision.

    The store is the CONFIG's, the one given by --store URL, or the default file store.
    With a CONFIG, each run's definition is compared with the graph's (matches, differs), and
    the status of a run the graph wrote is judged against it (completed, failed, incomplete);
    a run of another graph is judged from its own record. Each record gets the integrity
    checks resume makes: a damaged one is shown as corrupt, with the reason. Each run is read
    through a short exclusive session; a run owned by a running process is shown as running.
    The default store lists no runs until the first run creates it; a CONFIG's or --store
    store that does not exist is an error (exit 4), as a mistyped location usually is.

    --status, --since, --graph and --limit choose the runs shown; the newest are read first,
    and with --limit reading stops once N runs are shown. A corrupt or unreadable run is shown
    whatever the filters say (it cannot be judged) and ends the command with exit 8.
    """
    import sys
    import time

    from durable_core.cli.context import plugin_manager
    from durable_core.cli.exitcodes import ExitCode
    from durable_core.cli.targets import (
        graph_of,
        require_existing_store,
        store_exists,
        store_target,
    )
    from durable_core.errors import ConfigError
    from durable_core.ops.maintenance import parse_age
    from durable_core.store import Capability, capabilities

    newer_than = time.time() - parse_age(since, "--since") if since is not None else None
    pm = plugin_manager()
    store_config, _, config = store_target(args, store_url, want_run_id=False, pm=pm)
    graph = graph_of(config)
    rows: list[dict[str, Any]] = []
    if store_url is None and config is None and not store_exists(store_config):
        # a fresh machine: the default store is made by the first run; nothing to list yet
        _print_rows(rows, store_config.describe(), as_json, graph)
        return
    require_existing_store(store_config)
    store = store_config.open(pm)
    try:
        if Capability.LIST_RUNS not in capabilities(store):
            raise ConfigError(
                f"the {store_config.describe()} cannot list its runs; inspect one run with "
                f"'durable inspect --store URL RUN_ID'"
            )
        if newer_than is not None and Capability.SAVE_TIMES not in capabilities(store):
            raise ConfigError(
                f"the {store_config.describe()} does not record when runs were saved: list it "
                "without --since"
            )
        shown = 0
        for summary in _newest_first(store, list(store.list_runs())):
            if newer_than is not None and getattr(summary, "error", None) is None:
                saved = _saved_at(store, summary.run_id)
                if saved is None or saved < newer_than:
                    continue
            row = list_row(store, summary, graph)
            damaged = row["status"] in ("corrupt", "unreadable")
            if not damaged and (
                (statuses and row["status"] not in statuses)
                or (graph_name is not None and row["graph"] != graph_name)
            ):
                continue
            rows.append(row)
            shown += not damaged  # a damaged run does not count towards --limit
            if limit is not None and shown >= limit:
                break
    finally:
        store.close()
    _print_rows(rows, store_config.describe(), as_json, graph)
    if any(r["status"] in ("corrupt", "unreadable") for r in rows):
        sys.exit(ExitCode.CORRUPT)


def _saved_at(store: Any, run_id: str) -> float | None:
    try:
        return store.saved_at(run_id)
    except Exception:  # a time is extra information: never fail the listing on it
        return None


def _newest_first(store: Any, summaries: list[Any]) -> list[Any]:
    """The runs by their last save, newest first (runs whose time is unknown, and records
    that could not be read, after them, by run id)."""
    from durable_core.store import Capability, capabilities

    timed = Capability.SAVE_TIMES in capabilities(store)

    def key(summary: Any) -> tuple[int, float, str]:
        if getattr(summary, "error", None) is not None or not timed:
            return (1, 0.0, summary.run_id or "")
        saved = _saved_at(store, summary.run_id)
        return (0, -saved, summary.run_id) if saved is not None else (1, 0.0, summary.run_id)

    return sorted(summaries, key=key)


def _print_rows(rows: list[dict[str, Any]], store: str, as_json: bool, graph: Any) -> None:
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"no runs in the {store}")
        return
    print_table(rows, with_definition=graph is not None)


def print_table(rows: list[dict[str, Any]], *, with_definition: bool) -> None:
    """The text table of ``list``; long reasons go below it, on stderr.

    CREATED is the store's time of the run's first save, else the run log's start; SAVED the
    store's time of its last save; DURATION the time between (see ``run_times``). All UTC.
    """
    from durable_core.cli.commands.inspect import span, when

    header = {
        "run_id": "RUN ID",
        "status": "STATUS",
        "revision": "REVISION",
        "format": "FORMAT",
        "confirmed": "CONFIRMED",
    }
    if with_definition:
        header["definition"] = "DEFINITION"
    header.update(created="CREATED", saved="SAVED", duration="DURATION")
    lines = [header] + [
        {
            "run_id": r["run_id"] or _unnamed(r["location"]),
            "status": r["status"],
            "revision": str(r["revision"]),
            "format": str(r["format"]),
            "confirmed": (
                "-"
                if r["root_nodes_confirmed"] is None
                else f"{r['root_nodes_confirmed']}"
                + (f"/{r['root_nodes_total']}" if r["root_nodes_total"] is not None else "")
            ),
            "definition": {None: "-", True: "matches", False: "differs"}[r["definition_matches"]],
            "created": when(r["times"].get("created") or r["times"].get("started")),
            "saved": when(r["times"].get("saved")),
            "duration": span(r["times"].get("duration_seconds")),
        }
        for r in rows
    ]
    widths = {k: max(len(line[k]) for line in lines) for k in header}
    for line in lines:
        click.echo("  ".join(line[k].ljust(widths[k]) for k in header).rstrip())
    # Long reasons go below the table, so that the table stays readable.
    for r in rows:
        if r["error"] is not None:
            click.echo(f"{r['run_id'] or r['location']}: {r['status']}: {r['error']}", err=True)
        if r.get("waiting") is not None:
            click.echo(f"{r['run_id']}: waiting for {r['waiting']['for']}")


def _unnamed(location: str) -> str:
    """The RUN ID cell of a record that could not be read: ``?`` and the end of where it is
    (its whole location is printed below the table), at most 24 characters."""
    tail = location.replace("\\", "/").rstrip("/").rpartition("/")[2] or location
    if len(tail) > 20:
        tail = "…" + tail[-19:]
    return f"? ({tail})" if tail else "?"


def list_row(store: Any, summary: Any, graph: Any) -> dict[str, Any]:
    """One run's row: read through a short exclusive session, checked as resume checks it."""
    from durable_core.cli.commands.inspect import run_times
    from durable_core.errors import (
        AcquireTimeoutError,
        BusyError,
        CorruptRecordError,
        NotFoundError,
    )
    from durable_core.ops.runinfo import RunStatus, check_record, describe_record

    row: dict[str, Any] = {
        "run_id": summary.run_id,
        "format": summary.format,
        "revision": summary.revision,
        "status": "",
        "root_nodes_confirmed": None,
        "root_nodes_total": None,
        "nodes_confirmed": None,
        "nodes_total": None,
        "definition_matches": None,
        "location": getattr(summary, "location", ""),
        "error": None,
        "times": {},
        "graph": None,
    }
    error = getattr(summary, "error", None)
    if error is not None:
        # listed, never skipped: keep the evidence and say where it is (E-1)
        row["status"], row["error"] = "unreadable", str(error)
        return row
    try:
        session = store.acquire(summary.run_id)
    except BusyError:
        row["status"] = str(RunStatus.RUNNING)
        row["times"] = run_times(store, summary.run_id)  # read without the run's session
        return row
    except AcquireTimeoutError:
        row["status"] = "unknown"
        row["error"] = "ownership could not be decided in time"
        return row
    with session:
        try:
            record = session.load()
        except NotFoundError:
            row["status"] = "gone"
            return row
        except CorruptRecordError as exc:
            row["status"], row["error"] = "corrupt", str(exc)
            return row
    try:
        check_record(record, summary.run_id, graph)
    except CorruptRecordError as exc:
        row["status"], row["error"] = "corrupt", str(exc)
        row["format"], row["revision"] = record.format, record.revision
        return row
    info = describe_record(record, graph)
    row["times"] = run_times(store, summary.run_id, record.root_scope)
    root = record.scopes.get(record.root_scope)
    row["graph"] = root.graph if root is not None else None
    row.update(
        format=info.format,
        revision=info.revision,
        status=info.status,
        root_nodes_confirmed=info.root_nodes_confirmed,
        root_nodes_total=info.root_nodes_total,
        nodes_confirmed=info.nodes_confirmed,
        nodes_total=info.nodes_total,
        definition_matches=info.definition_matches,
    )
    if info.status in (RunStatus.INCOMPLETE, RunStatus.SETTLED):
        from durable_core.durable.waiting import waiting_row

        waiting_row(store, summary.run_id, row)
    return row
