"""Which store and run a read-only command means, and reading one record from it.

``inspect``/``list`` (and the other commands that read runs) take a CONFIG, a ``--store URL``,
or nothing (the default file store); they never create a store.
"""

from __future__ import annotations

import os
import pathlib
import shlex
from typing import TYPE_CHECKING, Any

import click

from durable_core.config import (
    RunConfig,
    StoreConfig,
    default_store_config,
    load_config,
    parse_store_url,
)
from durable_core.config._text import redact
from durable_core.errors import BusyError, DurableError, NotFoundError

if TYPE_CHECKING:
    from durable_core.plugins import DurablePluginManager

__all__ = [
    "busy",
    "graph_of",
    "load_record",
    "looks_like_config",
    "not_found",
    "require_existing_store",
    "split_store_args",
    "store_exists",
    "store_target",
    "store_words",
]


def looks_like_config(arg: str) -> bool:
    """A positional argument that names a configuration file (``*.toml`` or an existing file)."""
    return arg.endswith(".toml") or pathlib.Path(arg).is_file()


def store_target(
    args: tuple[str, ...],
    store_url: str | None,
    *,
    want_run_id: bool,
    pm: DurablePluginManager | None = None,
) -> tuple[StoreConfig, str | None, RunConfig | None]:
    """Decide (store, run id, config) from the positional arguments and ``--store``.

    With a run id: ``--store URL RUN_ID`` | ``CONFIG [RUN_ID]`` | ``RUN_ID`` (default store).
    Without: ``--store URL`` | ``CONFIG`` | nothing (default store).

    ``pm`` is the plugin manager whose stores claim ``--store`` URL schemes (``None``: one is
    built when a URL needs it).

    Raises:
        click.UsageError: the arguments do not fit one of these forms.
        ConfigError: the config or the URL is invalid, or no installed store claims its scheme.
    """
    if store_url is not None:
        expected = 1 if want_run_id else 0
        if len(args) != expected:
            raise click.UsageError(
                "with --store URL, give exactly one RUN_ID"
                if want_run_id
                else f"with --store URL, give no other argument (found {' '.join(args)})"
            )
        return parse_store_url(store_url, pm=pm), (args[0] if args else None), None
    if not args:
        if want_run_id:
            raise click.UsageError("give a CONFIG file, a RUN_ID, or --store URL and a RUN_ID")
        return default_store_config(), None, None
    if len(args) > (2 if want_run_id else 1):
        raise click.UsageError(f"too many arguments: {' '.join(args)}")
    if looks_like_config(args[0]):
        config = load_config(args[0])
        run_id = args[1] if len(args) > 1 else config.run_id
        return config.store, run_id, config
    if not want_run_id or len(args) > 1:
        raise click.UsageError(f"{args[0]!r} is not a configuration file (a .toml file)")
    return default_store_config(), args[0], None


def split_store_args(
    args: tuple[str, ...], store_url: str | None, pm: DurablePluginManager | None = None
) -> tuple[StoreConfig, RunConfig | None, tuple[str, ...]]:
    """``--store URL ARGS…`` | ``CONFIG ARGS…`` | ``ARGS…`` (the default store): the store,
    the config (or ``None``) and the remaining arguments.

    Raises:
        ConfigError: the config or the URL is invalid, or no installed store claims its scheme.
    """
    if store_url is not None:
        return parse_store_url(store_url, pm=pm), None, args
    if args and looks_like_config(args[0]):
        config = load_config(args[0])
        return config.store, config, args[1:]
    return default_store_config(), None, args


def graph_of(config: RunConfig | None) -> Any:
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


_LOCAL_BACKENDS = frozenset({"file", "sqlite", "memory"})
"""Stores whose runs are owned on this host only (local files, this process)."""


def store_words(config_arg: str | None, store_url: str | None) -> str:
    """How the command line named a store, to repeat it in a hint: ``--store URL`` (its
    password hidden), the ``CONFIG`` path, or ``""`` for the default store."""
    if store_url is not None:
        return f"--store {shlex.quote(redact(store_url))}"
    if config_arg is not None:
        return shlex.quote(config_arg)
    return ""


def busy(run_id: str, store: StoreConfig, exc: BusyError, named: str | None = None) -> BusyError:
    """The BusyError a command reports: who owns the run (``exc.owner``, where the store can
    name it) and what to do. Only a store that can be shared between hosts mentions another
    host. ``named`` (see :func:`store_words`) makes the ``durable cancel`` hint a complete
    command; without it, the hint says to give the same store."""
    owner = exc.owner
    who = owner.describe() if owner is not None else "another session"
    what = "a 'durable run' or 'durable resume' still running"
    if store.backend not in _LOCAL_BACKENDS and (owner is None or owner.host is None):
        what += ", here or on another host"
    what += ", or a program using the run through Durable's Python API"
    if named is None:
        cancel = f"'durable cancel {shlex.quote(run_id)}' (with the same store)"
    else:
        cancel = f"'durable cancel {named + ' ' if named else ''}{shlex.quote(run_id)}'"
    return BusyError(
        f"run {run_id!r} in the {store.describe()} is busy: it is in use by {who} ({what}). "
        f"Wait for it to finish, or run {cancel} to ask it to stop. Details: {exc}",
        owner=owner,
    )


def store_exists(store: StoreConfig) -> bool:
    """False when the file or SQLite store's location does not exist (other backends: True)."""
    option = {"file": "directory", "sqlite": "path"}.get(store.backend)
    if option is None:
        return True
    location = store.resolved_options().get(option)
    return not isinstance(location, str) or os.path.exists(location)


def require_existing_store(store: StoreConfig) -> None:
    """Reading commands never create a store: a missing file or SQLite store is an error.

    Raises:
        NotFoundError: the store's directory or database file does not exist.
    """
    option = {"file": "directory", "sqlite": "path"}.get(store.backend)
    if option is None:
        return
    location = store.resolved_options().get(option)
    if isinstance(location, str) and not os.path.exists(location):
        raise NotFoundError(
            f"there is no {store.backend} store at {location}: check the location (this "
            "command works on runs that exist; it never creates a store)"
        )


def not_found(run_id: str, store: StoreConfig) -> NotFoundError:
    """The NotFoundError a command reports for a run without a record."""
    return NotFoundError(
        f"no record of run {run_id!r} in the {store.describe()}: check the store location and "
        f"the run id (a missing record does not mean the run finished)"
    )


def load_record(
    store_config: StoreConfig, store: Any, run_id: str, named: str | None = None
) -> Any:
    """Load one record through an exclusive session, never saving (E-2). ``named``: how the
    command line named the store (see :func:`busy`).

    Raises:
        BusyError: another session owns the run.
        NotFoundError: the run has no record.
        CorruptRecordError: the stored bytes are not a record.
    """
    try:
        session = store.acquire(run_id)
    except BusyError as exc:
        raise busy(run_id, store_config, exc, named) from exc
    with session:
        try:
            return session.load()
        except NotFoundError as exc:
            raise not_found(run_id, store_config) from exc
