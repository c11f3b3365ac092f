"""``durable delete``: remove runs through their exclusive sessions."""

from __future__ import annotations

import json
import sys

import click

from durable_core.cli.options import json_option

__all__ = ["delete_command"]


@click.command("delete")
@click.argument("args", nargs=-1, metavar="[CONFIG] RUN_ID...")
@click.option("--store", "store_url", metavar="URL", help="The store, instead of a CONFIG.")
@click.option(
    "--run-id",
    "run_id_options",
    multiple=True,
    metavar="ID",
    help="A run to delete (same as RUN_ID; repeatable).",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option()
def delete_command(
    args: tuple[str, ...],
    store_url: str | None,
    run_id_options: tuple[str, ...],
    yes: bool,
    as_json: bool,
) -> None:
    """Delete runs: their records and their own lock entries. It cannot be undone.

    Each run is removed through its exclusive session: a run owned by a running process is
    refused (exit 3) and left intact. The store must support deleting (the file, SQLite,
    PostgreSQL and memory stores do).
    """
    from durable_core.cli.context import plugin_manager
    from durable_core.cli.targets import (
        busy,
        not_found,
        require_existing_store,
        split_store_args,
        store_words,
    )
    from durable_core.errors import BusyError, NotFoundError
    from durable_core.ops.maintenance import delete_run, each

    pm = plugin_manager()
    store_config, config, run_ids = split_store_args(args, store_url, pm)
    run_ids = (*run_ids, *run_id_options)
    named = store_words(args[0] if config is not None else None, store_url)
    if not run_ids:
        raise click.UsageError("give the RUN_ID of each run to delete")
    where = store_config.describe()
    require_existing_store(store_config)
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("give --yes to delete without a prompt")
        click.confirm(
            f"delete {len(run_ids)} run(s) from the {where}? This cannot be undone", abort=True
        )
    store = store_config.open(pm)
    deleted = []
    try:
        for run_id in each(run_ids):
            try:
                record = delete_run(store, run_id, store_name=where)
            except BusyError as exc:
                raise busy(run_id, store_config, exc, named) from exc
            except NotFoundError as exc:
                raise not_found(run_id, store_config) from exc
            revision = record.revision if record is not None else None
            deleted.append({"run_id": run_id, "revision": revision})
            if not as_json:
                what = f"revision {revision}" if revision is not None else "a corrupt record"
                click.echo(f"deleted run {run_id!r} ({what}) from the {where}")
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps({"store": where, "deleted": deleted}, indent=2))
