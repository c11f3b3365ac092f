"""``durable cancel``: ask the owner of a running run to stop cleanly."""

from __future__ import annotations

import json

import click

from durable_core.cli.options import json_option, run_id_option, with_run_id

__all__ = ["cancel_command"]


@click.command("cancel")
@click.argument("args", nargs=-1, metavar="[CONFIG] [RUN_ID]")
@click.option("--store", "store_url", metavar="URL", help="The store, instead of a CONFIG.")
@run_id_option()
@json_option()
def cancel_command(
    args: tuple[str, ...], store_url: str | None, run_id_option: str | None, as_json: bool
) -> None:
    """Ask the process running RUN_ID to stop cleanly, as Ctrl-C would.

    The owner (a 'durable run', 'resume' or 'fork' of this store, here or — with PostgreSQL —
    on another host) watches for the request while the run executes: no new node starts,
    running bodies are canceled cooperatively, nothing confirmed is lost, and the run stays
    resumable. The command does not wait. A run that is not running has nothing to cancel.
    """
    from durable_core.cli.context import plugin_manager
    from durable_core.cli.targets import require_existing_store, split_store_args
    from durable_core.errors import BusyError, ConfigError
    from durable_core.store import Capability, capabilities

    pm = plugin_manager()
    store_config, config, rest = split_store_args(with_run_id(args, run_id_option), store_url, pm)
    if not rest and config is not None:
        rest = (config.run_id,)
    if len(rest) != 1:
        raise click.UsageError("give the RUN_ID of the run to cancel")
    (run_id,) = rest
    where = store_config.describe()
    require_existing_store(store_config)
    store = store_config.open(pm)
    try:
        if Capability.CANCEL_REQUESTS not in capabilities(store):
            raise ConfigError(f"the {where} cannot pass a stop request to a run's owner")
        try:
            session = store.acquire(run_id)
        except BusyError:
            store.request_cancel(run_id)
            requested = True
        else:
            session.close()
            requested = False
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps({"run_id": run_id, "store": where, "requested": requested}))
    elif requested:
        click.echo(
            f"asked the owner of run {run_id!r} to stop; it stops cleanly and the run stays "
            "resumable (watch it with 'durable list' or 'durable log')"
        )
    else:
        click.echo(f"run {run_id!r} is not running in the {where}: nothing to cancel")
