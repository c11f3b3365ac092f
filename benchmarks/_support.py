"""What the benchmarks share: the trivial chain, the stores, a durable PostgreSQL server, medians.

Not a benchmark itself. Every benchmark in this folder imports it (they run as scripts, so this
folder is on ``sys.path``).

- :func:`chain` builds the graph every chain benchmark runs: ``count`` nodes, each waiting for
  the one before and adding one to its value, each noting the moment its body ran.
- :func:`node_gaps` and :func:`near` turn those moments into per-node costs: the gap between
  two consecutive node bodies is what one node of the chain cost, store and runtime included.
- :func:`make_store` opens a fresh memory, file, SQLite or PostgreSQL store.
- :func:`postgres` gives a PostgreSQL DSN: ``PULSE_POSTGRES_TEST_DSN`` when set, else a
  throwaway server started with the test suite's own code (``tests/conftest.py``) and then
  switched to durable settings (``fsync``, ``synchronous_commit`` and ``full_page_writes`` on),
  because the test server turns them off for speed and a benchmark of durable writes without
  them would measure nothing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from durable_core import Graph, Key, MemoryStore

ROOT = Path(__file__).resolve().parent.parent
POSTGRES_DSN_ENV = "PULSE_POSTGRES_TEST_DSN"
STORES = ("memory", "file", "sqlite", "postgres")


# -- the chain ---------------------------------------------------------------------------------


def chain(
    count: int,
    stamps: list[float] | None = None,
    hook: Callable[[int], None] | None = None,
) -> tuple[Graph, Key[int]]:
    """A chain of ``count`` trivial async nodes: node ``i`` sets ``k{i+1} = k{i} + 1``.

    Args:
        count: nodes (>= 1).
        stamps: when given, every body appends ``time.perf_counter()`` (seconds) to it as it
            runs, so ``stamps`` ends with one entry per node that ran, in chain order.
        hook: when given, every body calls it with its node's index (0 to ``count - 1``)
            before anything else: a benchmark may copy the store or end the process there
            (a run killed at that node). The graph's definition does not depend on it.

    Returns:
        The validated graph and its only input key (give it 0).
    """
    keys = [Key(f"k{i}", int) for i in range(count + 1)]
    g = Graph("chain", inputs=[keys[0]])
    note = stamps.append if stamps is not None else None
    for i in range(count):
        src, dst = keys[i], keys[i + 1]

        async def body(rc: Any, src: Key[int] = src, dst: Key[int] = dst, i: int = i) -> None:
            if hook is not None:
                hook(i)
            if note is not None:
                note(time.perf_counter())
            rc.set(dst, rc.get(src) + 1)

        g.add_node(f"n{i}", body, requires=[src], provides=[dst])
    g.validate()
    return g, keys[0]


def node_gaps(stamps: Sequence[float]) -> list[float]:
    """Seconds between consecutive node bodies: entry ``i`` is what node ``i + 1`` cost."""
    return [b - a for a, b in itertools.pairwise(stamps)]


def near(gaps: Sequence[float], node: int, width: int = 100) -> float:
    """Median gap (seconds) of the ``width`` nodes around node ``node`` (1-based), clipped to
    the chain: ``near(gaps, len(gaps) + 1)`` is the median of the last ``width`` nodes."""
    count = len(gaps)
    if count == 0:
        raise ValueError("a chain of one node has no gap between nodes")
    width = max(1, min(width, count))
    start = min(max(0, node - 1 - width // 2), count - width)
    return statistics.median(gaps[start : start + width])


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def ms(seconds: float) -> str:
    """Seconds as milliseconds, three significant figures at least."""
    value = seconds * 1e3
    if value >= 100:
        return f"{value:.0f} ms"
    if value >= 1:
        return f"{value:.2f} ms"
    return f"{value:.3f} ms"


# -- stores ------------------------------------------------------------------------------------


def make_store(kind: str, directory: str, dsn: str | None = None) -> Any:
    """A fresh store of ``kind`` (one of :data:`STORES`) writing under ``directory``
    (PostgreSQL: in the database of ``dsn``)."""
    if kind == "memory":
        return MemoryStore()
    if kind == "file":
        from durable_filestore import FileStore

        return FileStore(os.path.join(directory, "runs"))
    if kind == "sqlite":
        from durable_sqlitestore import SQLiteStore

        return SQLiteStore(os.path.join(directory, "runs.sqlite"))
    if kind == "postgres":
        from durable_postgresstore import PostgresStore

        if dsn is None:
            raise ValueError("the postgres store needs a DSN")
        return PostgresStore(dsn, operation_timeout=None)
    raise ValueError(f"unknown store {kind!r}; choose among {', '.join(STORES)}")


# -- PostgreSQL --------------------------------------------------------------------------------

DURABLE_SETTINGS = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}


def _suite_conftest() -> Any:
    """The test suite's ``tests/conftest.py`` as a module (for its throwaway server)."""
    spec = importlib.util.spec_from_file_location(
        "_durable_suite_conftest", ROOT / "tests" / "conftest.py"
    )
    if spec is None or spec.loader is None:
        raise SystemExit(
            f"cannot load {ROOT / 'tests' / 'conftest.py'}: run from a checkout of the repository"
        )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sync_settings(dsn: str) -> dict[str, str]:
    """The server's ``fsync``, ``synchronous_commit``, ``full_page_writes`` and
    ``wal_sync_method`` as ``SHOW`` reports them."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        names = [*DURABLE_SETTINGS, "wal_sync_method"]
        return {name: str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in names}


def wal_syncs(dsn: str) -> int:
    """The server's count of WAL flushes to disk so far (``pg_stat_wal.wal_sync``).

    A backend reports its counts when its transaction ends idle or when it exits; call this
    after the connections of the measured work are closed."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return int(conn.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()[0])


