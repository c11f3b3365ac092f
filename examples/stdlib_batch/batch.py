"""Audit the running Python's standard library as a batch: one run per top-level package.

Each run audits one package (or top-level module) of the standard library with the nodes of
``examples/stdlib_audit`` (7 nodes):

- ``list`` finds the package's ``.py`` files;
- ``shard-0`` … ``shard-3`` each parse the files whose path hashes to them (the audit's
  ``audit_files``) and count modules, classes, functions and lines;
- ``merge`` adds the shards up (the audit's ``merge``);
- ``summary`` renders the counts as JSON text (the audit's ``render_json``): the run's result.

``make_runs.py`` writes the JSON-lines file of the batch (one line per package, its run id and
its ``package`` input); ``durable submit --inputs-file`` hands the runs to a launcher. See
``README.md`` in this folder and ``docs/fleet.md``.

Two environment variables help the fleet's crash tests watch the runs (both unset normally):
``STDLIB_BATCH_TRACE`` names a file each body appends ``<package> <node> <root attempt id>``
to when it ends, and ``STDLIB_BATCH_DELAY`` is seconds each shard waits before it ends.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import sys
import sysconfig
import time
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "stdlib_audit"))

import audit  # examples/stdlib_audit/audit.py: the nodes' work

from durable_core import hookimpl
from durable_core.graph import Graph, Key, Retry

SHARDS = 4

PACKAGE = Key("package", str)
"""The top-level package (or module) of the standard library to audit: ``"json"``."""

ROOT = Key("root", str)
FILES = Key("files", list[str])
SHARD_KEYS = [Key(f"shard_{i}", audit.Stats) for i in range(SHARDS)]
TOTALS = Key("totals", audit.Stats)
SUMMARY = Key("summary", str)


def stdlib_root() -> pathlib.Path:
    """The running interpreter's standard library folder."""
    return pathlib.Path(sysconfig.get_paths()["stdlib"]).resolve()


def units(*, with_modules: bool = False) -> list[str]:
    """The top-level packages of the standard library (folders with ``__init__.py``), sorted;
    with ``with_modules``, then its top-level modules (``json`` before ``abc.py``'s ``abc``)."""
    root = stdlib_root()
    found = sorted(p.name for p in root.iterdir() if (p / "__init__.py").is_file())
    if with_modules:
        found += sorted(p.stem for p in root.glob("*.py"))
    return found


def run_line(package: str) -> str:
    """The JSON line of one run: ``{"run_id": "stdlib-<package>", "inputs": {...}}``."""
    return json.dumps({"run_id": f"stdlib-{package}", "inputs": {"package": package}})


def package_files(root: pathlib.Path, package: str) -> list[str]:
    """Relative POSIX paths of the package's ``.py`` files (or of the one module), sorted."""
    folder = root / package
    if folder.is_dir():
        return [f"{package}/{p}" for p in audit.list_python_files(folder)]
    if (root / f"{package}.py").is_file():
        return [f"{package}.py"]
    raise FileNotFoundError(f"{package!r} is neither a package nor a module in {root}")


def _trace(rc, node: str) -> None:
    path = os.environ.get("STDLIB_BATCH_TRACE")
    if not path:
        return
    root = rc.attempt
    while root.parent is not None:  # a Retry try: its node's root attempt
        root = root.parent
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{rc.get(PACKAGE)} {node} {root.id}\n".encode())
    finally:
        os.close(fd)


def shard_of(path: str) -> int:
    """The shard a file belongs to: a stable hash of its relative path."""
    return zlib.crc32(path.encode("utf-8")) % SHARDS


def build_graph() -> Graph:
    """The batch's graph (see the module documentation)."""
    graph = Graph("stdlib_batch", inputs=[PACKAGE])

    @graph.node("list", requires=[PACKAGE], provides=[ROOT, FILES])
    def list_files(rc):
        root = stdlib_root()
        rc.set(ROOT, str(root))
        rc.set(FILES, package_files(root, rc.get(PACKAGE)))
        _trace(rc, "list")

    def shard(index: int, rc) -> None:
        files = [p for p in rc.get(FILES) if shard_of(p) == index]
        stats = audit.audit_files(pathlib.Path(rc.get(ROOT)), files)
        delay = float(os.environ.get("STDLIB_BATCH_DELAY") or 0)
        if delay:
            time.sleep(delay)
        rc.set(SHARD_KEYS[index], stats)
        _trace(rc, f"shard-{index}")

    for i in range(SHARDS):
        graph.node(
            f"shard-{i}",
            requires=[ROOT, FILES, PACKAGE],
            provides=[SHARD_KEYS[i]],
            aspects=[Retry(3, delay=0.1)],
        )(functools.partial(shard, i))

    @graph.node("merge", requires=[*SHARD_KEYS, PACKAGE], provides=[TOTALS])
    def merge_shards(rc):
        rc.set(TOTALS, audit.merge([rc.get(k) for k in SHARD_KEYS]))
        _trace(rc, "merge")

    @graph.node("summary", requires=[TOTALS, ROOT, PACKAGE], provides=[SUMMARY])
    def summary(rc):
        rc.set(SUMMARY, audit.render_json(rc.get(TOTALS), f"{rc.get(ROOT)}/{rc.get(PACKAGE)}"))
        _trace(rc, "summary")

    return graph


graph = build_graph()


@hookimpl
def durable_register_codecs(codecs):
    """The codec of the audit's ``Stats`` (the graph's module is loaded as a plugin)."""
    codecs.register_json(audit.Stats)
