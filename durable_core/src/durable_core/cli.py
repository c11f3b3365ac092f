"""The ``durable`` command (click): run, resume, inspect and list runs, list plugins.

Every error Durable raises on purpose is printed as one line on stderr (``--debug`` adds the
traceback) and ends the command with the exit code of its kind (:class:`ExitCode`). The user
reference is ``docs/cli.md``.
"""

from __future__ import annotations

import enum
import json
import os
import pathlib
import shlex
import signal
import sys
import threading
import traceback
from typing import Any

import click

from durable_core.config import (
    RunConfig,
    StoreConfig,
    default_store_config,
    load_config,
    parse_store_url,
)
from durable_core.errors import (
    AcquireTimeoutError,
    BusyError,
    CheckpointError,
    CodecError,
    ConfigError,
    ConflictError,
    CorruptRecordError,
    DurableError,
    GraphError,
    MismatchError,
    NotFoundError,
    PluginError,
)
from durable_core.plugins import make_plugin_manager
from durable_core.runinfo import RunInfo, RunStatus, describe_record
from durable_core.store import RunLister

__all__ = ["ExitCode", "cli", "exit_code_for", "main"]

DEBUG_ENV = "DURABLE_DEBUG"
"""Environment variable: when set to a non-empty value other than ``0``, errors show tracebacks."""


class ExitCode(enum.IntEnum):
    """Exit codes of the ``durable`` command; each kind of outcome has its own."""

    OK = 0
    """The command succeeded (for ``run``/``resume``: the run completed)."""
    RUN_FAILED = 1
    """The run ended ``failed`` or ``canceled``; the record says which node failed."""
    USAGE = 2
    """Wrong command-line usage (click's own code)."""
    BUSY = 3
    """The run is owned by another session (BusyError): find the owner, never delete locks."""
    NOT_FOUND = 4
    """No record of the run (NotFoundError): check the store location and the run id."""
    CONFLICT = 5
    """The stored run does not match: it already exists, or its definition, version or inputs
    differ (ConflictError, DefinitionMismatchError, VersionMismatchError, InputsMismatchError)."""
    CONFIG = 6
    """Bad configuration: ConfigError, PluginError (unknown backend or codec plugin), GraphError."""
    CHECKPOINT = 7
    """A save failed at the runtime's save boundary (CheckpointError): resume loads again."""
    CORRUPT = 8
    """The stored record is corrupt (CorruptRecordError): keep it, fix the cause."""
    ERROR = 9
    """Any other error: I/O, permissions, schema, codec, a timeout deciding ownership."""
    INTERRUPTED = 130
    """Interrupted (Ctrl-C / SIGINT); the run stays resumable."""
    TERMINATED = 143
    """Stopped by SIGTERM (a deploy, a service manager); the run stays resumable."""


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit code for an error that ended a command."""
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if isinstance(exc, BusyError):
        return ExitCode.BUSY
    if isinstance(exc, NotFoundError):
        return ExitCode.NOT_FOUND
    if isinstance(exc, CheckpointError):
        return ExitCode.CHECKPOINT
    if isinstance(exc, (ConflictError, MismatchError)):
        return ExitCode.CONFLICT
    if isinstance(exc, (ConfigError, PluginError, GraphError)):
        return ExitCode.CONFIG
    if isinstance(exc, CorruptRecordError):
        return ExitCode.CORRUPT
    return ExitCode.ERROR


def _debug_enabled(ctx: click.Context) -> bool:
    root = ctx.find_root()
    if root.params.get("debug"):
        return True
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


class _DurableGroup(click.Group):
    """A click group that turns errors into one line on stderr and a distinct exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(ExitCode.INTERRUPTED)
        except BrokenPipeError:
            # The reader went away (``durable inspect | head``): stop quietly. Point stdout at
            # devnull so that flushing it at exit does not raise again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(ExitCode.OK)
        except Exception as exc:
            if _debug_enabled(ctx):
                traceback.print_exception(exc, file=sys.stderr)
            kind = type(exc).__name__
            if not isinstance(exc, (DurableError, OSError)):
                kind = f"unexpected {kind}; rerun with --debug for the traceback"
            click.echo(f"error ({kind}): {exc}", err=True)
            ctx.exit(exit_code_for(exc))


