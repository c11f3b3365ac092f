"""Where a confirmed node's time goes: the runtime's hot path, phase by phase, per node.

Runs a chain of trivial nodes (default 1,000) with ``Runtime.run`` on each store asked for, with
a stopwatch around each phase of the path a node takes once its body returned: encoding its
output value, building the proposal (the mutations), adopting it into the committed record,
encoding the save's delta, the store's ``Session.save`` (its delta check apart), the recovery
events, sharing the outputs with readers, and what is left between the node asking for its
save and getting the answer (handing the save to the save thread and back, the group-commit
turn of the event loop). Each phase is the median of its calls times its calls per node, in
microseconds; beside them the median gap between node bodies (what the node cost in all) and
the engine alone (``execute``: no store). It also prints the engine alone with plain ``def``
bodies, whose difference with ``async def`` bodies is the thread hop of a plain body.

The stopwatches wrap internal functions, so they add about a microsecond per call: read the
phases as shares of the whole, and the median gap as the real cost.

Run it with::

    uv run python benchmarks/hotpath.py                        # memory and SQLite, 1,000 nodes
    uv run python benchmarks/hotpath.py --stores memory file sqlite --nodes 2000

``--stores postgres`` uses ``PULSE_POSTGRES_TEST_DSN`` or a throwaway server (see
``_support.py``).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from _support import STORES, chain, make_store, median, node_gaps, postgres

from durable_core import Graph, Key, Runtime, execute
from durable_core.durable import checkpointer as C
from durable_core.durable import ledger as L
from durable_core.records import encoder
from durable_core.store import kit

_clock = time.perf_counter
_calls: dict[str, list[float]] = collections.defaultdict(list)


def _timed(owner: Any, name: str, label: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = _clock()
        try:
            return original(*args, **kwargs)
        finally:
            _calls[label].append(_clock() - started)

    setattr(owner, name, timed)


def _timed_async(owner: Any, name: str, label: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = _clock()
        try:
            return await original(*args, **kwargs)
        finally:
            _calls[label].append(_clock() - started)

    setattr(owner, name, timed)


def _install() -> None:
    delta_of = kit.BaseSession._delta_of

    def timed_delta_of(encoded: Any, expected: int) -> Any:
        started = _clock()
        try:
            return delta_of(encoded, expected)
        finally:
            _calls["delta check"].append(_clock() - started)

    kit.BaseSession._delta_of = staticmethod(timed_delta_of)  # type: ignore[method-assign]
    _timed(L.Ledger, "commit_each", "commit_each")
    _timed(L.Ledger, "_save", "_save")
    _timed(L.Ledger, "_store", "Session.save")
    _timed(L, "adopt", "adopt")
    _timed(encoder.RecordEncoder, "encode_change", "encode delta")
    _timed(C, "encode_value_record", "encode value")
    _timed(C.DurableCheckpointer, "_event", "events")
    _timed(C, "share_values", "share")
    _timed_async(C.DurableCheckpointer, "commit_node", "commit_node")


def _per_node(label: str, nodes: int) -> float:
    """Median call of ``label`` × its calls per node, in µs (0 when never called)."""
    calls = _calls.get(label, [])
    return median(calls) * len(calls) / nodes * 1e6 if calls else 0.0


def _plain_chain(count: int, stamps: list[float]) -> tuple[Graph, Key[int]]:
    keys = [Key(f"k{i}", int) for i in range(count + 1)]
    g = Graph("plain-chain", inputs=[keys[0]])
    for i in range(count):

        def body(rc: Any, src: Key[int] = keys[i], dst: Key[int] = keys[i + 1]) -> None:
            stamps.append(time.perf_counter())
            rc.set(dst, rc.get(src) + 1)

        g.add_node(f"n{i}", body, requires=[keys[i]], provides=[keys[i + 1]])
    return g, keys[0]


def _engine_gap(build: Callable[[int, list[float]], tuple[Graph, Key[int]]], nodes: int) -> float:
    stamps: list[float] = []
    graph, seed = build(nodes, stamps)
    execute(graph, {seed: 0})
    return median(node_gaps(stamps)) * 1e6


def _store_run(kind: str, nodes: int, base: str, dsn: str | None) -> dict[str, float]:
    _calls.clear()
    stamps: list[float] = []
    graph, seed = chain(nodes, stamps)
    store = make_store(kind, tempfile.mkdtemp(dir=base), dsn)
    try:
        result = Runtime(store).run(
            graph, run_id=f"hotpath-{time.time_ns()}", version="1", inputs={seed: 0}
        )
        assert result.status == "completed", result.error
    finally:
        store.close()
    p = functools.partial(_per_node, nodes=nodes)
    phases = {
        "encode the output value (codecs)": p("encode value"),
        "proposal: build it, run the mutations": p("commit_each") - p("_save"),
        "adopt the proposal into the record": p("adopt"),
        "encode the save's delta": p("encode delta"),
        "store: check the delta (store kit)": p("delta check"),
        "store: the rest of Session.save": p("Session.save") - p("delta check"),
        "ledger: the rest of the save": p("_save")
        - p("adopt")
        - p("encode delta")
        - p("Session.save"),
        "hand the save over and back, group-commit turn": p("commit_node")
        - p("encode value")
        - p("commit_each"),
        "recovery events": p("events"),
        "share the outputs with readers": p("share"),
    }
    phases["node in all (median gap between bodies)"] = median(node_gaps(stamps)) * 1e6
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000, help="nodes in the chain")
    parser.add_argument("--stores", nargs="+", choices=STORES, default=["memory", "sqlite"])
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()

    engine_async = _engine_gap(chain, args.nodes)
    engine_plain = _engine_gap(_plain_chain, args.nodes)
    _install()
    print(f"chain of {args.nodes} nodes; load average {os.getloadavg()[0]:.1f}; µs per node")
    print(f"engine alone, async def bodies: {engine_async:8.1f}")
    print(
        f"engine alone, plain def bodies: {engine_plain:8.1f}  "
        f"(thread hop of a plain body: {engine_plain - engine_async:.1f})"
    )
    with tempfile.TemporaryDirectory(dir=args.dir) as base, contextlib.ExitStack() as stack:
        dsn = stack.enter_context(postgres()) if "postgres" in args.stores else None
        columns = {kind: _store_run(kind, args.nodes, base, dsn) for kind in args.stores}
    print()
    print(f"{'phase':<50}" + "".join(f"{kind:>10}" for kind in columns))
    for phase in next(iter(columns.values())):
        print(f"{phase:<50}" + "".join(f"{columns[kind][phase]:>10.1f}" for kind in columns))


if __name__ == "__main__":
    main()
