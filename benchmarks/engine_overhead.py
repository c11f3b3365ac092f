"""Engine overhead per node, side by side with calling the same functions in a plain loop.

Each node does the same tiny piece of work (``x + 1`` through its run context). The plain loop
calls the same function the same number of times, passing the value along; the difference,
divided by the number of nodes, is what the engine costs per node: tasks, the AND gate, the
aspect chain, the thread hop of a plain body, the checkpoint seam.

Run it with::

    uv run python benchmarks/engine_overhead.py            # 10,000 nodes, best of 3
    uv run python benchmarks/engine_overhead.py --nodes 2000 --repeat 5

Columns: ``engine`` and ``loop`` are µs per node; ``overhead`` is their difference; ``ratio`` is
engine / loop. ``seam`` rows run with a Checkpointer subclass whose methods are no-ops, so every
call of the seam is really awaited (the default checkpointer is skipped entirely).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Any

from durable_core import Checkpointer, Graph, Key, Retry, execute


class AwaitedCheckpointer(Checkpointer):
    """Inherits every no-op method, but is not the base class: each call is awaited."""


def work(value: int) -> int:
    return value + 1


async def async_work(value: int) -> int:
    return value + 1


def chain(count: int, sync: bool, aspects: list[Any]) -> tuple[Graph, list[Key[int]]]:
    keys = [Key(f"k{i}", int) for i in range(count + 1)]
    g = Graph("chain", inputs=[keys[0]])
    for i in range(count):
        src, dst = keys[i], keys[i + 1]
        if sync:

            def body(rc: Any, src: Key[int] = src, dst: Key[int] = dst) -> None:
                rc.set(dst, work(rc.get(src)))

        else:

            async def body(rc: Any, src: Key[int] = src, dst: Key[int] = dst) -> None:
                rc.set(dst, await async_work(rc.get(src)))

        g.add_node(f"n{i}", body, requires=[src], provides=[dst], aspects=aspects)
    g.validate()
    return g, keys


def fan_out(count: int, sync: bool, aspects: list[Any]) -> tuple[Graph, list[Key[int]]]:
    seed = Key("seed", int)
    g = Graph("fan", inputs=[seed])
    for i in range(count):
        out = Key(f"o{i}", int)
        if sync:

            def body(rc: Any, out: Key[int] = out) -> None:
                rc.set(out, work(rc.get(seed)))

        else:

            async def body(rc: Any, out: Key[int] = out) -> None:
                rc.set(out, await async_work(rc.get(seed)))

        g.add_node(f"n{i}", body, requires=[seed], provides=[out], aspects=aspects)
    g.validate()
    return g, [seed]


def plain_loop(count: int, sync: bool) -> float:
    if sync:
        started = time.perf_counter()
        value = 0
        for _ in range(count):
            value = work(value)
        return time.perf_counter() - started

    async def main() -> float:
        started = time.perf_counter()
        value = 0
        for _ in range(count):
            value = await async_work(value)
        return time.perf_counter() - started

    return asyncio.run(main())


def best(repeat: int, measure: Callable[[], float]) -> float:
    return min(measure() for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-running", type=int, default=8)
    args = parser.parse_args()
    count = args.nodes

    print(f"{count} nodes, best of {args.repeat}, max_running={args.max_running}")
    print(
        f"{'shape':<10}{'body':<7}{'variant':<10}{'engine':>10}{'loop':>10}{'overhead':>11}"
        f"{'ratio':>9}"
    )
    for shape, build in (("chain", chain), ("fan-out", fan_out)):
        for sync in (True, False):
            loop_seconds = best(args.repeat, lambda sync=sync: plain_loop(count, sync))
            for variant, checkpointer, aspects in (
                ("plain", None, []),
                ("seam", AwaitedCheckpointer(), []),
                ("retry", None, [Retry(2)]),
            ):
                graph, keys = build(count, sync, aspects)

                def run(
                    graph: Graph = graph, keys: list[Key[int]] = keys, cp: Any = checkpointer
                ) -> float:
                    started = time.perf_counter()
                    result = execute(
                        graph, {keys[0]: 0}, max_running=args.max_running, checkpointer=cp
                    )
                    elapsed = time.perf_counter() - started
                    assert result.status == "completed", result.error
                    return elapsed

                engine_seconds = best(args.repeat, run)
                per_node = engine_seconds / count * 1e6
                per_call = loop_seconds / count * 1e6
                print(
                    f"{shape:<10}{'def' if sync else 'async':<7}{variant:<10}"
                    f"{per_node:>8.1f}µs{per_call:>8.2f}µs{per_node - per_call:>9.1f}µs"
                    f"{per_node / per_call:>8.0f}x"
                )


if __name__ == "__main__":
    main()
