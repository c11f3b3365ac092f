"""``durable inspect``: one run's metadata, read through an exclusive session, never saved."""

from __future__ import annotations

import json
from typing import Any

import click

from durable_core.cli.options import json_option, run_id_option, with_run_id

__all__ = ["inspect_command"]


@click.command("inspect")
@click.argument("args", nargs=-1, metavar="[CONFIG] [RUN_ID]")
@click.option("--store", "store_url", metavar="URL", help="The store, instead of a CONFIG.")
@run_id_option()
@click.option(
    "--peek",
    is_flag=True,
    help="Read the last committed record without taking ownership (for a running run).",
)
@click.option(
    "--nodes",
    "show_nodes",
    is_flag=True,
    help="Show each node: its state, tries, start, time running and waiting, last error.",
)
@json_option()
def inspect_command(
    args: tuple[str, ...],
    store_url: str | None,
    run_id_option: str | None,
    peek: bool,
    show_nodes: bool,
    as_json: bool,
) -> None:
    """Show a run's metadata: revision, version, scopes, attempts, confirmed nodes, streams.

    The store is the CONFIG's (the run id defaults to the config's), the one given by
    --store URL, or the default file store. The run id may also be given as --run-id ID, as
    for run and resume. The run is read through an exclusive session and never saved;
    business values are never shown. The record gets the integrity checks resume makes: a
    corrupt one is reported as such (exit 8). A run owned by a running process is reported
    busy at once (exit 3); --peek reads its last committed record instead, without taking
    ownership and never writing (the view may be one save old). What runs is shown from the
    run's history (a running node's attempt is in the record only from its first save).
    --nodes shows each node of the root graph and of its Sub graphs, by path: its state
    (confirmed, restored, skipped, failed, running, waiting for its inputs, canceled,
    interrupted, not started), its Retry tries and message tries, when it started, its time
    running and its time waiting for inputs, and its last error with where it failed.
    """
    from durable_core.cli.context import plugin_manager
    from durable_core.cli.targets import (
        graph_of,
        load_record,
        require_existing_store,
        store_target,
        store_words,
    )
    from durable_core.errors import CorruptRecordError
    from durable_core.ops.runinfo import check_record, describe_record

    args = with_run_id(args, run_id_option)
    pm = plugin_manager()
    store_config, run_id, config = store_target(args, store_url, want_run_id=True, pm=pm)
    assert run_id is not None
    graph = graph_of(config)
    require_existing_store(store_config)
    store = store_config.open(pm)
    try:
        if peek:
            record = peek_record(store_config, store, run_id)
        else:
            named = store_words(args[0] if config is not None else None, store_url)
            record = load_record(store_config, store, run_id, named)
        try:
            check_record(record, run_id, graph)
        except CorruptRecordError as exc:
            raise CorruptRecordError(
                f"run {run_id!r} in the {store_config.describe()} is corrupt: {exc}",
                path=exc.path,
                rule=exc.rule,
            ) from exc
        # the history of this run in this store (keyed by its root scope), read once
        from durable_core.plugins.runlog import read_log

        try:
            entries = read_log(store, run_id, record.root_scope)
        except Exception:  # the history is extra information: never fail inspect on it
            entries = []
        times = run_times(store, run_id, entries=entries)
        info = describe_record(record, graph, explain_mismatch=True, store=store, plugins=pm)
        from durable_core.durable.waitview import describe_waits, print_waits

        try:
            waits = describe_waits(store, record, graph if info.definition_matches else None)
        except Exception:  # extra information: never fail inspect on it
            waits = {"inboxes": [], "timers": [], "waiting": None}
    finally:
        store.close()
    failures = _last_failures(entries, info)
    import time

    from durable_core.ops.nodeview import NodeState, describe_nodes

    nodes = describe_nodes(
        record,
        graph if info.definition_matches else None,
        entries,
        live=peek,
        now=time.time(),
    )
    in_flight = [n for n in nodes if n.state in (NodeState.RUNNING, NodeState.WAITING)]
    if as_json:
        data = info.to_json()
        data["store"] = store_config.describe()
        data["peeked"] = peek
        data["times"] = times
        data["last_failures"] = failures
        data["in_flight"] = [
            {"path": n.path, "state": n.state, "started": n.started} for n in in_flight
        ]
        if show_nodes:
            data["nodes"] = [n.to_json() for n in nodes]
        data.update(waits)
        click.echo(json.dumps(data, indent=2))
        return
    if peek:
        click.echo(
            "note: peeked without taking ownership: a running run may already have saved a "
            "newer revision",
            err=True,
        )
    print_info(info, store_config.describe(), waiting=waits.get("waiting") is not None)
    print_waits(waits, click.echo)
    if times:
        shown = [
            f"{label} {show(times[key])}"
            for key, label, show in (
                ("created", "created", when),
                ("saved", "saved", when),
                ("duration_seconds", "duration", span),
                ("started", "started", when),
                ("last_event", "last event", when),
            )
            if key in times
        ]
        click.echo("times      " + ", ".join(shown))
    if failures:
        click.echo("last failure of each node not confirmed (from the run log):")
        for node, entry in sorted(failures.items()):
            click.echo(f"  {node}  try {entry.get('attempt', '?')} at {entry.get('time', '?')}")
            click.echo(f"    {entry.get('error', '(no error text)')}")
            if entry.get("where"):
                click.echo(f"    at {entry['where']}")
    if in_flight:
        click.echo(
            f"in flight  {len(in_flight)} (from the run log; a running node's attempt is in the "
            "record only from its first save):"
        )
        for n in in_flight:
            if n.state == NodeState.RUNNING:
                click.echo(f"  {n.path}  running for {span(n.running_seconds)}")
            else:
                click.echo(f"  {n.path}  waiting for its inputs for {span(n.waiting_seconds)}")
    if show_nodes:
        print_nodes(nodes)


