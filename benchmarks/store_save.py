"""What a store's own part of one save costs, against the bare durable write of the same bytes.

The runtime is left out: an untimed run of a chain of trivial nodes (default 1,000) on a memory
store notes every save the runtime makes (the record, the revision it expects, the delta and the
complete bytes it hands the store). Then, per store, the same saves are replayed on a fresh
store: ``Session.save(record, expected, EncodedRecord(data, delta))`` with the complete bytes
behind a callable (made only when the store asks for them, as the runtime does), one after the
other, each timed. Beside them, the bare durable write of each save's delta on the same medium
(the ``floor`` benchmark's: append + ``fsync``; ``INSERT`` with a FULL-sync commit; a committed
``UPDATE``). Store and bare run in turn, ``--repeat`` rounds, so both see the same moments.

It prints, per store: the median save, the mean save (folds included: a few saves write the
complete record when the deltas outgrow it), the session's close (which folds what is left), the
median bare write, and ``ratio`` = median save / median bare write, worked out per round.

``--no-flush`` leaves the disk's flush out of both sides, to show what the store adds on its
own (CPU, statements, round trips), which a busy shared disk hides: the file and SQLite stores
and their bare writes go to ``/dev/shm`` (tmpfs: ``fsync`` returns at once), and PostgreSQL
commits with ``synchronous_commit=off`` (set through the DSN's ``options``).

Run it with::

    uv run python benchmarks/store_save.py                      # file, SQLite, PostgreSQL
    uv run python benchmarks/store_save.py --no-flush           # the store's own work only
    uv run python benchmarks/store_save.py --stores sqlite --nodes 2000 --repeat 3

PostgreSQL: ``PULSE_POSTGRES_TEST_DSN`` when set, else a throwaway server with durable settings
(see ``_support.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from typing import Any

from _support import chain, make_store, median, ms, postgres, sync_settings
from floor import BARE, BARE_WHAT, FLOOR_STORES
from psycopg.conninfo import make_conninfo

from durable_core import EncodedRecord, MemoryStore, Runtime, record_from_json

Save = tuple[Any, int, bytes | None, bytes]
RUN_ID = "store-save"


class _Capture:
    """A memory store whose sessions note every save: (record, expected, delta, data)."""

    def __init__(self) -> None:
        self._store = MemoryStore()
        self.saves: list[Save] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def acquire(self, run_id: str, timeout: float | None = None) -> Any:
        session = self._store.acquire(run_id, timeout)
        saves = self.saves

        class Noting:
            def __getattr__(self, name: str) -> Any:
                return getattr(session, name)

            def save(self, record: Any, expected: int, encoded: Any = None) -> None:
                session.save(record, expected, encoded=encoded)
                data = encoded.data
                # The runtime edits its record in place: keep a copy of what was saved.
                saves.append((record_from_json(data), expected, encoded.delta, data))

            def __enter__(self) -> Any:
                return self

            def __exit__(self, *exc: object) -> None:
                session.close()

        return Noting()


def capture(nodes: int) -> list[Save]:
    """The saves of one run of a chain of ``nodes`` trivial nodes."""
    graph, seed = chain(nodes)
    store = _Capture()
    result = Runtime(store).run(graph, run_id=RUN_ID, version="1", inputs={seed: 0})
    assert result.status == "completed", result.error
    return store.saves


def replay(kind: str, saves: list[Save], base: str, dsn: str | None) -> tuple[list[float], float]:
    """Seconds of each ``Session.save`` of ``saves`` on a fresh store, and of the close."""
    store = make_store(kind, tempfile.mkdtemp(prefix=f"{kind}-", dir=base), dsn)
    times = []
    try:
        session = store.acquire(RUN_ID)
        for record, expected, delta, data in saves:
            encoded = EncodedRecord(lambda data=data: data, delta)
            started = time.perf_counter()
            session.save(record, expected, encoded=encoded)
            times.append(time.perf_counter() - started)
        started = time.perf_counter()
        session.close()
        closing = time.perf_counter() - started
        store.acquire(RUN_ID).delete()  # PostgreSQL: the next round starts without the row
    finally:
        store.close()
    return times, closing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000, help="nodes in the chain")
    parser.add_argument("--stores", nargs="+", choices=FLOOR_STORES, default=list(FLOOR_STORES))
    parser.add_argument("--repeat", type=int, default=5, help="rounds per store (medians)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument(
        "--no-flush",
        action="store_true",
        help="no disk flush on either side: /dev/shm, synchronous_commit=off",
    )
    args = parser.parse_args()
    if args.no_flush:
        args.dir = "/dev/shm"

    saves = capture(args.nodes)
    changes = [delta if delta is not None else data for _, _, delta, data in saves]
    print(
        f"chain of {args.nodes} nodes: {len(saves)} saves, delta median "
        f"{statistics.median(len(c) for c in changes):.0f} B, complete record at the end "
        f"{len(saves[-1][3]):,} B; medians of {args.repeat} rounds; load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print(
        f"{'store':<10}{'save median':>13}{'save mean':>11}{'slowest':>10}{'close':>10}"
        f"{'bare write':>12}{'ratio':>8}  bare write is"
    )
    with tempfile.TemporaryDirectory(dir=args.dir) as base, contextlib.ExitStack() as stack:
        dsn = stack.enter_context(postgres()) if "postgres" in args.stores else None
        if dsn is not None:
            if args.no_flush:
                dsn = make_conninfo(dsn, options="-c synchronous_commit=off")
            print(f"PostgreSQL server: {sync_settings(dsn)}", flush=True)
        for kind in args.stores:
            medians, means, worst, closes, bares, ratios = [], [], [], [], [], []
            for _ in range(args.repeat):
                times, closing = replay(kind, saves, base, dsn)
                bare = BARE[kind](base, changes, dsn)
                medians.append(median(times))
                means.append(statistics.fmean(times))
                worst.append(max(times))
                closes.append(closing)
                bares.append(median(bare))
                ratios.append(medians[-1] / bares[-1])
            print(
                f"{kind:<10}{ms(median(medians)):>13}{ms(median(means)):>11}"
                f"{ms(median(worst)):>10}{ms(median(closes)):>10}{ms(median(bares)):>12}"
                f"{median(ratios):>8.2f}  {BARE_WHAT[kind]}",
                flush=True,
            )
    print()
    print("save median/mean/slowest: Session.save alone; close: the session's close (a fold);")
    print("ratio: median save / median bare write of the same delta, per round, then the median")


if __name__ == "__main__":
    main()
