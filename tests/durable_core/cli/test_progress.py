"""Progress counting from recovery events, and the terminal status line."""

from __future__ import annotations

import io
import sys
import threading
import time

from durable_core.cli.progress import ProgressCounter, StatusLine, describe
from durable_core.durable.events import EventKind, RecoveryEvent


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ev(kind: EventKind, **fields) -> RecoveryEvent:
    return RecoveryEvent(kind=kind, run_id="r", **fields)


def test_counter_counts_each_kind_of_event():
    clock = FakeClock()
    counter = ProgressCounter(clock=clock)
    counter(ev(EventKind.RUN_RESUMED, total_nodes=22, revision=40))
    for node in ("list", "shard-00", "shard-01"):
        counter(ev(EventKind.NODE_RESTORED, node_id=node, revision=40))
    counter(ev(EventKind.ATTEMPT_STARTED, node_id="shard-02", attempt_index=1, attempt_limit=3))
    counter(ev(EventKind.ATTEMPT_FAILED, node_id="shard-02", attempt_index=1, attempt_limit=3))
    counter(ev(EventKind.ATTEMPT_STARTED, node_id="shard-02", attempt_index=2, attempt_limit=3))
    counter(ev(EventKind.NODE_CONFIRMED, node_id="shard-02", revision=44))
    clock.now += 4.25
    snap = counter.snapshot()
    assert (snap.total_nodes, snap.restored, snap.confirmed) == (22, 3, 1)
    assert (snap.retries, snap.failed_attempts, snap.revision) == (1, 1, 44)
    assert snap.resumed is True
    assert snap.done == 4
    assert snap.status == ""
    assert (
        describe(snap)
        == "4/22 nodes · 3 restored from checkpoint · 1 retry · 1 failed attempt · 4.2 s"
    )
    counter(ev(EventKind.RUN_FINISHED, status="completed", revision=60))
    assert counter.snapshot().status == "completed"
    assert counter.snapshot().revision == 60


def test_counter_is_thread_safe():
    counter = ProgressCounter()
    counter(ev(EventKind.RUN_STARTED, total_nodes=4000))

    def confirm():
        for _ in range(1000):
            counter(ev(EventKind.NODE_CONFIRMED))

    threads = [threading.Thread(target=confirm) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.snapshot().confirmed == 4000
    assert counter.snapshot().resumed is False


def test_status_line_redraws_and_erases_itself():
    counter = ProgressCounter()
    counter(ev(EventKind.RUN_STARTED, total_nodes=2))
    stream = io.StringIO()
    line = StatusLine(counter, stream, interval=0.01, label="r").start()
    counter(ev(EventKind.NODE_CONFIRMED))
    wait_for(lambda: "1/2 nodes" in stream.getvalue())
    line.stop()
    line.stop()
    text = stream.getvalue()
    assert text.startswith("\rr: 0/2 nodes")
    assert "r: 1/2 nodes" in text
    assert text.endswith("\r")  # erased: the last write blanks the line


def render(output: str) -> list[str]:
    """What a terminal shows for ``output``: a carriage return moves to the start of the line,
    later characters overwrite earlier ones; trailing blanks dropped."""
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


def wait_for(condition, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition()


def test_printed_lines_never_glue_onto_the_status_line(monkeypatch):
    """A node's ``print`` while the status is shown lands on a line of its own, and the
    status comes back after it."""
    terminal = io.StringIO()  # stdout, stderr and the status share one terminal
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setattr(sys, "stderr", terminal)
    counter = ProgressCounter()
    counter(ev(EventKind.RUN_STARTED, total_nodes=2))
    line = StatusLine(counter, terminal, interval=0.01, label="r").start()
    assert sys.stdout is not terminal and sys.stdout.isatty() is terminal.isatty()
    wait_for(lambda: "0/2 nodes" in terminal.getvalue())
    print("hello from a node")
    print("to stderr too", file=sys.stderr)
    counter(ev(EventKind.NODE_CONFIRMED))
    wait_for(lambda: "1/2 nodes" in terminal.getvalue())
    line.stop()
    assert sys.stdout is terminal and sys.stderr is terminal  # put back
    shown = render(terminal.getvalue())
    assert "hello from a node" in shown and "to stderr too" in shown
    assert shown[-1] == ""  # the status is erased at the end
    print("after the run")
    assert render(terminal.getvalue())[-2] == "after the run"


class CountingCounter(ProgressCounter):
    """A counter that counts its snapshots: each redraw of the status line reads one."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshots = 0

    def snapshot(self):
        self.snapshots += 1
        return super().snapshot()


def test_an_unfinished_printed_line_is_not_overwritten(monkeypatch):
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setattr(sys, "stderr", terminal)
    counter = CountingCounter()
    line = StatusLine(counter, terminal, interval=0.01, label="r").start()
    print("working", end="", flush=True)
    drawn = terminal.getvalue()
    tried = counter.snapshots
    # ten redraws were due (each one reads the counter): none may draw over the unfinished line
    wait_for(lambda: counter.snapshots >= tried + 10)
    assert terminal.getvalue() == drawn
    print(" … done")
    line.stop()
    assert "working … done" in render(terminal.getvalue())


def test_a_long_status_is_cut_to_the_terminal_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "20")
    stream = io.StringIO()
    counter = ProgressCounter()
    line = StatusLine(counter, stream, label="a-very-long-run-id", redirect=False).start()
    line.stop()
    drawn = stream.getvalue().split("\r")[1]
    assert drawn == "a-very-long-run-id:"  # 19 characters: never wraps