@click.group(cls=_DurableGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks of errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Durable: run, resume and inspect durable dataflow graphs.

    Exit codes: 0 ok, 1 run failed, 2 usage, 3 busy, 4 not found, 5 conflict or mismatch,
    6 bad config, 7 checkpoint error, 8 corrupt record, 9 other error, 130 interrupted.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


# -- plugins ----------------------------------------------------------------------------------


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def plugins_command(as_json: bool) -> None:
    """List every plugin found, its distribution and what it registers."""
    pm = make_plugin_manager()
    infos = pm.describe()
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "name": i.name,
                        "distribution": i.distribution,
                        "version": i.version,
                        "stores": list(i.stores),
                        "executors": list(i.executors),
                        "codecs": list(i.codecs),
                        "commands": list(i.commands),
                        "error": i.error,
                    }
                    for i in infos
                ],
                indent=2,
            )
        )
        return
    for i in infos:
        click.echo(f"{i.name}  ({i.distribution} {i.version})")
        if i.error:
            click.echo(f"  error: {i.error}")
            continue
        if i.stores:
            click.echo(f"  stores: {', '.join(i.stores)}")
        if i.executors:
            click.echo(f"  executors: {', '.join(i.executors)}")
        if i.codecs:
            click.echo(f"  codecs: {', '.join(i.codecs)}")
        if i.commands:
            click.echo(f"  commands: {', '.join(i.commands)}")


# -- choosing the store -----------------------------------------------------------------------


def _looks_like_config(arg: str) -> bool:
    return arg.endswith(".toml") or pathlib.Path(arg).is_file()


def _store_target(
    args: tuple[str, ...], store_url: str | None, *, want_run_id: bool
) -> tuple[StoreConfig, str | None, RunConfig | None]:
    """Decide (store, run id, config) from the positional arguments and ``--store``.

    inspect: ``--store URL RUN_ID`` | ``CONFIG [RUN_ID]`` | ``RUN_ID`` (default store).
    list: ``--store URL`` | ``CONFIG`` | nothing (default store).
    """
    if store_url is not None:
        expected = 1 if want_run_id else 0
        if len(args) != expected:
            raise click.UsageError(
                "with --store URL, give exactly one RUN_ID"
                if want_run_id
                else f"with --store URL, give no other argument (found {' '.join(args)})"
            )
        return parse_store_url(store_url), (args[0] if args else None), None
    if not args:
        if want_run_id:
            raise click.UsageError("give a CONFIG file, a RUN_ID, or --store URL and a RUN_ID")
        return default_store_config(), None, None
    if len(args) > (2 if want_run_id else 1):
        raise click.UsageError(f"too many arguments: {' '.join(args)}")
    if _looks_like_config(args[0]):
        config = load_config(args[0])
        run_id = args[1] if len(args) > 1 else config.run_id
        return config.store, run_id, config
    if not want_run_id or len(args) > 1:
        raise click.UsageError(f"{args[0]!r} is not a configuration file (a .toml file)")
    return default_store_config(), args[0], None


def _graph_of(config: RunConfig | None) -> Any:
    """The config's graph, or ``None`` (with a note on stderr) when it cannot be loaded.

    Inspecting a stored run must not depend on the current code importing cleanly.
    """
    if config is None:
        return None
    try:
        return config.load_graph()
    except DurableError as exc:
        click.echo(f"note: showing the record without the graph ({exc})", err=True)
        return None


