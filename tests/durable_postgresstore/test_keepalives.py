"""TCP keepalives on both ends of the store's connections, and where their values come from."""

from __future__ import annotations

import socket
import urllib.parse
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from durable_core import ConfigError
from durable_postgresstore import Keepalives
from durable_postgresstore._keepalives import DEFAULT_KEEPALIVES, keepalives_from
from durable_postgresstore.plugin import create_store


def server_settings(session) -> dict[str, str]:
    """The keepalive settings of the server session behind a session's connection."""
    rows = session._link.conn.execute(
        "SELECT name, setting FROM pg_settings WHERE name IN ('tcp_keepalives_idle', "
        "'tcp_keepalives_interval', 'tcp_keepalives_count', 'tcp_user_timeout')"
    ).fetchall()
    return dict(rows)


def client_settings(session) -> tuple[int, int, int, int, int]:
    """SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT, TCP_USER_TIMEOUT of the client."""
    sock = session._link._sock
    return (
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
    )


def as_url(dsn: str, **query: object) -> str:
    params = conninfo_to_dict(dsn)
    netloc = f"{params['user']}:{urllib.parse.quote(str(params['password']), safe='')}@"
    netloc += f"{params['host']}:{params['port']}"
    return f"postgresql://{netloc}/{params['dbname']}?{urllib.parse.urlencode(query)}"


@pytest.mark.postgres
# covers: X-HOST
def test_every_lock_connection_sets_keepalives_on_both_ends_by_default(store):
    assert store.keepalives == DEFAULT_KEEPALIVES == Keepalives(10, 5, 3, 25.0)
    with store.acquire("k") as session:
        assert server_settings(session) == {
            "tcp_keepalives_idle": "10",
            "tcp_keepalives_interval": "5",
            "tcp_keepalives_count": "3",
            "tcp_user_timeout": "25000",
        }
        assert client_settings(session) == (1, 10, 5, 3, 25000)


@pytest.mark.postgres
# covers: X-HOST
def test_configuration_options_and_url_parameters_set_them(postgres_dsn):
    store = create_store(
        dsn=postgres_dsn,
        keepalives_idle=2,
        keepalives_interval=1.5,  # whole seconds on the wire: rounded up
        keepalives_count=4,
        tcp_user_timeout=6.5,
    )
    try:
        with store.acquire("k") as session:
            assert server_settings(session)["tcp_keepalives_interval"] == "2"
            assert client_settings(session) == (1, 2, 2, 4, 6500)
    finally:
        store.close()
    # A --store URL: libpq's own parameters (tcp_user_timeout in milliseconds) set both ends.
    store = create_store(dsn=as_url(postgres_dsn, keepalives_idle=7, tcp_user_timeout=9000))
    try:
        assert store.keepalives == Keepalives(7, 5, 3, 9.0)
        with store.acquire("k") as session:
            assert server_settings(session)["tcp_keepalives_idle"] == "7"
            assert server_settings(session)["tcp_user_timeout"] == "9000"
            assert client_settings(session)[1] == 7
    finally:
        store.close()


@pytest.mark.postgres
# covers: X-HOST
def test_keepalives_can_be_turned_off(make_store, postgres_dsn):
    store = make_store(keepalives=False)
    assert store.keepalives is None
    system_idle = int(Path("/proc/sys/net/ipv4/tcp_keepalive_time").read_text())
    with store.acquire("k") as session:
        assert client_settings(session)[1] == system_idle
        assert server_settings(session)["tcp_user_timeout"] == "0"
    off = create_store(dsn=postgres_dsn + " keepalives=0")
    try:
        assert off.keepalives is None
    finally:
        off.close()


def dsn_of(**params: str):
    return params.get


def test_an_option_wins_over_the_dsn_which_wins_over_the_default():
    assert keepalives_from(dsn_of()) == DEFAULT_KEEPALIVES
    assert keepalives_from(dsn_of(keepalives_idle="30", tcp_user_timeout="1500")) == Keepalives(
        30, 5, 3, 1.5
    )
    assert keepalives_from(dsn_of(keepalives_idle="30"), idle=4) == Keepalives(4, 5, 3, 25.0)
    assert keepalives_from(dsn_of(keepalives="0")) is None
    assert keepalives_from(dsn_of(keepalives="0"), keepalives=True) == DEFAULT_KEEPALIVES
    assert keepalives_from(dsn_of(), user_timeout=0).user_timeout == 0
    assert Keepalives(10, 5, 3, 25.0).bound == 25.0
    assert Keepalives(2, 1, 2, 0).bound == 4.0


@pytest.mark.parametrize(
    ("given", "dsn", "complaint"),
    [
        ({"idle": 0}, {}, "keepalives_idle must be more than 0"),
        ({"count": "3"}, {}, "keepalives_count must be a number of probes"),
        ({"interval": float("nan")}, {}, "keepalives_interval must be more than 0"),
        ({"user_timeout": -1}, {}, "tcp_user_timeout must be 0 or more"),
        ({"keepalives": "yes"}, {}, "keepalives must be true or false"),
        ({}, {"keepalives_count": "many"}, "keepalives_count='many' is not a number"),
    ],
)
def test_bad_values_are_refused_with_a_clear_error(given, dsn, complaint):
    with pytest.raises(ConfigError, match=complaint):
        keepalives_from(dsn_of(**dsn), **given)


def test_the_configuration_refuses_an_unknown_keepalive_option():
    with pytest.raises(ConfigError, match=r"unknown option.*keepalive_idle"):
        create_store(dsn="host=localhost", keepalive_idle=3)
