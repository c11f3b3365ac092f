"""``durable recover``: find the orphaned runs of some graphs and submit them to a launcher."""

from __future__ import annotations

import click

from durable_core.cli.fleet import fleet_options

__all__ = ["recover_command"]


@click.command("recover")
@click.argument("configs", nargs=-1, required=True, metavar="CONFIG...")
@click.option(
    "--inputs-file",
    "inputs_file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="The runs file they were submitted with: their inputs, and its runs not yet started.",
)
@fleet_options
def recover_command(
    configs: tuple[str, ...],
    inputs_file: str | None,
    on: str,
    store_url: str | None,
    per_graph: int | None,
    wait: bool,
    busy_timeout: float,
    as_json: bool,
) -> None:
    """Submit the incomplete runs of the CONFIGs' graphs that no process owns (--on).

    A run belongs to a CONFIG when its record was written by that CONFIG's graph. Runs owned by
    a running process are left alone, so this is safe from cron and twice at once. A record
    keeps a fingerprint of its inputs, not the inputs: a run gets them from --inputs-file when
    listed there, else from its CONFIG's [inputs].
    """
    from durable_core.cli.context import plugin_manager
    from durable_core.cli.fleet import print_busy, print_end, report
    from durable_core.launchers import recover

    wanted = as_json or not wait
    result = recover(
        list(configs),
        on=on,
        store=store_url,
        runs_file=inputs_file,
        wait=wait,
        busy_timeout=busy_timeout,
        on_end=lambda outcome: print_end(outcome, wanted),
        on_busy=lambda outcome: print_busy(outcome, wanted),
        per_graph=per_graph,
        pm=plugin_manager(),
    )
    if not as_json:
        click.echo(
            f"found {len(result.orphans)} orphaned run{'s' if len(result.orphans) != 1 else ''}"
            + (f" and {len(result.unstarted)} not yet started" if result.unstarted else "")
            + (f"; {len(result.owned)} owned by running processes, left alone" * bool(result.owned))
            + (
                f"; {len(result.waiting)} waiting for a message or a deadline not yet passed, "
                "left alone" * bool(result.waiting)
            ),
            err=True,
        )
    report(
        list(result.outcomes),
        on,
        as_json,
        extra={
            "orphans": list(result.orphans),
            "unstarted": list(result.unstarted),
            "owned": list(result.owned),
            "waiting": list(result.waiting),
        },
    )