def _busy(run_id: str, store: StoreConfig, exc: BusyError) -> BusyError:
    return BusyError(
        f"run {run_id!r} in the {store.describe()} is busy: a running 'durable run' or "
        f"'durable resume' (here or on another host) owns it. Details: {exc}"
    )


def _require_existing_store(store: StoreConfig) -> None:
    """inspect/list only read: a file or SQLite store that does not exist is not created.

    Raises:
        NotFoundError: the store's directory or database file does not exist.
    """
    option = {"file": "directory", "sqlite": "path"}.get(store.backend)
    if option is None:
        return
    location = store.resolved_options().get(option)
    if isinstance(location, str) and not os.path.exists(location):
        raise NotFoundError(
            f"there is no {store.backend} store at {location}: check the location (inspect "
            "and list only read, they never create a store)"
        )


def _not_found(run_id: str, store: StoreConfig) -> NotFoundError:
    return NotFoundError(
        f"no record of run {run_id!r} in the {store.describe()}: check the store location and "
        f"the run id (a missing record does not mean the run finished)"
    )


def _load_record(store_config: StoreConfig, store: Any, run_id: str) -> Any:
    """Load one record through an exclusive session, never saving (E-2)."""
    try:
        session = store.acquire(run_id)
    except BusyError as exc:
        raise _busy(run_id, store_config, exc) from exc
    with session:
        try:
            return session.load()
        except NotFoundError as exc:
            raise _not_found(run_id, store_config) from exc


# -- inspect ----------------------------------------------------------------------------------


@cli.command("inspect")
@click.argument("args", nargs=-1, metavar="[CONFIG] [RUN_ID]")
@click.option("--store", "store_url", metavar="URL", help="The store, instead of a CONFIG.")
@click.option("--run-id", "run_id_option", metavar="ID", help="The run id (same as RUN_ID).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def inspect_command(
    args: tuple[str, ...], store_url: str | None, run_id_option: str | None, as_json: bool
) -> None:
    """Show a run's metadata: revision, version, scopes, attempts, confirmed nodes, streams.

    The store is the CONFIG's (the run id defaults to the config's), the one given by
    --store URL, or the default file store. The run id may also be given as --run-id ID, as
    for run and resume. The run is read through an exclusive session and never saved;
    business values are never shown. A run owned by a running process is reported busy at
    once (exit 3).
    """
    if run_id_option is not None:
        if len(args) > 1 or (args and not _looks_like_config(args[0])):
            raise click.UsageError("give the run id either as RUN_ID or as --run-id, not both")
        args = (*args, run_id_option)
    store_config, run_id, config = _store_target(args, store_url, want_run_id=True)
    assert run_id is not None
    graph = _graph_of(config)
    _require_existing_store(store_config)
    store = store_config.open(make_plugin_manager())
    try:
        record = _load_record(store_config, store, run_id)
    finally:
        store.close()
    info = describe_record(record, graph)
    if as_json:
        data = info.to_json()
        data["store"] = store_config.describe()
        click.echo(json.dumps(data, indent=2))
        return
    _print_info(info, store_config)


def _print_info(info: RunInfo, store: StoreConfig) -> None:
    def row(label: str, value: object) -> None:
        click.echo(f"{label:<11}{value}")

    row("run", info.run_id)
    row("store", store.describe())
    row("format", info.format)
    row("revision", info.revision)
    row("version", info.version or "(empty)")
    status = info.status
    if info.root_nodes_total is not None:
        status += f" ({info.root_nodes_confirmed} of {info.root_nodes_total} root nodes confirmed)"
    row("status", status)
    match = {None: "", True: "  (matches the graph)", False: "  (differs from the graph)"}
    row("definition", (info.definition or "(empty)") + match[info.definition_matches])
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


# -- list -------------------------------------------------------------------------------------


