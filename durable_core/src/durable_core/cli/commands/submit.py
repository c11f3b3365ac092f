"""``durable submit``: hand one run, or one run per line of a JSON-lines file, to a launcher."""

from __future__ import annotations

import click

from durable_core.cli.fleet import fleet_options

__all__ = ["submit_command"]


@click.command("submit")
@click.argument("config_arg", metavar="CONFIG")
@click.option("--run-id", "run_id", metavar="ID", help="Run id instead of the config's run_id.")
@click.option(
    "--input",
    "input_options",
    multiple=True,
    metavar="KEY=VALUE|KEY=@FILE",
    help="Override an input of the config, for every run (repeatable).",
)
@click.option(
    "--inputs-file",
    "inputs_file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help='One run per line: {"run_id": "...", "inputs": {...}} (JSON lines).',
)
@click.option(
    "--max-running",
    type=click.IntRange(min=1),
    metavar="N",
    help="At most N node bodies at once in each run (overrides [runtime] max_running).",
)
@click.option(
    "--suspend",
    is_flag=True,
    help="A run with nothing to do but wait (inbox, timer) ends waiting, freeing its worker.",
)
@fleet_options
def submit_command(
    config_arg: str,
    run_id: str | None,
    input_options: tuple[str, ...],
    inputs_file: str | None,
    max_running: int | None,
    suspend: bool,
    on: str,
    store_url: str | None,
    per_graph: int | None,
    wait: bool,
    busy_timeout: float,
    as_json: bool,
) -> None:
    """Start or resume runs of the CONFIG's graph on a launcher (--on).

    Each run is started, or resumed when it has a record (never started again). A run that
    another process runs is not run twice nor counted as failed: with --wait its end is read
    from the store. Without --wait a cluster's runs go on after this command returns; the local
    launcher's workers are this command's children, so it returns when its runs end. The store
    must be one every worker reaches: PostgreSQL across hosts, file or SQLite on one machine.
    """
    import pathlib

    from durable_core.cli.context import plugin_manager
    from durable_core.cli.fleet import print_busy, print_end, report
    from durable_core.config import load_config
    from durable_core.config.inputs import parse_input_override
    from durable_core.launchers import RunSpec, Submitter, open_launcher, prepare, read_runs_file
    from durable_core.launchers.submit import run_owned

    if inputs_file is not None and run_id is not None:
        raise click.UsageError("give either --run-id or --inputs-file (each line has a run id)")
    pm = plugin_manager()
    graph = load_config(config_arg).load_graph()
    overrides = dict(
        parse_input_override(text, graph, pathlib.Path.cwd()) for text in input_options
    )
    if inputs_file is not None:
        specs = [
            RunSpec(run_id=s.run_id, inputs={**overrides, **s.inputs}, where=s.where)
            for s in read_runs_file(inputs_file)
        ]
    else:
        specs = [RunSpec(run_id=run_id, inputs=overrides)]
    part = prepare(
        config_arg, specs, store=store_url, max_running=max_running, suspend=suspend, pm=pm
    )
    launcher, owned = open_launcher(on, pm)
    name = launcher.describe()
    submitter = Submitter(
        launcher,
        wait=wait,
        busy_timeout=busy_timeout,
        on_end=lambda outcome: print_end(outcome, as_json or not wait),
        on_busy=lambda outcome: print_busy(outcome, as_json or not wait),
        per_graph=per_graph,
        pm=pm,
    )
    try:
        outcomes = run_owned(submitter, [part], owned)
    except KeyboardInterrupt:
        from durable_core.cli.exitcodes import ExitCode

        click.echo(
            "interrupted: the runs that had not ended stay resumable; finish them with "
            + _finish_hint(config_arg, inputs_file, input_options, on, store_url),
            err=True,
        )
        raise click.exceptions.Exit(ExitCode.INTERRUPTED) from None
    report(outcomes, name, as_json)


def _finish_hint(
    config_arg: str,
    inputs_file: str | None,
    input_options: tuple[str, ...],
    on: str,
    store_url: str | None,
) -> str:
    """The command that finishes an interrupted submission: ``durable recover`` with its
    runs file, or (``recover`` takes no ``--input``) the same ``durable submit`` again."""
    import shlex

    from durable_core.config._text import redact

    if input_options:
        return "the same 'durable submit' command (each run resumes where it stopped)"
    command = f"durable recover {shlex.quote(config_arg)}"
    if inputs_file is not None:
        command += f" --inputs-file {shlex.quote(inputs_file)}"
    command += f" --on {shlex.quote(on)}"
    if store_url is not None:
        command += f" --store {shlex.quote(redact(store_url))}"
    return command + " --wait"
