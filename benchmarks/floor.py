"""What one confirmed node costs on a durable store, against the bare durable write of its change.

For the file, SQLite and PostgreSQL stores, on a chain of trivial nodes (default 1,000):

- ``durable``: ``Runtime.run`` on a fresh store; per-node cost = the median gap between two
  consecutive node bodies (runtime, encoding and store included).
- ``floor``: the bare durable write, done by hand on the same medium, of the bytes that each
  save of that run changed, one write per save and in the same order; per node = the median
  write times the saves per node. What a save changed is the record's delta against the one
  before it (see below); a durable store cannot write less than that. The bare write is
  - file: one ``write`` appending the bytes to an open journal file + ``fsync``;
  - SQLite: one ``INSERT`` of the bytes committed in WAL mode with ``synchronous=FULL``
    (the store's own settings);
  - PostgreSQL: one committed ``UPDATE`` of a one-row table setting a ``bytea`` to the bytes
    (the server with ``fsync`` and ``synchronous_commit`` on).
- ``ratio`` = durable / floor, worked out in each round (one durable run, then the bare writes
  of its changes, so both see the same moment of a noisy machine); the median of the rounds is
  printed. Target: at most 1.5 on a 1,000-node chain.

The change of a save is measured in a separate, untimed run whose store sessions are wrapped:
when the runtime hands the store a delta (``encoded.delta``), its bytes are used as they are;
otherwise the delta is worked out from the record saved and the one saved before it, in the
same shape (``{"Base", "Revision", "Set", "Unset"}``, canonical JSON, one path per changed
attempt, node, stream or top-level field).

Run it with::

    uv run python benchmarks/floor.py                     # 1,000 nodes, medians of 3 runs
    uv run python benchmarks/floor.py --nodes 500 --stores file sqlite --repeat 5

PostgreSQL: ``PULSE_POSTGRES_TEST_DSN`` when set, else a throwaway server with durable settings
(see ``_support.py``). ``--dir`` chooses the disk for the file and SQLite stores and the bare
writes (default: a temporary directory).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable
from typing import Any

from _support import chain, make_store, median, ms, node_gaps, postgres, sync_settings

from durable_core import Runtime, record_to_json

TARGET = 1.5
FLOOR_STORES = ("file", "sqlite", "postgres")


# -- the change of each save ---------------------------------------------------------------------

_PER_ENTRY = ("Attempts", "Streams")


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def delta(before: dict[str, Any] | None, after: dict[str, Any]) -> bytes:
    """The change from record ``before`` to ``after`` (parsed JSON) as canonical JSON bytes:
    one path per changed top-level field, attempt, stream, scope field or node."""
    base = before.get("Revision", 0) if before else 0
    changes: list[list[Any]] = []
    unset: list[list[str]] = []

    def diff(old: dict[str, Any], new: dict[str, Any], path: list[str], depth: int) -> None:
        for key in sorted(new.keys() | old.keys()):
            here = [*path, key]
            if key not in new:
                unset.append(here)
            elif key not in old:
                changes.append([here, new[key]])
            elif old[key] != new[key]:
                split = (
                    (depth == 0 and key in (*_PER_ENTRY, "Scopes"))
                    or (depth == 1 and path[0] == "Scopes")
                    or (depth == 2 and key == "Nodes")
                )
                if split and isinstance(old[key], dict) and isinstance(new[key], dict):
                    diff(old[key], new[key], here, depth + 1)
                else:
                    changes.append([here, new[key]])

    diff(before or {}, after, [], 0)
    return _canonical(
        {"Base": base, "Revision": after.get("Revision"), "Set": changes, "Unset": unset}
    )


class ChangeSizes:
    """A store whose sessions note the change each save writes (see :func:`delta`)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.changes: list[bytes] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        session = self._store.acquire(run_id, timeout)
        return _Noting(session, self.changes)


def _takes_encoded(save: Callable[..., Any]) -> bool:
    """Whether a session's ``save`` takes the runtime's ``encoded`` argument."""
    try:
        parameters = inspect.signature(save).parameters
    except (TypeError, ValueError):
        return False
    return "encoded" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


class _Noting:
    """Wraps a session; its ``save`` has the wrapped one's signature, so that the runtime
    passes ``encoded`` exactly when the store itself would get it."""

    def __init__(self, session: Any, changes: list[bytes]) -> None:
        self._session = session
        self._changes = changes
        self._previous: dict[str, Any] | None = None
        if _takes_encoded(session.save):

            def save(record: Any, expected_revision: int, encoded: Any = None) -> None:
                session.save(record, expected_revision, encoded=encoded)
                self._note(record, getattr(encoded, "delta", None))

        else:

            def save(record: Any, expected_revision: int) -> None:  # type: ignore[misc]
                session.save(record, expected_revision)
                self._note(record, None)

        self.save = save

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self._session.close()

    def _note(self, record: Any, given: bytes | None) -> None:
        tree = json.loads(record_to_json(record))
        self._changes.append(given if given is not None else delta(self._previous, tree))
        self._previous = tree


# -- bare durable writes -------------------------------------------------------------------------


