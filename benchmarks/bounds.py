"""Lower bounds: the least any Python runtime with the record's rules could spend per node.

``floor.py`` and ``resume.py`` compare the runtime with a bare operation (one durable write of a
save's change; ``json.loads`` of a record). This benchmark measures, on the same machine and in
the same run, what an implementation reduced to the work those rules cannot do without would
cost, so that a ratio can be read against what is reachable at all.

``floor`` (per confirmed node of a 1,000-node chain, on file, SQLite and PostgreSQL):

- ``bare``: the bare durable write of the change, as in ``floor.py``.
- ``least step``: a loop doing, per node, only what a durable step needs: call the trivial body,
  encode its value and take the value's SHA-256 digest, encode the change (canonical JSON of
  the same shape and size as the runtime's delta), and make it durable with a compare-and-swap
  on the revision: the file store's frame (length, CRC-32) appended and ``fsync``'d after a
  revision check in memory; one SQLite transaction with ``UPDATE ... WHERE revision = ?`` and
  the ``INSERT`` of the change, committed with ``synchronous=FULL``; on PostgreSQL the same
  ``UPDATE`` and ``INSERT`` in one statement (``WITH``), committed in one round trip.
  No graph, no event loop, no record objects, no proposal, no ownership checks.
- ``engine alone``: the graph engine's own cost per node of the same chain (``execute``, no
  store), which any runtime built on a graph engine adds.
- the ratios ``least step / bare`` and ``(least step + engine alone) / bare``. The target of
  ``floor.py`` is 1.5; what these ratios leave below it is all the budget there is for
  records, proposals, adoption after the save, codecs and the store's checks.

``resume`` (a 10,000-node chain killed at its last node, as ``resume.py`` makes it;
``--resume-run finished`` for the finished one):

- ``json.loads`` of the record's bytes;
- ``parse + values``: ``json.loads``, then for every stored value: base64-decode its bytes,
  check their SHA-256 against the stored digest, decode them (``json.loads``): the checks that
  resume must make before anything runs, on plain dicts, with no other check and no restore;
- ``+ record objects``: the same, building one slotted object per attempt, node and value;
- ``Runtime.resume`` of the same run (the killed one: restoring the confirmed nodes, running
  the last one, saving);
- the ratios to ``json.loads``. The target of ``resume.py`` is 4.

Run it with::

    uv run python benchmarks/bounds.py                       # both, every store
    uv run python benchmarks/bounds.py floor --stores sqlite file --repeat 5
    uv run python benchmarks/bounds.py resume

PostgreSQL: ``PULSE_POSTGRES_TEST_DSN`` when set, else a throwaway server with durable settings
(see ``_support.py``).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import gc
import hashlib
import json
import os
import sqlite3
import struct
import tempfile
import time
import zlib
from collections.abc import Callable
from typing import Any

from _support import chain, killed_chain, median, ms, node_gaps, postgres
from floor import BARE, FLOOR_STORES, durable_run

from durable_core import MemoryStore, Runtime, execute, record_to_json

FLOOR_TARGET = 1.5
RESUME_TARGET = 4.0


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


# -- floor: the least durable step -----------------------------------------------------------


def _templates(changes: list[bytes]) -> list[dict[str, Any]]:
    """The runtime's changes, parsed: the least step encodes each again (same shape, size)."""
    return [json.loads(change) for change in changes]


def least_file(directory: str, templates: list[dict[str, Any]], dsn: str | None) -> list[float]:
    """Seconds per step: body, value + digest, change, CAS in memory, framed append + fsync."""
    path = os.path.join(tempfile.mkdtemp(prefix="least-", dir=directory), "journal")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fsync(fd)
    revision, value, times = 0, 0, []
    try:
        for change in templates:
            started = time.perf_counter()
            value = _step(value, change)
            if change["Base"] != revision:  # the compare of compare-and-swap
                revision = change["Base"]
            data = _canonical(change)
            os.write(fd, struct.pack(">II", len(data), zlib.crc32(data)) + data)
            os.fsync(fd)
            revision = change["Revision"]
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
    return times


def least_sqlite(directory: str, templates: list[dict[str, Any]], dsn: str | None) -> list[float]:
    """Seconds per step: body, value + digest, change, one FULL-sync transaction with the
    revision CAS and the change's INSERT."""
    path = os.path.join(tempfile.mkdtemp(prefix="least-", dir=directory), "least.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    value, times = 0, []
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, revision INTEGER)")
        db.execute("CREATE TABLE changes (run_id TEXT, revision INTEGER, data BLOB)")
        db.execute("INSERT INTO runs VALUES ('run', ?)", (templates[0]["Base"],))
        for change in templates:
            started = time.perf_counter()
            value = _step(value, change)
            data = _canonical(change)
            db.execute("BEGIN IMMEDIATE")
            updated = db.execute(
                "UPDATE runs SET revision = ? WHERE run_id = 'run' AND revision = ?",
                (change["Revision"], change["Base"]),
            ).rowcount
            if updated != 1:
                db.execute("ROLLBACK")
                raise RuntimeError("compare-and-swap failed")
            db.execute("INSERT INTO changes VALUES ('run', ?, ?)", (change["Revision"], data))
            db.execute("COMMIT")
            times.append(time.perf_counter() - started)
    finally:
        db.close()
    return times


