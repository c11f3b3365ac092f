"""``durable migrate``: copy runs between stores, revisions kept, nothing overwritten."""

from __future__ import annotations

import json

import click

from durable_core.cli.options import json_option

__all__ = ["migrate_command"]


@click.command("migrate")
@click.argument("run_ids", nargs=-1, metavar="[RUN_ID...]")
@click.option("--from", "source_url", required=True, metavar="URL", help="The store to copy from.")
@click.option("--to", "destination_url", required=True, metavar="URL", help="The store to copy to.")
@json_option()
def migrate_command(
    run_ids: tuple[str, ...], source_url: str, destination_url: str, as_json: bool
) -> None:
    """Copy runs (every run of the source when no RUN_ID is given) to another store.

    Each run is read through an exclusive session on the source (a running run is refused,
    exit 3), gets the integrity checks resume makes, and is written at the destination under
    its own session with its revision kept, only if the destination has no record of it
    (else exit 5). The source is never changed: delete the runs there once you are satisfied.
    """
    from durable_core.cli.context import plugin_manager
    from durable_core.cli.exitcodes import exit_code_for
    from durable_core.cli.targets import require_existing_store
    from durable_core.config import parse_store_url
    from durable_core.errors import ConfigError, DurableError
    from durable_core.ops.maintenance import each, migrate_run
    from durable_core.ops.runinfo import check_record
    from durable_core.store import Capability, capabilities

    pm = plugin_manager()
    source_config = parse_store_url(source_url, pm=pm)
    destination_config = parse_store_url(destination_url, pm=pm)
    if source_config.describe() == destination_config.describe():
        raise ConfigError("--from and --to name the same store; nothing to migrate")
    require_existing_store(source_config)
    source = source_config.open(pm)
    try:
        destination = destination_config.open(pm)
    except BaseException:
        source.close()
        raise
    results = []
    first_error: BaseException | None = None
    try:
        if not run_ids:
            if Capability.LIST_RUNS not in capabilities(source):
                raise ConfigError(
                    f"the {source_config.describe()} cannot list its runs; name the runs to copy"
                )
            run_ids = tuple(s.run_id for s in source.list_runs() if s.run_id)
        for run_id in each(run_ids):
            try:
                moved = migrate_run(
                    source,
                    destination,
                    run_id,
                    check=lambda record, run_id=run_id: check_record(record, run_id),
                    destination_name=destination_config.describe(),
                )
                row = {"run_id": run_id, "revision": moved.revision, "outcome": "copied"}
                if not as_json:
                    click.echo(f"copied run {run_id!r} (revision {moved.revision})")
            except DurableError as exc:
                first_error = first_error or exc
                row = {
                    "run_id": run_id,
                    "revision": None,
                    "outcome": "refused",
                    "error": f"{type(exc).__name__}: {exc}",
                }
                if not as_json:
                    click.echo(f"run {run_id!r} not copied: {type(exc).__name__}: {exc}", err=True)
            results.append(row)
    finally:
        destination.close()
        source.close()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "from": source_config.describe(),
                    "to": destination_config.describe(),
                    "runs": results,
                },
                indent=2,
            )
        )
    elif not results:
        click.echo(f"no runs in the {source_config.describe()}")
    if first_error is not None:
        raise SystemExit(int(exit_code_for(first_error)))