def print_nodes(nodes: Any) -> None:
    """The text form of ``inspect --nodes``: a row per node, its last error below it."""
    click.echo("nodes (from the record and the run log):")
    header = ("NODE", "STATE", "TRIES", "STARTED", "RUNNING", "WAITING")
    rows = []
    for n in nodes:
        plural = "try" if n.retry_tries == 1 else "tries"
        tries = [f"{n.retry_tries} Retry {plural}" if n.retry_tries else ""]
        if n.message_tries_failed:
            tries.append(f"{n.message_tries_failed} failed message tries")
        if n.message_tries:
            tries.append(f"{n.message_tries} message tries in the record")
        rows.append(
            (
                n.path,
                n.state,
                ", ".join(t for t in tries if t) or "-",
                when(n.started),
                span(n.running_seconds),
                span(n.waiting_seconds),
            )
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for index, r in enumerate([header, *rows]):
        click.echo("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        n = nodes[index - 1] if index else None
        if n is not None and n.last_error:
            click.echo(f"      last error: {n.last_error}")
            if n.where:
                click.echo(f"      at {n.where}")


def run_times(
    store: Any, run_id: str, root_scope: str | None = None, *, entries: Any = None
) -> dict[str, Any]:
    """What is known of a run's times, only what is known (ISO 8601 times in UTC):

    - ``created`` and ``saved``: when the run's first record and its last one were saved, from
      the store (``CreateTimes``/``SaveTimes``: SQLite and PostgreSQL columns; the file store
      knows only ``saved``, its record file's time);
    - ``started`` and ``last_event``: from the run's history in that store (the run whose
      record has ``root_scope``; None: the current record's; ``entries``: the history already
      read);
    - ``duration_seconds``: from ``created`` to ``saved`` where the store knows both, else from
      ``started`` to ``last_event``.
    """
    import datetime

    from durable_core.ops.maintenance import stored_times
    from durable_core.plugins.runlog import log_times

    times = log_times(store, run_id, root_scope, entries=entries)
    try:
        created, saved = stored_times(store, run_id)
    except Exception:  # the times are extra information: never fail inspect/list on them
        created = saved = None
    for key, value in (("created", created), ("saved", saved)):
        if value is not None:
            times[key] = datetime.datetime.fromtimestamp(value, datetime.UTC).isoformat()
    if created is not None and saved is not None:
        times["duration_seconds"] = round(max(saved - created, 0.0), 3)
    return times


def when(iso: str | None) -> str:
    """An ISO 8601 time as ``2026-12-01T11:43:07Z`` (UTC, whole seconds); ``-`` for None."""
    import datetime

    if not iso:
        return "-"
    moment = datetime.datetime.fromisoformat(iso).astimezone(datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def span(seconds: float | None) -> str:
    """A duration in seconds as ``0.04s``, ``4.2s``, ``12s``, ``3m04s``, ``2h05m`` or ``3d04h``."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds:.2f}s"
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    for unit, size, small, small_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if whole >= size:
            return f"{whole // size}{unit}{(whole % size) // small_size:02d}{small}"
    if whole >= 60:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole}s"


def peek_record(store_config: Any, store: Any, run_id: str) -> Any:
    """The last committed record, read without a session (``RecordPeeker``)."""
    from durable_core.cli.targets import not_found
    from durable_core.errors import ConfigError, NotFoundError
    from durable_core.store import Capability, capabilities

    if Capability.PEEK not in capabilities(store):
        raise ConfigError(
            f"the {store_config.describe()} cannot be read without taking a run's ownership; "
            "inspect without --peek once the run is not running"
        )
    try:
        return store.peek(run_id)
    except NotFoundError as exc:
        raise not_found(run_id, store_config) from exc


def _last_failures(entries: Any, info: Any) -> dict[str, Any]:
    """Each node's last failed try from the run's history (``entries``), for nodes the record
    has not confirmed."""
    from durable_core.plugins.runlog import last_failures

    confirmed = {
        f"{scope.path}/{node}" if scope.path else node
        for scope in info.scopes
        for node in (*scope.confirmed, *scope.skipped)
    }
    return {
        node: {k: entry[k] for k in ("time", "attempt", "error", "where") if k in entry}
        for node, entry in last_failures(None, info.run_id, entries=entries).items()
        if node not in confirmed
    }


def _change_lines(changes: dict[str, Any] | None) -> list[str]:
    """What changed in the definition, a line each (none when it matches or is unknown)."""
    if changes is None:
        return []
    from durable_core.durable.definition_diff import describe_changes

    complete = bool(changes["complete"])
    lines = describe_changes(
        {kind: tuple(paths) for kind, paths in changes.items() if kind != "complete"}, complete
    )
    if complete and not lines:
        lines.append("no node, key, input or graph-wide aspect differs (the format changed)")
    if not complete:
        lines.append(
            "other changes are not known: the definition the run started with is not in the "
            "run's history (the run log keeps it when the plugin 'runlog' is on)"
        )
    return lines


def print_info(info: Any, store: str, *, waiting: bool = False) -> None:
    """The text form of :class:`~durable_core.ops.runinfo.RunInfo`; ``waiting``: the run
    ended its last process waiting (its status reads ``waiting``, as in ``durable list``)."""

    def row(label: str, value: object) -> None:
        click.echo(f"{label:<11}{value}")

    row("run", info.run_id)
    row("store", store)
    row("format", info.format)
    row("revision", info.revision)
    row("version", info.version or "(empty)")
    status = "waiting" if waiting and info.status == "incomplete" else info.status
    if info.root_nodes_total is not None:
        status += f" ({info.root_nodes_confirmed} of {info.root_nodes_total} root nodes confirmed"
        if info.nodes_total is not None and info.nodes_total != info.root_nodes_total:
            # as 'durable run' and its progress count: Sub graphs' nodes too
            status += f"; {info.nodes_confirmed} of {info.nodes_total} nodes in all"
        status += ")"
    elif info.definition_matches is False:
        status += (
            f" ({info.root_nodes_confirmed} root nodes confirmed; judged from the record alone: "
            "another graph, or another version of it, wrote this run)"
        )
    row("status", status)
    match = {None: "", True: "  (matches the graph)", False: "  (differs from the graph)"}
    row("definition", (info.definition or "(empty)") + match[info.definition_matches])
    for index, line in enumerate(_change_lines(info.definition_changes)):
        row("changes" if index == 0 else "", line)
    row("inputs", info.inputs or "(empty)")
    a = info.attempts
    row(
        "attempts",
        f"{sum(a.values())}: {a['confirmed']} confirmed, {a['active']} active, "
        f"{a['failed']} failed; {info.retries} {'retry' if info.retries == 1 else 'retries'}",
    )
    row("scopes", len(info.scopes))
    for scope in info.scopes:
        where = scope.path or "(root)"
        void = "  [void: an attempt above it failed]" if scope.void else ""
        click.echo(f"  {where}  graph {scope.graph!r}{void}")
        click.echo(f"    confirmed {len(scope.confirmed)}: {', '.join(scope.confirmed) or '-'}")
        if scope.skipped:
            click.echo(f"    skipped {len(scope.skipped)}: {', '.join(scope.skipped)}")
    if info.open_attempts:
        click.echo("open attempts (active or failed):")
        for att in info.open_attempts:
            kind = "root" if not att.boundary else f"retry at {att.boundary}"
            node = f"{att.scope_path}/{att.node_id}" if att.scope_path else att.node_id
            click.echo(f"  {att.state:<9} {node}  {kind} {att.index}/{att.limit}")
    row("streams", len(info.streams))
    for s in info.streams:
        node = f"{s.scope_path}/{s.node_id}" if s.scope_path else s.node_id
        if not s.group:  # the producer's own entry: what it sent, never acks
            click.echo(
                f"  {node}.{s.key} writer: generation {s.generation}, sent {s.last_sequence}, "
                f"{s.terminal}"
            )
            continue
        click.echo(
            f"  {node}.{s.key} group {s.group!r}: generation {s.generation}, sent "
            f"{s.last_sequence}, acked through {s.acked_through}, {s.pending} pending, "
            f"{s.terminal}"
        )
    m = info.messages
    row(
        "messages",
        f"{sum(m.values())}: {m['confirmed']} confirmed, {m['active']} active, "
        f"{m['failed']} failed; {info.managed} managed containers",
    )
