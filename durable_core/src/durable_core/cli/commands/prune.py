"""``durable prune``: delete finished runs, optionally only those saved long ago."""

from __future__ import annotations

import datetime
import json
import sys
import time
from typing import Any

import click

from durable_core.cli.options import json_option

__all__ = ["prune_command"]


@click.command("prune")
@click.argument("args", nargs=-1, metavar="[CONFIG]")
@click.option("--store", "store_url", metavar="URL", help="The store, instead of a CONFIG.")
@click.option("--finished", is_flag=True, help="Required: prune only finished runs.")
@click.option("--older-than", "older_than", metavar="AGE", help="Last saved before AGE (7d, 12h).")
@click.option("--dry-run", is_flag=True, help="Only say what would be deleted.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option()
def prune_command(
    args: tuple[str, ...],
    store_url: str | None,
    finished: bool,
    older_than: str | None,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Delete the finished runs of a store (completed, or failed for good).

    A run counts as finished when a node of its root graph failed for good, or, with the
    CONFIG of the graph that wrote it, when every node is confirmed. Running, incomplete,
    corrupt and unreadable runs are never pruned. With --older-than, only runs last saved
    longer ago than AGE are (by the store's own times: the file store's record file time, the
    SQLite and PostgreSQL stores' saved_at column); a run whose save time is not known is
    kept. Each run is deleted through its exclusive session. A run owned by another process
    cannot be judged or deleted: it is kept and named with its owner, and the command ends
    with exit 3 once the others are done.
    """
    from durable_core.cli.commands.list import list_row
    from durable_core.cli.context import plugin_manager
    from durable_core.cli.exitcodes import ExitCode
    from durable_core.cli.targets import (
        busy,
        graph_of,
        require_existing_store,
        store_target,
        store_words,
    )
    from durable_core.errors import BusyError, ConfigError, NotFoundError
    from durable_core.ops.maintenance import delete_run, parse_age
    from durable_core.store import Capability, capabilities

    if not finished:
        raise click.UsageError("prune deletes only finished runs: give --finished")
    age = parse_age(older_than) if older_than is not None else None
    pm = plugin_manager()
    store_config, _, config = store_target(args, store_url, want_run_id=False, pm=pm)
    named = store_words(args[0] if config is not None else None, store_url)
    graph = graph_of(config)
    where = store_config.describe()
    require_existing_store(store_config)
    store = store_config.open(pm)
    chosen: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []  # owned by another process: kept, named, exit 3
    try:
        if Capability.LIST_RUNS not in capabilities(store):
            raise ConfigError(f"the {where} cannot list its runs, so it cannot be pruned")
        if age is not None and Capability.SAVE_TIMES not in capabilities(store):
            raise ConfigError(
                f"the {where} does not record when runs were saved: prune it without --older-than"
            )
        now = time.time()
        for summary in store.list_runs():
            row = list_row(store, summary, graph)
            if age is not None and row["status"] in ("completed", "failed", "running"):
                saved = store.saved_at(summary.run_id)  # type: ignore[union-attr]
                if saved is None or now - saved < age:
                    continue  # kept whatever its state: not known to be old enough
                row["saved_at"] = saved
            if row["status"] == "running":
                # Owned by another process: whether it is finished cannot be told. Name it.
                owned = _owned(store, summary.run_id)
                if owned is not None:
                    refusal = busy(summary.run_id, store_config, owned, named)
                    row.update(deleted=False, error=f"BusyError: {refusal}")
                    skipped.append(row)
                    continue
                saved_at = row.get("saved_at")  # let go meanwhile: judge it now
                row = list_row(store, summary, graph)
                if saved_at is not None:
                    row["saved_at"] = saved_at
            if row["status"] not in ("completed", "failed"):
                continue
            chosen.append(row)
        if not dry_run and chosen and not yes:
            if not sys.stdin.isatty():
                raise click.UsageError("give --yes to prune without a prompt (or --dry-run)")
            click.confirm(f"delete {len(chosen)} finished run(s) from the {where}?", abort=True)
        for row in chosen:
            row["deleted"] = False
            if dry_run:
                continue
            try:
                delete_run(store, row["run_id"], store_name=where)
                row["deleted"] = True
            except BusyError as exc:  # taken meanwhile: kept, named, and exit 3 at the end
                row["error"] = f"BusyError: {busy(row['run_id'], store_config, exc, named)}"
                skipped.append(row)
            except NotFoundError as exc:  # removed meanwhile: keep going
                row["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        store.close()
    # every run prune chose or had to keep, in the order list shows them
    listed = sorted(chosen + [r for r in skipped if all(r is not c for c in chosen)], key=_listing)
    if as_json:
        click.echo(json.dumps({"store": where, "dry_run": dry_run, "runs": listed}, indent=2))
    else:
        _report(listed, chosen, where, dry_run)
    if skipped:
        if not as_json:
            click.echo(
                f"kept {len(skipped)} run(s) owned by another process; prune again once they "
                "are let go",
                err=True,
            )
        raise SystemExit(int(ExitCode.BUSY))


def _listing(row: dict[str, Any]) -> tuple[str, str]:
    return (row["run_id"] or "", row.get("location", ""))


def _owned(store: Any, run_id: str) -> Any:
    """The :class:`~durable_core.errors.BusyError` of a run another session owns, or ``None``
    when it is free now (a session taken and closed at once: it writes nothing)."""
    from durable_core.errors import BusyError

    try:
        session = store.acquire(run_id)
    except BusyError as exc:
        return exc
    session.close()
    return None


def _report(
    listed: list[dict[str, Any]], chosen: list[dict[str, Any]], where: str, dry_run: bool
) -> None:
    from durable_core.cli.commands.inspect import when

    verb = "would delete" if dry_run else "deleted"
    for row in listed:
        if row.get("error"):
            click.echo(f"kept {row['run_id']!r}: {row['error']}", err=True)
        else:
            saved = ""
            if "saved_at" in row:
                stamp = datetime.datetime.fromtimestamp(row["saved_at"], datetime.UTC)
                saved = f", last saved {stamp:%Y-%m-%dT%H:%M:%SZ}"
            elif (row.get("times") or {}).get("saved"):  # the store's time, as list shows it
                saved = f", last saved {when(row['times']['saved'])}"
            click.echo(
                f"{verb} {row['run_id']!r} ({row['status']}, revision {row['revision']}{saved})"
            )
    if not chosen:
        click.echo(f"no finished runs to prune in the {where}")
