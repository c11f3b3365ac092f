"""Audit a Python source tree — by default the running interpreter's standard library.

The graph (22 nodes):

- ``list`` finds every ``.py`` file under the source tree (sorted, so the order never changes);
- ``shard-00`` … ``shard-15`` each parse the files whose path hashes to them with :mod:`ast`
  and count modules, classes, functions and lines, keep the 10 longest functions and every
  syntax error; each shard has ``Retry(3)``. Shards are function-form bodies: with the process
  executor (``audit-process.toml``) they run in worker processes, one core each;
- ``merge`` adds the shards up;
- ``report`` is a Sub graph that renders the result as Markdown and JSON and writes both files
  into the output folder (``markdown``, ``json``, ``write``).

Parsing the whole standard library takes several seconds, so a run is easy to interrupt
(Ctrl-C, or ``kill -9``) and ``durable resume`` finishes it without parsing the confirmed shards
again. See ``README.md`` in this folder and ``docs/tutorial.md``.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import pathlib
import sys
import sysconfig
import tempfile
import threading
import zlib

import attrs

from durable_core import hookimpl
from durable_core.graph import Graph, In, Key, Out, Retry, Timeout

SHARDS = 16
TOP = 10
STDLIB = "stdlib"
"""The ``source`` input that means "the running interpreter's standard library"."""

# CPython 3.11's ast keeps its recursion-depth counter per interpreter, not per thread, so
# ast.parse calls running at once in worker threads can fail with a spurious "SystemError: AST
# constructor recursion depth mismatch" (CPython issues 106905 and 95185). Parsing holds the GIL
# anyway: serializing it costs nothing. A worker process of the process executor runs one body
# at a time in its main thread and has its own interpreter: it parses without the lock.
_PARSE_LOCK = threading.Lock()


def _parse(source: bytes, path: str) -> ast.AST:
    if threading.current_thread() is threading.main_thread():
        return ast.parse(source, filename=path)
    with _PARSE_LOCK:
        return ast.parse(source, filename=path)


# -- values -----------------------------------------------------------------------------------


@attrs.frozen
class FunctionSize:
    """A function (or method) and its length in source lines."""

    lines: int
    name: str
    path: str
    line: int


@attrs.frozen
class SyntaxProblem:
    """A file that does not parse with this interpreter."""

    path: str
    line: int
    message: str


@attrs.frozen
class Stats:
    """Counts over a set of files (one shard, or all of them)."""

    files: int = 0
    modules: int = 0
    classes: int = 0
    functions: int = 0
    lines: int = 0
    longest: list[FunctionSize] = attrs.Factory(list)
    syntax_errors: list[SyntaxProblem] = attrs.Factory(list)
    packages: dict[str, int] = attrs.Factory(dict)
    """Lines per top-level package or module."""


# -- keys -------------------------------------------------------------------------------------

SOURCE = Key("source", str)
"""The tree to audit: ``"stdlib"`` or a directory path."""
MAX_FILES = Key("max_files", int)
"""Audit only the first N files in path order (0: all of them)."""
OUT_DIR = Key("out_dir", str)
"""The folder the report is written to."""

ROOT = Key("root", str)
FILES = Key("files", list[str])
SHARD_KEYS = [Key(f"shard_{i:02d}", Stats) for i in range(SHARDS)]
TOTALS = Key("totals", Stats)
REPORT_FILES = Key("report_files", list[str])

# keys of the report Sub graph
R_TOTALS = Key("totals", Stats)
R_ROOT = Key("root", str)
R_OUT_DIR = Key("out_dir", str)
R_MARKDOWN = Key("markdown", str)
R_JSON = Key("json", str)
R_FILES = Key("files", list[str])


# -- the work ---------------------------------------------------------------------------------


def resolve_source(source: str) -> pathlib.Path:
    """The directory to audit: the standard library for ``"stdlib"``, else ``source``."""
    if source == STDLIB:
        return pathlib.Path(sysconfig.get_paths()["stdlib"]).resolve()
    return pathlib.Path(source).resolve()


def list_python_files(root: pathlib.Path, max_files: int = 0) -> list[str]:
    """Relative POSIX paths of the ``.py`` files under ``root``, sorted.

    Installed packages (``site-packages``, ``dist-packages``) and ``__pycache__`` are skipped.
    """
    skip = {"site-packages", "dist-packages", "__pycache__"}
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip)
        for name in filenames:
            if name.endswith(".py"):
                found.append(pathlib.Path(dirpath, name).relative_to(root).as_posix())
    found.sort()
    return found[:max_files] if max_files > 0 else found


def shard_of(path: str) -> int:
    """The shard a file belongs to: a stable hash of its relative path."""
    return zlib.crc32(path.encode("utf-8")) % SHARDS


def _top(functions: list[FunctionSize]) -> list[FunctionSize]:
    return sorted(functions, key=lambda f: (-f.lines, f.path, f.line, f.name))[:TOP]


def audit_file(root: pathlib.Path, path: str, into: dict) -> None:
    """Parse one file and add its counts to ``into`` (a mutable tally)."""
    source = (root / path).read_bytes()
    lines = source.count(b"\n") + (1 if source and not source.endswith(b"\n") else 0)
    into["files"] += 1
    into["lines"] += lines
    package = path.split("/", 1)[0].removesuffix(".py")
    into["packages"][package] = into["packages"].get(package, 0) + lines
    try:
        tree = _parse(source, path)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", 0) or 0
        message = getattr(exc, "msg", None) or str(exc)
        into["syntax_errors"].append(SyntaxProblem(path, line, message))
        return
    into["modules"] += 1

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                into["classes"] += 1
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                into["functions"] += 1
                size = (child.end_lineno or child.lineno) - child.lineno + 1
                into["longest"].append(FunctionSize(size, prefix + child.name, path, child.lineno))
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    into["longest"] = _top(into["longest"])


def audit_files(root: pathlib.Path, paths: list[str]) -> Stats:
    """The counts of ``paths`` (relative to ``root``)."""
    tally: dict = {
        "files": 0,
        "modules": 0,
        "classes": 0,
        "functions": 0,
        "lines": 0,
        "longest": [],
        "syntax_errors": [],
        "packages": {},
    }
    for path in paths:
        audit_file(root, path, tally)
    tally["syntax_errors"].sort(key=lambda e: (e.path, e.line))
    return Stats(**tally)


def merge(parts: list[Stats]) -> Stats:
    """Add up shard counts."""
    packages: dict[str, int] = {}
    for part in parts:
        for name, lines in part.packages.items():
            packages[name] = packages.get(name, 0) + lines
    return Stats(
        files=sum(p.files for p in parts),
        modules=sum(p.modules for p in parts),
        classes=sum(p.classes for p in parts),
        functions=sum(p.functions for p in parts),
        lines=sum(p.lines for p in parts),
        longest=_top([f for p in parts for f in p.longest]),
        syntax_errors=sorted(
            (e for p in parts for e in p.syntax_errors), key=lambda e: (e.path, e.line)
        ),
        packages=dict(sorted(packages.items())),
    )


def render_json(totals: Stats, root: str) -> str:
    """The report as JSON text (deterministic: sorted keys)."""
    data = {"source": root, "python": sys.version.split()[0], **attrs.asdict(totals)}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def render_markdown(totals: Stats, root: str) -> str:
    """The report as Markdown text."""
    out = [
        f"# Audit of `{root}`",
        "",
        f"Python {sys.version.split()[0]}.",
        "",
        "| files | modules parsed | syntax errors | classes | functions | lines |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {totals.files} | {totals.modules} | {len(totals.syntax_errors)} | "
        f"{totals.classes} | {totals.functions} | {totals.lines} |",
        "",
        f"## The {TOP} longest functions",
        "",
        "| lines | function | where |",
        "|---:|---|---|",
    ]
    out += [f"| {f.lines} | `{f.name}` | `{f.path}:{f.line}` |" for f in totals.longest]
    biggest = sorted(totals.packages.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
    out += ["", f"## The {TOP} largest top-level packages", "", "| lines | package |", "|---:|---|"]
    out += [f"| {lines} | `{name}` |" for name, lines in biggest]
    out += ["", "## Files that do not parse", ""]
    out += [f"- `{e.path}:{e.line}`: {e.message}" for e in totals.syntax_errors] or ["None."]
    return "\n".join(out) + "\n"


def write_atomically(path: pathlib.Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename (no half file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        # mkstemp makes the file 0600; a report is an ordinary file (0666 less the umask).
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise


# -- the graphs -------------------------------------------------------------------------------


def build_report_graph() -> Graph:
    """The Sub graph that renders and writes the report."""
    report = Graph("report", inputs=[R_TOTALS, R_ROOT, R_OUT_DIR])

    @report.node("markdown", requires=[R_TOTALS, R_ROOT], provides=[R_MARKDOWN])
    def markdown(rc):
        rc.set(R_MARKDOWN, render_markdown(rc.get(R_TOTALS), rc.get(R_ROOT)))

    @report.node("json", requires=[R_TOTALS, R_ROOT], provides=[R_JSON])
    def as_json(rc):
        rc.set(R_JSON, render_json(rc.get(R_TOTALS), rc.get(R_ROOT)))

    @report.node("write", requires=[R_MARKDOWN, R_JSON, R_OUT_DIR], provides=[R_FILES])
    def write(rc):
        out = pathlib.Path(rc.get(R_OUT_DIR))
        md, js = out / "report.md", out / "report.json"
        write_atomically(md, rc.get(R_MARKDOWN))
        write_atomically(js, rc.get(R_JSON))
        rc.set(R_FILES, [str(md), str(js)])

    return report


def audit_shard(index: int, root: str, files: list[str]) -> Stats:
    """The body of ``shard-<index>``: the counts of the files whose path hashes to it.

    A function-form body (inputs as parameters, the output as the return value), defined at
    module level so that it can travel to a worker process.
    """
    return audit_files(pathlib.Path(root), [p for p in files if shard_of(p) == index])


def build_graph() -> Graph:
    """The audit graph (see the module documentation)."""
    graph = Graph("stdlib_audit", inputs=[SOURCE, MAX_FILES, OUT_DIR])

    @graph.node("list", requires=[SOURCE, MAX_FILES], provides=[ROOT, FILES])
    def list_files(rc):
        root = resolve_source(rc.get(SOURCE))
        if not root.is_dir():
            raise FileNotFoundError(f"the source tree {root} is not a directory")
        rc.set(ROOT, str(root))
        rc.set(FILES, list_python_files(root, rc.get(MAX_FILES)))

    for i in range(SHARDS):
        graph.node(
            f"shard-{i:02d}",
            requires=[ROOT, FILES],
            provides=[SHARD_KEYS[i]],
            aspects=[Retry(3, delay=0.1)],
            executor="default",  # the run's executor: threads, or a process pool
        )(functools.partial(audit_shard, i))

    @graph.node("merge", requires=SHARD_KEYS, provides=[TOTALS])
    def merge_shards(rc):
        rc.set(TOTALS, merge([rc.get(k) for k in SHARD_KEYS]))

    graph.sub(
        "report",
        build_report_graph(),
        bindings=[
            In(TOTALS, R_TOTALS),
            In(ROOT, R_ROOT),
            In(OUT_DIR, R_OUT_DIR),
            Out(R_FILES, REPORT_FILES),
        ],
        aspects=[Timeout(60)],
    )
    return graph


graph = build_graph()


@hookimpl
def durable_register_codecs(codecs):
    """The codec of this graph's own class (the graph's module is loaded as a plugin).

    ``str``, ``int`` and ``list[str]`` are served by the built-in JSON codecs; ``Stats`` (and
    the classes it contains) needs ``register_json``.
    """
    codecs.register_json(Stats)
