"""Fixtures of the PostgreSQL store tests: stores closed at teardown, an admin connection, and a
TCP proxy that can freeze (a network that stops answering)."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from durable_postgresstore import PostgresStore, advisory_key


@pytest.fixture
def make_store(postgres_dsn: str) -> Iterator[Callable[..., PostgresStore]]:
    """Build PostgresStores on the test database (or another DSN); all closed at teardown."""
    stores: list[PostgresStore] = []

    def make(dsn: str | None = None, **options: Any) -> PostgresStore:
        store = PostgresStore(postgres_dsn if dsn is None else dsn, **options)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def store(make_store: Callable[..., PostgresStore]) -> PostgresStore:
    return make_store()


@pytest.fixture
def admin(postgres_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A separate autocommit connection to the test database, for looking and meddling."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def owner_pid(admin: psycopg.Connection[Any]) -> Callable[[str], int | None]:
    """``owner_pid(run_id)``: the backend pid holding the run's advisory lock, or None (the
    query documented in ``durable_postgresstore.keys``)."""

    def find(run_id: str) -> int | None:
        return _owner_pid(admin, run_id)

    return find


def _owner_pid(conn: psycopg.Connection[Any], run_id: str) -> int | None:
    row = conn.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted "
        "AND ((classid::bigint << 32) | objid::bigint) = %s::bigint",
        [advisory_key(run_id)],
    ).fetchone()
    return None if row is None else row[0]


class FreezableProxy:
    """A TCP proxy to the test server that can stop forwarding: a network that went silent."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._frozen = threading.Event()
        self._stopped = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        self._frozen.set()

    def thaw(self) -> None:
        self._frozen.clear()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        try:
            while not self._stopped.is_set():
                if self._frozen.is_set():
                    self._stopped.wait(0.02)
                    continue
                ready, _, _ = select.select([a, b], [], [], 0.05)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except OSError:
            return
        finally:
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.close()

    def close(self) -> None:
        self._stopped.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()


@pytest.fixture
def proxy(postgres_dsn: str) -> Iterator[tuple[FreezableProxy, str]]:
    """A freezable proxy to the test server and a DSN going through it."""
    params = conninfo_to_dict(postgres_dsn)
    host = params.get("host") or "127.0.0.1"
    if str(host).startswith("/"):
        pytest.skip("the test server is reached through a unix socket; the proxy needs TCP")
    port = int(params.get("port") or 5432)
    proxy = FreezableProxy(str(host), port)
    params.pop("hostaddr", None)
    params.update(host="127.0.0.1", port=str(proxy.port))
    yield proxy, make_conninfo(**params)
    proxy.close()
