"""Resuming a large finished run, against parsing its record with ``json.loads``.

Runs a chain of trivial nodes (default 10,000) to completion once (untimed), then times, on
the same store, ``Runtime.resume`` of that run: every node is already confirmed, so no body
runs; what is timed is loading, decoding and checking the record, restoring every node and
finishing. Beside it, ``json.loads`` of the record's bytes (the same canonical JSON the store
holds), right after each resume. It prints both, medians of ``--repeat`` runs, and the median of
their ratios run by run. Target: at most 3. Before each timed step the cyclic garbage
collector runs once, untimed: each step then pays for the collections its own allocations
cause, not for those the step before it left pending (a full collection of the whole heap
would otherwise fall on whichever step comes next).

Run it with::

    uv run python benchmarks/resume.py                    # 10,000 nodes on the memory store
    uv run python benchmarks/resume.py --nodes 2000 --store sqlite --repeat 5

The memory store keeps records as bytes and decodes them on every load, so it measures the
runtime without disk reads; ``--store file|sqlite|postgres`` adds the store's read.
Making the record runs the whole chain once, which takes minutes on a slow save path.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import tempfile
import time

from _support import STORES, chain, make_store, median, ms, postgres

from durable_core import Runtime, record_to_json

TARGET = 3.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000, help="nodes in the chain")
    parser.add_argument("--store", choices=STORES, default="memory")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs (medians)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()

    graph, seed = chain(args.nodes)
    with tempfile.TemporaryDirectory(dir=args.dir) as base, contextlib.ExitStack() as stack:
        dsn = stack.enter_context(postgres()) if args.store == "postgres" else None
        store = make_store(args.store, base, dsn)
        stack.callback(store.close)
        runtime = Runtime(store)
        run_id = f"resume-{time.time_ns()}"
        started = time.perf_counter()
        first = runtime.run(graph, run_id=run_id, version="1", inputs={seed: 0})
        made = time.perf_counter() - started
        assert first.status == "completed", first.error

        with store.acquire(run_id) as session:
            data = record_to_json(session.load())

        resumes, parses = [], []
        for _ in range(args.repeat):
            gc.collect()  # each side starts from a clean heap and pays its own collections
            started = time.perf_counter()
            result = runtime.resume(graph, run_id=run_id, version="1", inputs={seed: 0})
            resumes.append(time.perf_counter() - started)
            assert result.status == "completed", result.error
            assert result.restored == args.nodes, result.restored
            del result
            gc.collect()
            started = time.perf_counter()
            json.loads(data)
            parses.append(time.perf_counter() - started)

    resume, parse = median(resumes), median(parses)
    ratio = median([r / p for r, p in zip(resumes, parses, strict=True)])
    print(f"{args.nodes}-node finished run on the {args.store} store; record {len(data):,} bytes")
    print(f"(making it took {made:.1f} s); medians of {args.repeat} runs")
    print("load average (1, 5, 15 min): " + " / ".join(f"{x:.1f}" for x in os.getloadavg()))
    print(
        f"{'Runtime.resume':<16}{ms(resume):>12}   (min {ms(min(resumes))}, max {ms(max(resumes))})"
    )
    print(f"{'json.loads':<16}{ms(parse):>12}   (min {ms(min(parses))}, max {ms(max(parses))})")
    print(f"{'ratio':<16}{ratio:>12.2f}")
    print(
        f"resume: {ratio:.2f}x json.loads (target <= {TARGET:.0f}x) "
        f"{'met' if ratio <= TARGET else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
