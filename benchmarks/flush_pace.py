"""What one fsync'd append costs on this medium, back to back and at a run's pace.

The ``floor`` benchmark's bare write for the file store is a loop of ``write`` + ``fsync``
appending to one open file, the writes back to back. A durable run makes the same writes with
the runtime's own work between them (about 0.1-0.3 ms per node). On some media (virtual disks
in particular) a flush costs more when it does not follow another one at once, so part of what
``floor`` shows as the runtime's overhead is the medium's. This benchmark measures it: the same
appends of ``--bytes`` bytes, each timed alone,

- ``back to back``: as ``floor`` times its bare writes;
- ``busy gap``: each one after ``--gap`` seconds of work on the CPU (a busy loop), as a run
  whose saves are made on its event loop's thread;
- ``idle gap``: each one after ``--gap`` seconds of sleep, as a run whose saves wait for a
  thread to wake.

It prints each median and its ratio to ``back to back``, measured in one run, rounds in turn.

Run it with::

    uv run python benchmarks/flush_pace.py                    # 1,000 appends of 546 bytes
    uv run python benchmarks/flush_pace.py --gap 0.0003 --rounds 5 --dir /somewhere/else
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def appends(path: str, count: int, size: int, gap: float, busy: bool) -> list[float]:
    """Seconds of each ``write`` + ``fsync`` of ``size`` bytes appended to ``path``, each after
    ``gap`` seconds of busy work (``busy``) or sleep."""
    payload = b"x" * size
    clock = time.perf_counter
    times: list[float] = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.fsync(fd)
        for _ in range(count):
            if gap:
                if busy:
                    until = clock() + gap
                    while clock() < until:
                        pass
                else:
                    time.sleep(gap)
            started = clock()
            os.write(fd, payload)
            os.fsync(fd)
            times.append(clock() - started)
    finally:
        os.close(fd)
        os.unlink(path)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="appends per measurement")
    parser.add_argument("--bytes", type=int, default=546, help="bytes per append")
    parser.add_argument("--gap", type=float, default=0.0002, help="seconds between appends")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (medians of medians)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()

    directory = tempfile.mkdtemp(prefix="flush-pace-", dir=args.dir)
    kinds = {
        "back to back": (0.0, True),
        "busy gap": (args.gap, True),
        "idle gap": (args.gap, False),
    }
    medians: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(args.rounds):
        for kind, (gap, busy) in kinds.items():
            path = os.path.join(directory, "journal")
            medians[kind].append(
                statistics.median(appends(path, args.count, args.bytes, gap, busy))
            )
    os.rmdir(directory)

    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{args.count} appends of {args.bytes} B, gap {args.gap * 1e3:.2f} ms, medians of "
        f"{args.rounds} rounds; load average {load}"
    )
    base = statistics.median(medians["back to back"])
    for kind, values in medians.items():
        value = statistics.median(values)
        print(f"{kind:<14} {value * 1e3:7.3f} ms   {value / base:5.2f}x")


if __name__ == "__main__":
    main()
