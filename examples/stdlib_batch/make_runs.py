"""Write the batch's runs file: one JSON line per top-level package of the standard library.

uv run python examples/stdlib_batch/make_runs.py > examples/stdlib_batch/runs.jsonl
uv run python examples/stdlib_batch/make_runs.py --with-modules > runs.jsonl  # ~200 runs
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from batch import run_line, units


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--with-modules", action="store_true", help="add the top-level modules too")
    parser.add_argument("--limit", type=int, default=0, help="only the first N runs")
    args = parser.parse_args()
    found = units(with_modules=args.with_modules)
    if args.limit > 0:
        found = found[: args.limit]
    for package in found:
        print(run_line(package))


if __name__ == "__main__":
    main()
