"""Registers the ``postgres`` store backend with Durable (entry point group ``durable``).

A run configuration chooses it with ``backend = "postgres"``; the other keys of the ``[store]``
table are the factory's keyword arguments::

    [store]
    backend = "postgres"
    dsn_env = "DURABLE_PG_DSN"      # or: dsn = "host=db.internal dbname=durable user=durable"
    acquire_timeout = 30.0
    max_connections = 10
    keepalives_idle = 10            # TCP keepalives on both ends (seconds): a vanished host's
    keepalives_interval = 5         # runs are free within about 25 s
    keepalives_count = 3
    tcp_user_timeout = 25

``dsn_env`` names an environment variable holding the DSN, so that no password sits in a
configuration file. As a ``--store`` URL, ``postgres://…`` or ``postgresql://…`` is the DSN; its
libpq parameters ``keepalives``, ``keepalives_idle``, ``keepalives_interval``,
``keepalives_count`` and ``tcp_user_timeout`` (milliseconds, as in libpq) set the server's side
too (``postgresql://db/durable?keepalives_idle=5``).
"""

from __future__ import annotations

import os
from typing import Any

from durable_core import hookimpl
from durable_core.errors import ConfigError

__all__ = ["create_store"]

_OPTIONS = (
    "dsn",
    "dsn_env",
    "acquire_timeout",
    "max_connections",
    "operation_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
)


def create_store(**options: Any) -> Any:
    """Build a :class:`~durable_postgresstore.PostgresStore` from configuration options.

    Args:
        **options: exactly one of ``dsn`` (the connection string) or ``dsn_env`` (the name of an
            environment variable holding it), plus optionally ``acquire_timeout`` (seconds),
            ``max_connections``, ``operation_timeout`` (seconds), ``keepalives`` (bool),
            ``keepalives_idle``, ``keepalives_interval`` (whole seconds), ``keepalives_count``
            and ``tcp_user_timeout`` (seconds); see
            :class:`~durable_postgresstore.PostgresStore`.

    Raises:
        ConfigError: an unknown option, both or neither of ``dsn``/``dsn_env``, an unset or
            empty environment variable, or an option of the wrong type. The DSN is never quoted.
        Everything :class:`~durable_postgresstore.PostgresStore` raises.
    """
    from durable_postgresstore.store import PostgresStore

    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ConfigError(
            f"unknown option(s) for the postgres store: {', '.join(unknown)}; accepted: "
            f"{', '.join(_OPTIONS)}"
        )
    dsn = options.pop("dsn", None)
    dsn_env = options.pop("dsn_env", None)
    if (dsn is None) == (dsn_env is None):
        raise ConfigError(
            "the postgres store needs exactly one of 'dsn' (the connection string) or "
            "'dsn_env' (the name of an environment variable holding it; keeps the password "
            "out of configuration files)"
        )
    if dsn_env is not None:
        if not isinstance(dsn_env, str) or not dsn_env:
            raise ConfigError(f"'dsn_env' must name an environment variable, found {dsn_env!r}")
        dsn = os.environ.get(dsn_env, "")
        if not dsn:
            raise ConfigError(
                f"the environment variable {dsn_env!r} named by 'dsn_env' is not set or empty; "
                "set it to the PostgreSQL connection string"
            )
    elif not isinstance(dsn, str) or not dsn:
        raise ConfigError("'dsn' must be a non-empty connection string")
    try:
        return PostgresStore(dsn, **options)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"invalid option for the postgres store: {exc}") from None


def _from_url(url: str) -> dict[str, Any]:
    """``postgres://…`` / ``postgresql://…``: the URL is the DSN."""
    return {"dsn": url}


@hookimpl
def durable_register_stores(register: Any) -> None:
    register("postgres", create_store, url_schemes=["postgres", "postgresql"], from_url=_from_url)