def least_postgres(directory: str, templates: list[dict[str, Any]], dsn: str | None) -> list[float]:
    """Seconds per step: body, value + digest, change, then one statement committed on its own
    (one round trip): the revision CAS and the change's INSERT in one ``WITH``."""
    import psycopg

    assert dsn is not None
    runs, changes = f"least_runs_{os.getpid()}", f"least_changes_{os.getpid()}"
    statement = (
        f"WITH cas AS (UPDATE {runs} SET revision = %s WHERE run_id = 'run' AND revision = %s "
        f"RETURNING run_id) INSERT INTO {changes} SELECT run_id, %s, %s FROM cas"
    )
    value, times = 0, []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {runs} (run_id text PRIMARY KEY, revision int8)")
        conn.execute(f"CREATE TABLE {changes} (run_id text, revision int8, data bytea)")
        try:
            conn.execute(f"INSERT INTO {runs} VALUES ('run', %s)", (templates[0]["Base"],))
            for change in templates:
                started = time.perf_counter()
                value = _step(value, change)
                data = _canonical(change)
                revision = change["Revision"]
                cursor = conn.execute(statement, (revision, change["Base"], revision, data))
                if cursor.rowcount != 1:
                    raise RuntimeError("compare-and-swap failed")
                times.append(time.perf_counter() - started)
        finally:
            conn.execute(f"DROP TABLE {runs}")
            conn.execute(f"DROP TABLE {changes}")
    return times


def _step(value: int, change: dict[str, Any]) -> int:
    """The trivial body, then its value encoded and digested, as a save's change holds them
    (the runtime's change already holds a value of that size, so it is encoded as it is)."""
    value += 1
    data = _canonical(value)
    hashlib.sha256(data).hexdigest()
    base64.b64encode(data).decode()
    return value


LEAST: dict[str, Callable[[str, list[dict[str, Any]], str | None], list[float]]] = {
    "file": least_file,
    "sqlite": least_sqlite,
    "postgres": least_postgres,
}


def engine_alone(nodes: int) -> float:
    """Median seconds per node of the chain on the engine alone (``execute``, no store)."""
    stamps: list[float] = []
    graph, seed = chain(nodes, stamps)
    execute(graph, {seed: 0})
    return median(node_gaps(stamps))


def floor_bounds(args: argparse.Namespace) -> None:
    print(f"floor: chain of {args.nodes} nodes; medians of {args.repeat} rounds")
    print(
        f"{'store':<10}{'bare':>10}{'least step':>12}{'engine':>10}{'runtime':>10}"
        f"{'least/bare':>12}{'+engine':>10}{'runtime/bare':>14}"
    )
    with tempfile.TemporaryDirectory(dir=args.dir) as base, contextlib.ExitStack() as stack:
        dsn = stack.enter_context(postgres()) if "postgres" in args.stores else None
        for kind in args.stores:
            _, _, changes = durable_run(kind, args.nodes, base, dsn, wrap=True)
            bares, leasts, engines, runtimes = [], [], [], []
            for _ in range(args.repeat):  # in turn, so each sees the same moment of the machine
                gaps, _, _ = durable_run(kind, args.nodes, base, dsn, False)
                runtimes.append(median(gaps))
                bares.append(median(BARE[kind](base, changes, dsn)))
                leasts.append(median(LEAST[kind](base, _templates(changes), dsn)))
                engines.append(engine_alone(args.nodes))
            bare, least, engine, runtime = (
                median(bares),
                median(leasts),
                median(engines),
                median(runtimes),
            )
            print(
                f"{kind:<10}{ms(bare):>10}{ms(least):>12}{ms(engine):>10}{ms(runtime):>10}"
                f"{least / bare:>12.2f}{(least + engine) / bare:>10.2f}{runtime / bare:>14.2f}",
                flush=True,
            )
    print()
    print("bare: the bare durable write of the change (floor.py); least step: body, value,")
    print("digest, change and its durable compare-and-swap, nothing else; engine: the engine")
    print("alone per node; runtime: Runtime.run per node (floor.py's durable/node)")
    print(f"target of floor.py: runtime/bare <= {FLOOR_TARGET}")


# -- resume: the least check of a record -----------------------------------------------------


class _Attempt:
    __slots__ = ("boundary", "index", "limit", "node_id", "parent", "state")


class _Node:
    __slots__ = ("attempt", "node_id", "outputs", "reason")


class _Value:
    __slots__ = ("data", "digest", "name", "state", "type_id", "version")