def _make_durable(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, value in DURABLE_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        conn.execute("SELECT pg_reload_conf()")
    deadline = time.monotonic() + 30
    while sync_settings(dsn) | DURABLE_SETTINGS != sync_settings(dsn):
        if time.monotonic() > deadline:
            raise SystemExit(
                f"the throwaway PostgreSQL server kept {sync_settings(dsn)}; "
                "durable writes cannot be measured on it"
            )
        time.sleep(0.1)


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A DSN of a PostgreSQL database to benchmark on, for the duration of the ``with``.

    ``PULSE_POSTGRES_TEST_DSN`` when set (used as it is: check what :func:`sync_settings`
    prints); otherwise a throwaway server, durable settings on, stopped and removed after.

    Raises:
        SystemExit: no server could be started (the message says why).
    """
    explicit = os.environ.get(POSTGRES_DSN_ENV)
    if explicit:
        yield explicit
        return
    suite = _suite_conftest()
    try:
        server = suite.ThrowawayServer(suite._find_bindir())
        server.start()
    except suite.ServerUnavailable as exc:
        raise SystemExit(f"no PostgreSQL server: {exc}; or set {POSTGRES_DSN_ENV}") from exc
    try:
        _make_durable(server.admin_dsn)
        yield server.dsn_for(suite._TEST_DATABASE)
    finally:
        server.stop()


def postgres_url(dsn: str) -> str:
    """A libpq keyword/value DSN as a ``postgresql://`` URL (for libraries that want one)."""
    from urllib.parse import quote

    if "://" in dsn:
        return dsn
    import psycopg.conninfo

    parts = psycopg.conninfo.conninfo_to_dict(dsn)
    user = quote(str(parts.get("user", "postgres")), safe="")
    password = parts.get("password")
    auth = f"{user}:{quote(str(password), safe='')}" if password else user
    host = parts.get("host", "localhost")
    port = parts.get("port", 5432)
    return f"postgresql://{auth}@{host}:{port}/{parts.get('dbname', 'postgres')}"


# -- a run killed at its last node -------------------------------------------------------------


def killed_chain(count: int, run_id: str) -> tuple[Graph, Key[int], MemoryStore, bytes, Any]:
    """A chain of ``count`` nodes run on a fresh memory store, and the record a kill at its last
    node leaves: the run's record as stored when the last node's body started (``count - 1``
    nodes confirmed, the last one not).

    The run goes on to the end in this process (untimed); ``rewind()`` puts the record back as
    the kill left it, so that every ``Runtime.resume`` after it restores ``count - 1`` nodes
    and runs the last one. Reads the store's private state: this is a benchmark's shortcut
    for a process killed there (``resume_peers.py`` kills a real one on SQLite).

    Returns:
        ``(graph, seed, store, data, rewind)``: ``data`` is the record's canonical JSON as the
        kill left it.
    """
    from durable_core import Runtime
    from durable_core.store.memory import _MemoryRecord

    store = MemoryStore()
    kept: dict[str, Any] = {}

    def hook(index: int) -> None:
        if index == count - 1 and not kept:
            with store._records_lock:
                stored = store._records[run_id]
                kept["data"], kept["revision"] = stored.complete(), stored.revision

    graph, seed = chain(count, hook=hook)
    result = Runtime(store).run(graph, run_id=run_id, version="1", inputs={seed: 0})
    assert result.status == "completed", result.error

    def rewind() -> None:
        with store._records_lock:
            store._records[run_id] = _MemoryRecord(kept["revision"], kept["data"])

    rewind()
    return graph, seed, store, kept["data"], rewind
