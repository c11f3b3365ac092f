"""The engine's control flow (``graph/signals.py``): a failed checkpointer call awaited in the
caller's task stops the run once, a stopped run makes no further call, and ``settle`` waits
for a call through cancellations (G-12)."""

from __future__ import annotations

import ast
import asyncio
import pathlib
import sys

import pytest

from durable_core.graph import guard, signals
from durable_core.graph.signals import RunAborted, direct_call, settle


class _Run:
    """The smallest run a checkpointer call can stop (what ``Abortable`` asks for)."""

    def __init__(self) -> None:
        self.aborted = False
        self.errors: list[BaseException] = []

    def abort(self, error: BaseException) -> None:
        self.errors.append(error)
        self.aborted = True


def test_the_guard_re_exports_the_signals():
    assert guard.RunAborted is RunAborted and guard.settle is settle


def test_signals_imports_only_the_standard_library():
    source = pathlib.Path(signals.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_a_direct_call_returns_the_answer_and_a_failure_stops_the_run():  # covers: G-12
    run = _Run()

    async def answer() -> int:
        return 7

    async def fail() -> int:
        raise OSError("disk full")

    async def main() -> None:
        assert await direct_call(run, answer()) == 7
        with pytest.raises(RunAborted) as caught:
            await direct_call(run, fail())
        assert isinstance(caught.value.__cause__, OSError)
        called = answer()
        with pytest.raises(RunAborted):
            await direct_call(run, called)  # stopped: the call is closed, never awaited
        assert called.cr_frame is None

    asyncio.run(main())
    assert [str(e) for e in run.errors] == ["disk full"]


def test_settle_waits_for_a_call_through_cancellations():  # covers: G-12
    async def main() -> list[str]:
        seen: list[str] = []
        loop = asyncio.get_running_loop()
        call = loop.create_future()

        async def waiter() -> None:
            await settle(call)
            seen.append("settled")

        task = asyncio.create_task(waiter())
        await asyncio.sleep(0)
        for _ in range(3):
            task.cancel()
            await asyncio.sleep(0)
        assert not task.done()
        call.set_result(None)
        await task
        return seen

    assert asyncio.run(main()) == ["settled"]
