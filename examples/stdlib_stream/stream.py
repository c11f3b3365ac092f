"""Tally the running Python's standard library through a stream, exactly once per file.

The graph (4 nodes):

- ``list`` is a resumable producer: it sends the path of every ``*.py`` file under
  ``sysconfig.get_paths()["stdlib"]`` (relative to it, in sorted path order, skipping any path
  with a ``site-packages`` or ``__pycache__`` part) with ``send_at``, the file's place in that
  order being the producer's position; ``max_files`` (0: all) limits it;
- ``tally`` is a processor: one transaction per path, it adds 1 to ``files``, the file's size
  to ``bytes``, ``len(data.splitlines())`` of the raw bytes to ``lines`` and to
  ``by_top_package[<first path part, or the module name of a top-level file>]``, and sends the
  path of every file over 100,000 bytes to the stream ``big``;
- ``big`` reads that stream into a sorted list;
- ``write`` writes ``<out_dir>/tally.json`` with the keys ``files``, ``bytes``, ``lines``,
  ``by_top_package`` and ``big_files``.

The input ``trace`` (a file path, or ``""``) makes ``tally`` append each path it processes to
that file: a way to watch that a file whose transaction committed is never processed again
after ``durable resume``. See ``README.md`` in this folder.
"""

from __future__ import annotations

import json
import os
import pathlib
import sysconfig
import tempfile

import attrs

from durable_core import hookimpl
from durable_core.graph import Graph, Key, Retry

BIG_FILE = 100_000
"""Files larger than this many bytes are listed in ``big_files``."""

MAX_FILES = Key("max_files", int)
OUT_DIR = Key("out_dir", str)
TRACE = Key("trace", str)

PATHS = Key("paths", str, stream=True, capacity=64)
BIG = Key("big", str, stream=True, capacity=64)
BIG_FILES = Key("big_files", list[str])
REPORT = Key("report", str)


@attrs.frozen
class Tally:
    """What ``tally`` has counted so far (its state, committed with every file)."""

    files: int = 0
    bytes: int = 0
    lines: int = 0
    by_top_package: dict[str, int] = attrs.Factory(dict)

    def add(self, path: str, data: bytes) -> Tally:
        lines = len(data.splitlines())
        top = top_package(path)
        packages = dict(self.by_top_package)
        packages[top] = packages.get(top, 0) + lines
        return Tally(self.files + 1, self.bytes + len(data), self.lines + lines, packages)


TALLY = Key("tally", Tally)


def stdlib_root() -> pathlib.Path:
    """The running interpreter's standard library folder."""
    return pathlib.Path(sysconfig.get_paths()["stdlib"])


def list_stdlib(root: pathlib.Path, max_files: int = 0) -> list[str]:
    """Every ``*.py`` file under ``root`` (relative, ``/``-separated, sorted), skipping any path
    with a ``site-packages`` or ``__pycache__`` part; the first ``max_files`` (0: all)."""
    found = []
    for path in root.rglob("*.py"):
        relative = path.relative_to(root)
        if {"site-packages", "__pycache__"} & set(relative.parts):
            continue
        if path.is_file():
            found.append(relative.as_posix())
    found.sort()
    return found[:max_files] if max_files > 0 else found


def top_package(path: str) -> str:
    """``"email"`` for ``"email/parser.py"``, ``"os"`` for ``"os.py"``."""
    first, _, rest = path.partition("/")
    return first if rest else first.removesuffix(".py")


def write_atomically(path: pathlib.Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename (no half file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise


def render(tally: Tally, big_files: list[str]) -> str:
    """The JSON text of ``tally.json``."""
    report = {
        "files": tally.files,
        "bytes": tally.bytes,
        "lines": tally.lines,
        "by_top_package": dict(sorted(tally.by_top_package.items())),
        "big_files": sorted(big_files),
    }
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


def build_graph() -> Graph:
    """The graph described in the module documentation."""
    graph = Graph("stdlib_stream", inputs=[MAX_FILES, OUT_DIR, TRACE])

    @graph.node("list", requires=[MAX_FILES], provides=[PATHS])
    async def list_files(rc):
        writer = rc.writer(PATHS)
        start = writer.position or 0  # how many paths were sent before a restart
        paths = list_stdlib(stdlib_root(), rc.get(MAX_FILES))
        for place, path in enumerate(paths[start:], start + 1):
            await writer.send_at(path, place)

    @graph.processor(
        "tally",
        input=PATHS,
        state=Tally,
        initial=Tally(),
        requires=[TRACE],
        provides=[TALLY, BIG],
        retry=Retry(3),
        commit_every=16,
        max_delay=0.05,
    )
    def tally(rc, state: Tally, path: str) -> Tally:
        data = (stdlib_root() / path).read_bytes()
        trace = rc.get(TRACE)
        if trace:
            with open(trace, "a", encoding="utf-8") as f:
                f.write(f"{path}\n")
        if len(data) > BIG_FILE:
            rc.writer(BIG).send(path)  # committed with this file's transaction
        return state.add(path, data)

    @tally.finish
    def finish(rc, state: Tally):
        rc.set(TALLY, state)

    @graph.node("big", requires=[BIG], provides=[BIG_FILES])
    async def big(rc):
        rc.set(BIG_FILES, sorted([path async for path in rc.reader(BIG)]))

    @graph.node("write", requires=[TALLY, BIG_FILES, OUT_DIR], provides=[REPORT])
    def write(rc):
        target = pathlib.Path(rc.get(OUT_DIR)) / "tally.json"
        write_atomically(target, render(rc.get(TALLY), rc.get(BIG_FILES)))
        rc.set(REPORT, str(target))

    return graph


graph = build_graph()


@hookimpl
def durable_register_codecs(codecs):
    """The codec of the processor's state (the graph's module is loaded as a plugin)."""
    codecs.register_json(Tally)
