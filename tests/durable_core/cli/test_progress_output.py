"""``durable run`` on a terminal: what a node prints is never glued onto the status line.

The command runs in a real subprocess whose stdout and stderr are a pseudo-terminal, so the
status line is on; the terminal's output is replayed (carriage returns overwrite) and each
printed line must be a line of its own.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")

GRAPH = """
import time

from durable_core.graph import Graph, Key

N, A, B = Key("n", int), Key("a", int), Key("b", int)
graph = Graph("chatty", inputs=[N])


@graph.node("first", requires=[N], provides=[A])
def first(rc):
    time.sleep(0.6)  # the status line is drawn meanwhile
    print("hello from first")
    rc.set(A, rc.get(N) + 1)


@graph.node("second", requires=[A], provides=[B])
def second(rc):
    print("unfinished", end="", flush=True)
    time.sleep(0.5)  # redraws come and must not overwrite the unfinished line
    print(" line from second")
    rc.set(B, rc.get(A) + 1)
"""

CONFIG = """
graph = "chatty_graph:graph"
run_id = "chatty-1"
version = "1"

[inputs]
n = 1

[store]
backend = "file"
directory = "runs"
"""


def render(output: str) -> list[str]:
    """The terminal's lines: a carriage return goes back to the start of the line and later
    characters overwrite earlier ones."""
    lines = []
    for raw in output.replace("\r\n", "\n").split("\n"):
        cells: list[str] = []
        column = 0
        for char in raw:
            if char == "\r":
                column = 0
                continue
            if column < len(cells):
                cells[column] = char
            else:
                cells.append(char)
            column += 1
        lines.append("".join(cells).rstrip())
    return lines


def run_on_a_terminal(folder: Path, timeout: float = 60.0) -> tuple[int, str]:
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(folder), COLUMNS="100")
    env.pop("DURABLE_DEBUG", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "durable_core", "run", "run.toml"],
        cwd=folder,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    output = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
        code = process.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    return code, output.decode("utf-8", "replace")


def test_node_output_gets_lines_of_its_own(tmp_path):
    (tmp_path / "chatty_graph.py").write_text(textwrap.dedent(GRAPH))
    (tmp_path / "run.toml").write_text(textwrap.dedent(CONFIG))
    code, output = run_on_a_terminal(tmp_path)
    assert code == 0, output
    assert "chatty-1: 0/" in output  # the status line was on
    shown = render(output)
    assert "hello from first" in shown, output
    assert "unfinished line from second" in shown, output
    assert any(line.startswith("run 'chatty-1' completed") for line in shown), output