def bare_file(directory: str, payloads: list[bytes], dsn: str | None) -> list[float]:
    """Seconds of each ``write`` + ``fsync`` appending a payload to one journal file."""
    path = os.path.join(tempfile.mkdtemp(prefix="bare-", dir=directory), "journal")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    times = []
    try:
        os.fsync(fd)
        for payload in payloads:
            started = time.perf_counter()
            os.write(fd, payload)
            os.fsync(fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
    return times


def bare_sqlite(directory: str, payloads: list[bytes], dsn: str | None) -> list[float]:
    """Seconds of each ``INSERT`` of a payload committed with WAL + ``synchronous=FULL``."""
    path = os.path.join(tempfile.mkdtemp(prefix="bare-", dir=directory), "bare.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    times = []
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE changes (id INTEGER PRIMARY KEY, data BLOB)")
        for payload in payloads:
            started = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO changes (data) VALUES (?)", (payload,))
            db.execute("COMMIT")
            times.append(time.perf_counter() - started)
    finally:
        db.close()
    return times


def bare_postgres(directory: str, payloads: list[bytes], dsn: str | None) -> list[float]:
    """Seconds of each committed ``UPDATE`` of a one-row table's ``bytea`` to a payload."""
    import psycopg

    assert dsn is not None
    table = f"durable_bench_floor_{os.getpid()}"
    times = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, data bytea)")
        try:
            conn.execute(f"INSERT INTO {table} VALUES (1, '')")
            for payload in payloads:
                started = time.perf_counter()
                conn.execute(f"UPDATE {table} SET data = %s WHERE id = 1", (payload,))
                times.append(time.perf_counter() - started)
        finally:
            conn.execute(f"DROP TABLE {table}")
    return times


BARE: dict[str, Callable[[str, list[bytes], str | None], list[float]]] = {
    "file": bare_file,
    "sqlite": bare_sqlite,
    "postgres": bare_postgres,
}
BARE_WHAT = {
    "file": "append + fsync",
    "sqlite": "INSERT, FULL-sync commit",
    "postgres": "committed UPDATE",
}


# -- runs ----------------------------------------------------------------------------------------


def durable_run(kind: str, nodes: int, base: str, dsn: str | None, wrap: bool) -> Any:
    """One ``Runtime.run`` of the chain on a fresh store: (gaps, wall seconds, changes)."""
    stamps: list[float] = []
    graph, seed = chain(nodes, stamps)
    store = make_store(kind, tempfile.mkdtemp(prefix=f"{kind}-", dir=base), dsn)
    target = ChangeSizes(store) if wrap else store
    try:
        started = time.perf_counter()
        result = Runtime(target).run(
            graph, run_id=f"floor-{time.time_ns()}", version="1", inputs={seed: 0}
        )
        wall = time.perf_counter() - started
        assert result.status == "completed", result.error
    finally:
        store.close()
    return node_gaps(stamps), wall, target.changes if wrap else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000, help="nodes in the chain")
    parser.add_argument("--stores", nargs="+", choices=FLOOR_STORES, default=list(FLOOR_STORES))
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per store (medians)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()

    print(f"chain of {args.nodes} nodes; medians of {args.repeat} rounds")
    print(
        f"{'store':<10}{'durable/node':>14}{'wall/node':>12}{'saves/node':>12}"
        f"{'change B':>10}{'bare write':>12}{'floor/node':>12}{'ratio':>8}  bare write is"
    )
    verdicts = []
    with tempfile.TemporaryDirectory(dir=args.dir) as base, contextlib.ExitStack() as stack:
        dsn = stack.enter_context(postgres()) if "postgres" in args.stores else None
        if dsn is not None:
            print(f"PostgreSQL server: {sync_settings(dsn)}", flush=True)
        for kind in args.stores:
            _, _, changes = durable_run(kind, args.nodes, base, dsn, wrap=True)
            saves = len(changes) / args.nodes
            # Durable and bare in turn, so that both see the same moment of a noisy machine.
            per_nodes, walls, bares, ratios = [], [], [], []
            for _ in range(args.repeat):
                gaps, wall, _ = durable_run(kind, args.nodes, base, dsn, False)
                bare_times = BARE[kind](base, changes, dsn)
                per_nodes.append(median(gaps))
                walls.append(wall / args.nodes)
                bares.append(median(bare_times))
                ratios.append(per_nodes[-1] / (bares[-1] * saves))
            per_node, wall, bare = median(per_nodes), median(walls), median(bares)
            floor = bare * saves
            ratio = median(ratios)
            print(
                f"{kind:<10}{ms(per_node):>14}{ms(wall):>12}{saves:>12.2f}"
                f"{median([len(c) for c in changes]):>10.0f}{ms(bare):>12}{ms(floor):>12}"
                f"{ratio:>8.2f}  {BARE_WHAT[kind]}",
                flush=True,
            )
            verdicts.append(
                f"{kind}: {ratio:.2f}x the floor (target <= {TARGET}) "
                f"{'met' if ratio <= TARGET else 'NOT met'}"
            )
    print()
    print("durable/node: median gap between node bodies; wall/node: whole run / nodes;")
    print("change B: median bytes a save changed; floor/node: bare write x saves/node")
    for line in verdicts:
        print(line)


if __name__ == "__main__":
    main()
