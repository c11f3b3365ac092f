"""The DSN's password never appears in errors or logs; the ``postgres`` plugin (B-PG-3)."""

from __future__ import annotations

import logging
import socket
import traceback

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from durable_core import AcquireTimeoutError, ConfigError, StoreError, make_plugin_manager
from durable_postgresstore import PostgresStore, PostgresStoreError

SECRET = "s3cret-Pa55word-XYZ"


def all_text(error: BaseException) -> str:
    """Everything a user could see of an error: str, repr, the formatted traceback, and the
    text of every chained exception."""
    parts = ["".join(traceback.format_exception(error))]
    seen = error
    while seen is not None:
        parts += [str(seen), repr(seen)]
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# covers: B-PG-3
@pytest.mark.parametrize(
    "dsn",
    [
        f"host=127.0.0.1 port={{port}} dbname=x user=u password={SECRET}",
        f"postgresql://u:{SECRET}@127.0.0.1:{{port}}/x",
    ],
    ids=["keywords", "uri"],
)
def test_an_unreachable_server_error_hides_the_password(dsn, caplog):
    caplog.set_level(logging.DEBUG)
    with pytest.raises(PostgresStoreError) as caught:
        PostgresStore(dsn.format(port=closed_port()), acquire_timeout=5)
    text = all_text(caught.value)
    assert "127.0.0.1" in text  # the message says where, ...
    assert SECRET not in text  # ... never with which password
    assert SECRET not in caplog.text


def test_an_unreachable_server_error_says_what_durable_was_doing():
    with pytest.raises(PostgresStoreError) as caught:
        PostgresStore(f"host=127.0.0.1 port={closed_port()} dbname=x user=u", acquire_timeout=5)
    assert "creating and checking Durable's schema `pulse_durable`" in str(caught.value)


# covers: B-PG-3
def test_an_unreachable_server_error_is_a_store_error_that_wrote_nothing():
    with pytest.raises(StoreError) as caught:
        PostgresStore(f"host=127.0.0.1 port={closed_port()} dbname=x user=u", acquire_timeout=5)
    assert isinstance(caught.value, PostgresStoreError)
    assert caught.value.uncertain is False
    assert caught.value.connection_lost is False


# covers: B-PG-3
@pytest.mark.parametrize(
    "dsn",
    [
        f"host=127.0.0.1 password={SECRET} nonsense",
        f"host=127.0.0.1 password='{SECRET} with space' port",
        f"postgresql://u:{SECRET}@h/db?bogus_option=1",
    ],
)
def test_a_malformed_dsn_error_hides_the_password(dsn):
    with pytest.raises(ConfigError) as caught:
        PostgresStore(dsn)
    assert "not a valid libpq connection string" in str(caught.value)
    assert SECRET not in all_text(caught.value)


def test_a_malformed_dsn_without_a_password_gets_the_parsers_detail():
    with pytest.raises(ConfigError, match='invalid URI query parameter: "bogus"'):
        PostgresStore("postgresql://u@h/db?bogus=1")


# covers: B-PG-3
@pytest.mark.postgres
def test_a_wrong_password_error_hides_the_password(postgres_dsn, admin, caplog):
    caplog.set_level(logging.DEBUG)
    admin.execute("DROP ROLE IF EXISTS durable_pw_probe")
    admin.execute("CREATE ROLE durable_pw_probe LOGIN PASSWORD 'the-right-one-42'")
    try:
        params = conninfo_to_dict(postgres_dsn)
        params.update(user="durable_pw_probe", password=SECRET)
        dsn = make_conninfo(**params)
        try:
            PostgresStore(dsn).close()
        except PostgresStoreError as exc:
            error = exc
        else:
            pytest.skip("the test server does not check passwords on this connection")
        text = all_text(error)
        assert "password authentication failed" in text
        assert SECRET not in text
        assert SECRET not in caplog.text
    finally:
        admin.execute("DROP ROLE durable_pw_probe")


# covers: B-PG-3
@pytest.mark.postgres
def test_the_store_and_its_errors_never_show_the_password(postgres_dsn, caplog):
    caplog.set_level(logging.DEBUG)
    params = conninfo_to_dict(postgres_dsn)
    password = params.get("password")
    with PostgresStore(postgres_dsn, max_connections=1) as store:
        assert "host=" in repr(store)
        with store.acquire("a"):
            try:
                store.acquire("b", timeout=0.1)
            except AcquireTimeoutError as exc:
                error = exc
        if password:
            assert password not in repr(store)
            assert password not in all_text(error)
    if password:
        assert password not in caplog.text


# covers: B-PG-1
def test_the_plugin_registers_the_postgres_store():
    pm = make_plugin_manager()
    assert "postgres" in pm.stores().names()
    factory = pm.store_factory("postgres")
    with pytest.raises(ConfigError, match="exactly one of 'dsn'"):
        factory()
    with pytest.raises(ConfigError, match="exactly one of 'dsn'"):
        factory(dsn="host=x", dsn_env="X")
    with pytest.raises(ConfigError, match=r"unknown option.*colour"):
        factory(dsn="host=x", colour="blue")


def test_the_plugin_reads_the_dsn_from_the_named_environment_variable(monkeypatch):
    factory = make_plugin_manager().store_factory("postgres")
    monkeypatch.delenv("DURABLE_TEST_PG_DSN", raising=False)
    with pytest.raises(ConfigError, match=r"DURABLE_TEST_PG_DSN.*not set"):
        factory(dsn_env="DURABLE_TEST_PG_DSN")
    monkeypatch.setenv(
        "DURABLE_TEST_PG_DSN", f"host=127.0.0.1 port={closed_port()} password={SECRET}"
    )
    with pytest.raises(PostgresStoreError) as caught:
        factory(dsn_env="DURABLE_TEST_PG_DSN", acquire_timeout=5)
    assert SECRET not in all_text(caught.value)
    with pytest.raises(ConfigError, match="max_connections"):
        factory(dsn_env="DURABLE_TEST_PG_DSN", max_connections=0)


# covers: B-PG-1
@pytest.mark.postgres
def test_the_plugin_builds_a_working_store(postgres_dsn, monkeypatch):
    monkeypatch.setenv("DURABLE_TEST_PG_DSN", postgres_dsn)
    factory = make_plugin_manager().store_factory("postgres")
    store = factory(dsn_env="DURABLE_TEST_PG_DSN", acquire_timeout=10, max_connections=3)
    try:
        assert isinstance(store, PostgresStore)
        assert store.max_connections == 3 and store.acquire_timeout == 10
        with store.acquire("via-plugin"):
            pass
    finally:
        store.close()


def test_constructor_arguments_are_checked():
    for options, error in (
        ({"acquire_timeout": 0}, ValueError),
        ({"acquire_timeout": "30"}, TypeError),
        ({"max_connections": 0}, ValueError),
        ({"max_connections": 2.5}, TypeError),
        ({"operation_timeout": -1}, ValueError),
    ):
        with pytest.raises(error):
            PostgresStore("host=127.0.0.1", **options)
    with pytest.raises(ConfigError, match="must be a string"):
        PostgresStore(b"host=x")  # type: ignore[arg-type]


# covers: B-PG-3, R-RT-2
def test_a_postgres_store_error_keeps_its_attributes_across_processes():
    import pickle

    error = PostgresStoreError(
        "saving failed", sqlstate="08006", connection_lost=True, uncertain=True
    )
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is PostgresStoreError
    assert (str(copy), copy.sqlstate, copy.connection_lost, copy.uncertain) == (
        "saving failed",
        "08006",
        True,
        True,
    )