@cli.command("list")
@click.argument("args", nargs=-1, metavar="[CONFIG]")
@click.option("--store", "store_url", metavar="URL", help="The store, instead of a CONFIG.")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def list_command(args: tuple[str, ...], store_url: str | None, as_json: bool) -> None:
    """List the runs of a store, with their status and revision.

    The store is the CONFIG's, the one given by --store URL, or the default file store.
    With a CONFIG, each status is judged against its graph (completed, failed, incomplete)
    and each run's definition is compared with the graph's (matches, differs).
    Each run is read through a short exclusive session; a run owned by a running process is
    shown as running.
    """
    store_config, _, config = _store_target(args, store_url, want_run_id=False)
    graph = _graph_of(config)
    _require_existing_store(store_config)
    store = store_config.open(make_plugin_manager())
    rows: list[dict[str, Any]] = []
    try:
        if not isinstance(store, RunLister):
            raise ConfigError(
                f"the {store_config.describe()} cannot list its runs; inspect one run with "
                f"'durable inspect --store URL RUN_ID'"
            )
        for summary in store.list_runs():
            rows.append(_list_row(store, summary, graph))
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"no runs in the {store_config.describe()}")
        return
    header = {
        "run_id": "RUN ID",
        "status": "STATUS",
        "revision": "REVISION",
        "format": "FORMAT",
        "confirmed": "CONFIRMED",
    }
    if graph is not None:
        header["definition"] = "DEFINITION"
    lines = [header] + [
        {
            "run_id": r["run_id"] or f"? ({r['location']})",
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


def _list_row(store: Any, summary: Any, graph: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "run_id": summary.run_id,
        "format": summary.format,
        "revision": summary.revision,
        "status": "",
        "root_nodes_confirmed": None,
        "root_nodes_total": None,
        "definition_matches": None,
        "location": getattr(summary, "location", ""),
        "error": None,
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
    info = describe_record(record, graph)
    row.update(
        format=info.format,
        revision=info.revision,
        status=info.status,
        root_nodes_confirmed=info.root_nodes_confirmed,
        root_nodes_total=info.root_nodes_total,
        definition_matches=info.definition_matches,
    )
    return row


# -- run and resume ---------------------------------------------------------------------------


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Interrupt:
    """SIGINT (Ctrl-C) or SIGTERM (what deploy tools and service managers send) while a run
    executes: the first signal cancels the run cleanly (the record stays resumable), a second
    one stops waiting for running bodies."""

    def __init__(self, token: Any, quiet: bool) -> None:
        self.token = token
        self.quiet = quiet
        self.requested = False
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.signal = signum
        if not self.quiet:
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            click.echo(
                f"\nstopping ({name}): waiting for running nodes to end (Ctrl-C again to stop "
                "at once)",
                err=True,
            )
        self.token.cancel()

    @property
    def exit_code(self) -> int:
        """130 after SIGINT (or a second signal), 143 after SIGTERM: 128 + the signal."""
        if self.signal == signal.SIGTERM:
            return ExitCode.TERMINATED
        return ExitCode.INTERRUPTED

    def __enter__(self) -> _Interrupt:
        if threading.current_thread() is threading.main_thread():
            for signum in _STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


def _resume_hint(config_arg: str, run_id_option: str | None) -> str:
    return _command_hint("resume", config_arg, run_id_option)


def _run_hint(config_arg: str, run_id_option: str | None) -> str:
    return _command_hint("run", config_arg, run_id_option)


def _command_hint(verb: str, config_arg: str, run_id_option: str | None) -> str:
    command = f"durable {verb} {shlex.quote(config_arg)}"
    if run_id_option is not None:
        command += f" --run-id {shlex.quote(run_id_option)}"
    return command


_SKIPPED = object()
"""Stands for a skipped result in :func:`_leaf_outputs`."""


def _leaf_outputs(graph: Any, result: Any) -> list[tuple[str, Any]]:
    """The root graph's results nobody in the graph consumes (what the run was for)."""
    required = {key.name for node in graph.nodes.values() for key in node.requires}
    leaves = []
    for node in graph.nodes.values():
        for key in node.provides:
            if key.name in required or getattr(key, "stream", False):
                continue
            if result.skipped(key):
                leaves.append((key.name, _SKIPPED))
            else:
                leaves.append((key.name, result.get(key)))
    return sorted(leaves, key=lambda kv: kv[0])


def _json_outputs(graph: Any, result: Any) -> dict[str, Any]:
    """The root graph's results for ``--json``: JSON values as they are, anything else as its
    ``repr``; skipped results as ``{"skipped": true}``."""
    out: dict[str, Any] = {}
    for name, value in _leaf_outputs(graph, result):
        if value is _SKIPPED:
            out[name] = {"skipped": True}
            continue
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            value = repr(value)
        out[name] = value
    return out


def _short(value: Any, limit: int = 200) -> str:
    text = "(skipped)" if value is _SKIPPED else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _launch(config_arg: str, run_id_option: str | None, as_json: bool, *, resume: bool) -> None:
    from durable_core.durable import Runtime
    from durable_core.graph import CancelToken
    from durable_core.progress import ProgressCounter, StatusLine

    config = load_config(config_arg).with_run_id(run_id_option)
    pm = make_plugin_manager()
    graph = config.load_graph()
    config.register_graph_module(pm)
    codecs = config.make_codecs(pm)
    inputs = config.resolve_inputs(graph)
    counter = ProgressCounter()
    interactive = not as_json and sys.stdout.isatty() and sys.stderr.isatty()
    token = CancelToken()
    verb = "resume" if resume else "run"
    store = config.open_store(pm)
    status_line = None
    try:
        runtime = Runtime(store, codecs, observers=[counter], plugins=pm)
        if interactive:
            status_line = StatusLine(counter, sys.stderr, label=config.run_id).start()
        with _Interrupt(token, quiet=as_json) as interrupt:
            try:
                call = runtime.resume if resume else runtime.run
                result = call(
                    graph,
                    run_id=config.run_id,
                    version=config.version,
                    inputs=inputs,
                    max_running=config.runtime.max_running,
                    cancel=token,
                )
            except KeyboardInterrupt:
                result = None
            except CheckpointError as exc:
                if not counter.snapshot().started:
                    raise _before_start(exc, config, config_arg, run_id_option) from exc
                raise
            except NotFoundError as exc:
                raise NotFoundError(
                    f"no record of run {config.run_id!r} in the {config.store.describe()}: "
                    f"check the store and the run id, or start it with "
                    f"'{_run_hint(config_arg, run_id_option)}' (a missing record does not mean "
                    f"the run finished)"
                ) from exc
            except BusyError as exc:
                raise _busy(config.run_id, config.store, exc) from exc
    finally:
        if status_line is not None:
            status_line.stop()
        store.close()
    snap = counter.snapshot()
    interrupted = interrupt.requested or result is None
    status = "canceled" if result is None else str(result.status)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "run_id": config.run_id,
                    "command": verb,
                    "status": status,
                    "interrupted": interrupted,
                    "revision": result.revision if result is not None else snap.revision,
                    "saves": result.saves if result is not None else None,
                    "total_nodes": snap.total_nodes,
                    "confirmed": snap.confirmed,
                    "restored": snap.restored,
                    "retries": snap.retries,
                    "failed_attempts": snap.failed_attempts,
                    "elapsed_seconds": round(snap.elapsed, 3),
                    "error": (
                        f"{type(result.error).__name__}: {result.error}"
                        if result is not None and result.error is not None
                        else None
                    ),
                    "store": config.store.describe(),
                    "outputs": (
                        _json_outputs(graph, result)
                        if result is not None and status == "completed"
                        else None
                    ),
                },
                indent=2,
            )
        )
    hint = _resume_hint(config_arg, run_id_option)
    if interrupted:
        if not as_json:
            click.echo(
                f"interrupted: run {config.run_id!r} stopped at revision {snap.revision} with "
                f"{snap.confirmed + snap.restored} of {snap.total_nodes} nodes done; the record "
                f"stays resumable. Continue it with: {hint}",
                err=True,
            )
        sys.exit(interrupt.exit_code)
    assert result is not None
    if not as_json:
        summary = (
            f"{_count(snap.confirmed, 'node')} confirmed, {snap.restored} restored from "
            f"checkpoint, "
            f"{snap.retries} {'retry' if snap.retries == 1 else 'retries'}; revision "
            f"{result.revision} in the {config.store.describe()}"
        )
        if status == "completed":
            click.echo(f"run {config.run_id!r} completed in {snap.elapsed:.1f} s: {summary}")
            for name, value in _leaf_outputs(graph, result):
                click.echo(f"  {name} = {_short(value)}")
        else:
            click.echo(f"run {config.run_id!r} {status} after {snap.elapsed:.1f} s: {summary}")
            if result.error is not None:
                click.echo(f"error: {result.error}", err=True)
            click.echo(
                f"inspect it with: durable inspect {shlex.quote(config_arg)}"
                + (f" {shlex.quote(config.run_id)}" if run_id_option is not None else ""),
                err=True,
            )
    if status != "completed":
        sys.exit(ExitCode.RUN_FAILED)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _before_start(
    exc: CheckpointError, config: RunConfig, config_arg: str, run_id_option: str | None
) -> DurableError:
    """Name a refusal that came before anything was saved by what it really is."""
    cause = exc.__cause__
    if isinstance(cause, ConflictError):
        again = f"durable run {shlex.quote(config_arg)} --run-id NEW-ID"
        return ConflictError(
            f"run {config.run_id!r} already exists in the {config.store.describe()}: continue "
            f"it with '{_resume_hint(config_arg, run_id_option)}', or start another run with "
            f"'{again}'. Nothing was saved"
        )
    if isinstance(cause, CodecError):
        # The codec layer's message already says what to do (and, for a missing codec, how
        # to register one); repeating advice here would be wrong for NaN or a lock.
        return ConfigError(f"{config.path}: [inputs]: {cause}. Nothing was saved")
    return exc


