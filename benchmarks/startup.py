"""How long the ``durable`` command takes to answer ``--help`` and ``--version``.

Runs each command as a whole new process (the installed ``durable`` script of this
environment), one warm-up run then ``--repeat`` counted runs, and prints the median, minimum
and maximum wall time. Beside them, the bare interpreter (``python -c pass``) for reference:
what no command can go below. Target: under 0.3 s for both.

Run it with::

    uv run python benchmarks/startup.py
    uv run python benchmarks/startup.py --repeat 20
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _support import median

TARGET = 0.3


def timed(command: list[str]) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=False)
    return time.perf_counter() - started, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="counted runs per command")
    args = parser.parse_args()

    script = Path(sys.executable).with_name("durable")
    durable = str(script) if script.exists() else shutil.which("durable")
    if durable is None:
        parser.error("no 'durable' command in this environment: run it with 'uv run'")
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "durable --help": [durable, "--help"],
        "durable --version": [durable, "--version"],
    }
    print(f"wall seconds of a whole process; median of {args.repeat} runs after one warm-up")
    print(f"{'command':<20}{'median':>9}{'min':>9}{'max':>9}  exit")
    verdicts = []
    for name, command in commands.items():
        timed(command)
        runs = [timed(command) for _ in range(args.repeat)]
        walls = [wall for wall, _ in runs]
        codes = sorted({code for _, code in runs})
        mid = median(walls)
        print(
            f"{name:<20}{mid:>8.3f}s{min(walls):>8.3f}s{max(walls):>8.3f}s  "
            f"{','.join(map(str, codes))}"
        )
        if name.startswith("durable"):
            failed = codes != [0]
            verdicts.append(
                f"{name}: {mid:.3f} s (target < {TARGET} s) "
                f"{'FAILED (exit ' + ','.join(map(str, codes)) + ')' if failed else ''}"
                f"{'' if failed else 'met' if mid < TARGET else 'NOT met'}"
            )
    print()
    for verdict in verdicts:
        print(verdict)


if __name__ == "__main__":
    main()
