"""What giving every reader its own copy of a mutable value costs, for one large value.

A node produces one large list; ``readers`` nodes read it (``rc.get``) and do nothing else. In
a durable run each reader gets its own copy, decoded from the bytes saved for the value (the
value is encoded and saved once, whatever the number of readers). Printed (MemoryStore, best of
``--repeat``):

- ``engine``: the plain engine (``execute``): every reader gets the same object;
- ``durable``: ``Runtime.run``;
- ``per reader``: (durable - durable with no reader) / readers: the cost of one copy;
- ``save``: what encoding the value for its save costs (``Codecs.encode_value``);
- ``json.loads``: one ``json.loads`` of the value's saved bytes, for scale.

Run it with::

    uv run python benchmarks/value_copies.py
    uv run python benchmarks/value_copies.py --items 1000000 --readers 1 4 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from durable_core import Codecs, Graph, Key, MemoryStore, Runtime, execute

SIZE = Key("size", int)
VALUE = Key("value", list[int])


def graph(readers: int) -> Graph:
    g = Graph("copies", inputs=[SIZE])

    @g.node("make", requires=[SIZE], provides=[VALUE])
    def make(rc: Any) -> None:
        rc.set(VALUE, list(range(rc.get(SIZE))))

    for i in range(readers):

        @g.node(f"read{i}", requires=[VALUE], provides=[])
        def read(rc: Any) -> None:
            rc.get(VALUE)

    return g


def best(repeat: int, run: Any) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--readers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    codecs = Codecs.default()
    value = list(range(args.items))
    data = codecs.encode_value(list[int], value).data
    save = best(args.repeat, lambda: codecs.encode_value(list[int], value))
    loads = best(args.repeat, lambda: json.loads(data))
    runs = iter(range(10**9))

    def durable(readers: int) -> float:
        g = graph(readers)

        def once() -> None:
            result = Runtime(MemoryStore(), codecs).run(
                g, run_id=f"r{next(runs)}", version="v", inputs={SIZE: args.items}
            )
            assert result.status == "completed", result.error

        return best(args.repeat, once)

    none = durable(0)
    print(f"value: list of {args.items:,} ints, {len(data) / 2**20:.1f} MiB of JSON")
    print(f"save (encode) {save * 1e3:.0f} ms, json.loads {loads * 1e3:.0f} ms")
    print(f"{'readers':>7} {'engine':>9} {'durable':>9} {'per reader':>11}")
    print(f"{0:>7} {'':>9} {none * 1e3:>7.0f}ms")
    for readers in args.readers:
        engine = best(args.repeat, lambda r=readers: execute(graph(r), {SIZE: args.items}))
        copied = durable(readers)
        per_reader = (copied - none) / readers
        print(
            f"{readers:>7} {engine * 1e3:>7.0f}ms {copied * 1e3:>7.0f}ms {per_reader * 1e3:>9.0f}ms"
        )


if __name__ == "__main__":
    main()
