"""``durable send``: post a message to a run's inbox, and wake the run when it waits."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import click

from durable_core.cli.options import json_option

__all__ = ["send_command", "wake_on_launcher"]


def wake_on_launcher(launcher: str, config_arg: str, run_id: str, store_url: str | None) -> Any:
    """Resume the waiting run ``run_id`` on ``launcher`` (``--on``) instead of in this process.

    The run is submitted like any (``run_or_resume`` with ``suspend``, see
    :func:`durable_core.launchers.submit`), with its config's inputs; a cluster's run goes on
    after this command returns, a local launcher's ends first.

    Returns:
        The run's :class:`~durable_core.launchers.RunOutcome`.

    Raises:
        ConfigError, PluginError, UnsharedStoreError: as ``durable submit``.
    """
    from durable_core.cli.context import plugin_manager
    from durable_core.launchers import RunSpec, submit

    (outcome,) = submit(
        config_arg,
        [RunSpec(run_id=run_id)],
        on=launcher,
        store=store_url,
        wait=False,
        suspend=True,
        pm=plugin_manager(),
    )
    click.echo(f"run {run_id!r} was waiting: {outcome.status} on {launcher}", err=True)
    return outcome


@click.command("send")
@click.argument("config_arg", metavar="CONFIG")
@click.argument("run_id", metavar="RUN_ID")
@click.argument("key_name", metavar="KEY")
@click.argument("value_json", metavar="VALUE_JSON")
@click.option(
    "--idempotency-key",
    metavar="K",
    help="Name this post: sending K again changes nothing and prints the first sequence.",
)
@click.option(
    "--on",
    "launcher",
    metavar="LAUNCHER",
    help="Resume a waiting run on this launcher instead of in this process.",
)
@click.option(
    "--no-wake", is_flag=True, help="Only post; leave a waiting run waiting (recover wakes it)."
)
@click.option("--store", "store_url", metavar="URL", help="The store, instead of the config's.")
@json_option()
def send_command(
    config_arg: str,
    run_id: str,
    key_name: str,
    value_json: str,
    idempotency_key: str | None,
    launcher: str | None,
    no_wake: bool,
    store_url: str | None,
    as_json: bool,
) -> None:
    """Post VALUE_JSON to the inbox KEY of run RUN_ID of the CONFIG's graph.

    The message is durable when the command prints its inbox sequence; the run takes it in
    exactly once, whether it is running now (it picks the message up within a fraction of a
    second) or later. Posting needs no ownership and never waits for the run's owner. A run
    that is waiting ('run --suspend') and owned by no process is resumed here, with
    --suspend, until it completes or waits again; --on LAUNCHER resumes it there instead,
    --no-wake leaves it to 'durable recover'. A run with no record is refused (exit 4).
    """
    from durable_core.config import load_config, parse_store_url
    from durable_core.config.inputs import LiteralInput, _resolve_input
    from durable_core.durable.inbox import inbox_keys, send
    from durable_core.durable.waiting import waiting_of
    from durable_core.errors import ConfigError
    from durable_core.plugins import make_plugin_manager

    config = load_config(config_arg).with_run_id(run_id)
    pm = make_plugin_manager()
    graph = config.load_graph()
    keys = inbox_keys(graph)
    key = keys.get(key_name)
    if key is None:
        known = ", ".join(sorted(keys)) or "none"
        raise ConfigError(
            f"graph {graph.name!r} has no inbox key {key_name!r} (its inbox keys: {known}); "
            "an inbox is a stream key declared with inbox=True"
        )
    try:
        raw = json.loads(value_json)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"VALUE_JSON is not valid JSON: {exc}") from None
    value = _resolve_input(LiteralInput(raw), key.type, pathlib.Path.cwd(), f"inbox {key_name!r}")
    if store_url is not None:
        config = config.with_overrides(store=parse_store_url(store_url, pm=pm))
    config.register_graph_module(pm)
    codecs = config.make_codecs(pm)
    store = config.open_store(pm)
    try:
        sequence = send(store, run_id, key, value, idempotency_key, codecs=codecs)
        waiting = None if no_wake else waiting_of(store, run_id)
    finally:
        store.close()
    if as_json:
        click.echo(
            json.dumps(
                {"run_id": run_id, "key": key_name, "sequence": sequence, "woken": bool(waiting)}
            )
        )
    else:
        click.echo(f"posted to {run_id!r} {key_name}: sequence {sequence}")
    if waiting is None:
        return
    if launcher is not None:
        wake_on_launcher(launcher, config_arg, run_id, store_url)
        return
    _wake_here(config_arg, run_id, store_url, as_json)


def _wake_here(config_arg: str, run_id: str, store_url: str | None, as_json: bool) -> None:
    """Resume the waiting run in this process with --suspend; a run someone else took up
    already (BusyError) is left to them."""
    from durable_core.cli.launch import launch
    from durable_core.errors import BusyError

    if not as_json:
        click.echo(f"run {run_id!r} was waiting: resuming it here", err=True)
    try:
        launch(config_arg, run_id, as_json, resume=True, store_url=store_url, suspend=True)
    except BusyError:
        if not as_json:
            click.echo(f"run {run_id!r} is already running: it takes the message in", err=True)