@cli.command("run")
@click.argument("config_arg", metavar="CONFIG")
@click.option("--run-id", "run_id", metavar="ID", help="Run id instead of the config's run_id.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def run_command(config_arg: str, run_id: str | None, as_json: bool) -> None:
    """Start a new run of the CONFIG's graph and execute it.

    Every change is saved to the store as it happens. Ctrl-C stops the run cleanly and prints
    how to resume it; a crash (even kill -9) leaves it resumable too. A run id that already has
    a record is refused (exit 5): use 'durable resume'.
    """
    _launch(config_arg, run_id, as_json, resume=False)


@cli.command("resume")
@click.argument("config_arg", metavar="CONFIG")
@click.option("--run-id", "run_id", metavar="ID", help="Run id instead of the config's run_id.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def resume_command(config_arg: str, run_id: str | None, as_json: bool) -> None:
    """Continue a run of the CONFIG's graph from its record.

    Confirmed nodes are restored without running again, spent Retry budgets stay spent. The
    graph, version and inputs must be the ones the run started with (else exit 5); a run with
    no record is not started (exit 4).
    """
    _launch(config_arg, run_id, as_json, resume=True)


# -- entry point ------------------------------------------------------------------------------


def _add_plugin_commands(group: click.Group) -> None:
    try:
        pm = make_plugin_manager()
    except DurableError:
        return
    pm.hook.durable_register_commands(cli=group)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``durable`` console script."""
    _add_plugin_commands(cli)
    try:
        cli.main(args=argv, prog_name="durable", standalone_mode=True)
    finally:
        try:
            sys.stdout.flush()
        except BrokenPipeError:  # the reader went away after the command wrote its output
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