def parse_and_values(data: bytes) -> dict[tuple[str, str, str], Any]:
    """``json.loads``, then every ready value's bytes digested, checked and decoded."""
    tree = json.loads(data)
    values = {}
    for scope_id, scope in tree["Scopes"].items():
        for node_id, node in scope["Nodes"].items():
            for value in node["Outputs"]:
                raw = base64.b64decode(value["Data"])
                if hashlib.sha256(raw).hexdigest() != value["Digest"]:
                    raise ValueError(f"digest of {node_id}/{value['Name']}")
                values[(scope_id, node_id, value["Name"])] = json.loads(raw)
    return values


def parse_values_objects(data: bytes) -> tuple[dict[str, _Attempt], dict[str, _Node]]:
    """:func:`parse_and_values` that also builds one object per attempt, node and value."""
    tree = json.loads(data)
    attempts = {}
    for attempt_id, raw in tree["Attempts"].items():
        attempt = _Attempt()
        attempt.boundary, attempt.index, attempt.limit = (
            raw["Boundary"],
            raw["Index"],
            raw["Limit"],
        )
        attempt.node_id, attempt.parent, attempt.state = raw["NodeID"], raw["Parent"], raw["State"]
        attempts[attempt_id] = attempt
    nodes = {}
    for scope_id, scope in tree["Scopes"].items():
        for node_id, raw_node in scope["Nodes"].items():
            node = _Node()
            node.attempt, node.node_id, node.reason = (
                raw_node["Attempt"],
                raw_node["NodeID"],
                raw_node["Reason"],
            )
            outputs = []
            for raw in raw_node["Outputs"]:
                value = _Value()
                value.data = base64.b64decode(raw["Data"])
                value.digest, value.name, value.state = raw["Digest"], raw["Name"], raw["State"]
                value.type_id, value.version = raw["TypeID"], raw["Version"]
                if hashlib.sha256(value.data).hexdigest() != value.digest:
                    raise ValueError(f"digest of {node_id}/{value.name}")
                json.loads(value.data)
                outputs.append(value)
            node.outputs = outputs
            nodes[f"{scope_id}/{node_id}"] = node
    return attempts, nodes


def _cpu(func: Callable[[bytes], Any], data: bytes, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        started = time.process_time()
        func(data)
        times.append(time.process_time() - started)
    return median(times)


def resume_bounds(args: argparse.Namespace) -> None:
    rewind: Callable[[], None] | None = None
    if args.resume_run == "killed":
        graph, seed, store, data, rewind = killed_chain(args.resume_nodes, "bounds")
        runtime = Runtime(store)
    else:
        graph, seed = chain(args.resume_nodes)
        store = MemoryStore()
        runtime = Runtime(store)
        first = runtime.run(graph, run_id="bounds", version="1", inputs={seed: 0})
        assert first.status == "completed"
        with store.acquire("bounds") as session:
            data = record_to_json(session.load())
    loads = _cpu(json.loads, data, args.repeat)
    least = _cpu(parse_and_values, data, args.repeat)
    objects = _cpu(parse_values_objects, data, args.repeat)
    times = []
    for _ in range(args.repeat):
        if rewind is not None:
            rewind()
        gc.collect()
        started = time.process_time()
        result = runtime.resume(graph, run_id="bounds", version="1", inputs={seed: 0})
        times.append(time.process_time() - started)
        assert result.status == "completed", result.error
    resumed = median(times)
    what = "killed at its last node" if rewind is not None else "finished"
    print(f"resume: a {args.resume_nodes}-node chain {what}, record {len(data):,} bytes;")
    print(f"CPU medians of {args.repeat} runs; x = multiple of json.loads")
    for label, seconds in (
        ("json.loads", loads),
        ("parse + values (digest, decode)", least),
        ("  + one object per attempt, node, value", objects),
        ("Runtime.resume", resumed),
    ):
        print(f"{label:<42}{ms(seconds):>10}{seconds / loads:>8.2f}x")
    print(f"target of resume.py: Runtime.resume <= {RESUME_TARGET}x json.loads")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", nargs="*", help="floor, resume or both (default: both)")
    parser.add_argument("--nodes", type=int, default=1000, help="nodes in the floor's chain")
    parser.add_argument("--resume-nodes", type=int, default=10_000, help="nodes to resume")
    parser.add_argument("--resume-run", choices=("killed", "finished"), default="killed")
    parser.add_argument("--stores", nargs="+", choices=FLOOR_STORES, default=list(FLOOR_STORES))
    parser.add_argument("--repeat", type=int, default=3, help="timed runs (medians)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()
    which = args.which or ["floor", "resume"]
    if not set(which) <= {"floor", "resume"}:
        parser.error(f"unknown bound(s) {sorted(set(which) - {'floor', 'resume'})}: floor, resume")
    print(f"load average: {' / '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if "floor" in which:
        floor_bounds(args)
        print()
    if "resume" in which:
        resume_bounds(args)


if __name__ == "__main__":
    main()
