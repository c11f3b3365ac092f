"""The CPU the durable layer spends per node, beyond the flush: the memory store against the engine.

A chain of ``--nodes`` trivial ``async def`` nodes (``_support.chain``) is run, in turn, by the
plain engine (``execute``: no records, no saves) and by ``Runtime.run`` on a ``MemoryStore``
(every node confirmed by a save, nothing flushed to disk). Each run is timed in the CPU time of
the process (``time.process_time``: what other processes on a loaded machine do is not counted,
unlike a wall clock), and the figure is::

    (memory store's CPU - engine's CPU) / nodes        µs per node

that is the runtime's own work per confirmed node (proposal, encodings, record, save, hand-over,
events, sharing the outputs) without the flush a durable store adds. The rounds alternate the
two, and the median of ``--repeat`` rounds is printed with its range. Target: at most 50 µs.

Beside it, in the same rounds, a lower bound (``least``): a loop doing per node only what the
record's rules cannot do without, on plain Python objects: the trivial body, its value encoded
(canonical JSON) with its SHA-256 digest and base64 text, the save's change encoded (canonical
JSON of each delta the memory store received in the timed run, parsed beforehand), the
compare-and-swap on the revision, the bytes kept, and one turn of an ``asyncio`` event loop
(the least a save answered on the loop costs a waiting node). No record objects, no proposal,
no checks of the record's rules. What the layer costs beyond ``least`` is ours; ``least`` is
Python's floor for this work.

Run it with::

    uv run python benchmarks/durable_cpu.py
    uv run python benchmarks/durable_cpu.py --nodes 2000 --repeat 9
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import hashlib
import json
import os
import time
from typing import Any

from _support import chain, median

from durable_core import MemoryStore, Runtime, execute
from durable_core.store import memory

TARGET_US = 50.0


def engine_cpu(nodes: int) -> float:
    """CPU seconds of the plain engine running the chain."""
    graph, seed = chain(nodes)
    gc.collect()
    started = time.process_time()
    execute(graph, {seed: 0})
    return time.process_time() - started


def memory_cpu(nodes: int) -> float:
    """CPU seconds of ``Runtime.run`` on a fresh ``MemoryStore`` running the chain."""
    graph, seed = chain(nodes)
    store = MemoryStore()
    gc.collect()
    started = time.process_time()
    result = Runtime(store).run(
        graph, run_id=f"cpu-{time.time_ns()}", version="1", inputs={seed: 0}
    )
    elapsed = time.process_time() - started
    assert result.status == "completed", result.error
    return elapsed


def deltas_of(nodes: int) -> list[bytes]:
    """The deltas a ``MemoryStore`` receives while it runs the chain (untimed)."""
    seen: list[bytes] = []
    write = memory.MemorySession._write

    def keep(self: Any, record: Any, expected: int, encoded: Any) -> bool:
        if expected and encoded.delta is not None:
            seen.append(encoded.delta)
        return write(self, record, expected, encoded)

    memory.MemorySession._write = keep  # type: ignore[method-assign]
    try:
        memory_cpu(nodes)
    finally:
        memory.MemorySession._write = write  # type: ignore[method-assign]
    return seen


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def least_cpu(changes: list[dict[str, Any]]) -> float:
    """CPU seconds of the least loop over ``changes`` (see the module docstring)."""

    async def steps() -> None:
        revision, kept = changes[0]["Base"], []
        for value, change in enumerate(changes, 1):
            data = _canonical(value)
            hashlib.sha256(data).hexdigest()
            base64.b64encode(data).decode()
            if change["Base"] != revision:
                raise RuntimeError("compare-and-swap failed")
            kept.append(_canonical(change))
            revision = change["Revision"]
            await asyncio.sleep(0)

    gc.collect()
    started = time.process_time()
    asyncio.run(steps())
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000, help="nodes in the chain")
    parser.add_argument("--repeat", type=int, default=7, help="rounds (engine, then memory)")
    args = parser.parse_args()
    memory_cpu(50)  # imports and first-use caches out of the timed rounds
    engine_cpu(50)
    changes = [json.loads(delta) for delta in deltas_of(args.nodes)]
    engine: list[float] = []
    store: list[float] = []
    least: list[float] = []
    for _ in range(args.repeat):
        engine.append(engine_cpu(args.nodes) / args.nodes * 1e6)
        store.append(memory_cpu(args.nodes) / args.nodes * 1e6)
        least.append(least_cpu(changes) / len(changes) * 1e6)
    layer = [m - e for m, e in zip(store, engine, strict=True)]
    load = os.getloadavg()[0]
    print(f"chain of {args.nodes} nodes; {args.repeat} rounds; load average {load:.1f}")
    print(f"deltas: {len(changes)}, {median([len(_canonical(c)) for c in changes]):.0f} bytes")
    print("µs of process CPU per node: median (min-max)")
    rows = (
        ("engine", engine),
        ("memory store", store),
        ("durable layer", layer),
        ("least", least),
    )
    for label, values in rows:
        print(f"{label:<16}{median(values):8.1f}  ({min(values):.1f}-{max(values):.1f})")
    print(f"ours (layer - least): {median(layer) - median(least):.1f} µs")
    verdict = "met" if median(layer) <= TARGET_US else "NOT met"
    print(f"durable layer per node: {median(layer):.1f} µs (target <= {TARGET_US:.0f}) {verdict}")


if __name__ == "__main__":
    main()
