"""Failure and cancellation: the first failure cancels the rest; cancel from outside (G-6)."""

import asyncio
import threading
import time

import pytest

from durable_core import (
    CancelToken,
    ConfigError,
    Graph,
    Key,
    NodeFailedError,
    execute,
    execute_async,
)

A, B, C, D = (Key(name, int) for name in "abcd")

WAIT = 60.0  # seconds a body waits at most for another one (a test then fails, never hangs)


def wait_until(condition) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "waited too long"
        time.sleep(0.005)


async def wait_until_async(condition) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "waited too long"
        await asyncio.sleep(0.005)


# covers: G-6
def test_first_failure_cancels_the_rest_and_is_the_runs_error():
    state = {}
    g = Graph("g", inputs=[A])

    @g.node("fails", requires=[A], provides=[B])
    async def fails(rc):
        # fail once the others run, however late the worker thread starts
        await wait_until_async(lambda: {"async_started", "sync_started"} <= state.keys())
        raise ValueError("bad input 42")

    @g.node("slow_async", requires=[A], provides=[C])
    async def slow_async(rc):
        state["async_started"] = True
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            state["async_canceled"] = True
            raise

    @g.node("slow_sync", requires=[A], provides=[D])
    def slow_sync(rc):
        state["sync_started"] = True
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if rc.canceled:
                state["sync_saw_cancel"] = True
                rc.raise_if_canceled()
            time.sleep(0.005)

    result = execute(g, {A: 0})  # the bodies would last 30 s unless canceled
    assert result.status == "failed"
    assert isinstance(result.error, NodeFailedError)
    assert result.error.path == "fails"
    assert isinstance(result.error.__cause__, ValueError)
    assert str(result.error.__cause__) == "bad input 42"
    assert result.error.original is result.error.__cause__
    assert "node 'fails' failed: ValueError: bad input 42" in str(result.error)
    assert state == {
        "async_started": True,
        "sync_started": True,
        "async_canceled": True,
        "sync_saw_cancel": True,
    }
    assert result.pending(C) and result.pending(D)


# covers: G-6
def test_a_later_failure_does_not_replace_the_first():
    g = Graph("g", inputs=[A])

    @g.node("first", requires=[A], provides=[B])
    async def first(rc):
        raise KeyError("first")

    @g.node("second", requires=[A], provides=[C])
    def second(rc):
        wait_until(lambda: rc.canceled)  # fails after the first failure was taken
        raise RuntimeError("second")

    result = execute(g, {A: 0})
    assert result.status == "failed"
    assert result.error.path == "first"
    assert isinstance(result.error.__cause__, KeyError)


# covers: G-6
def test_cancel_token_from_another_thread_ends_the_run_canceled():
    token = CancelToken()
    started = threading.Event()
    g = Graph("g", inputs=[A])

    @g.node("sync_loop", requires=[A], provides=[B])
    def sync_loop(rc):
        started.set()
        while not rc.canceled:
            time.sleep(0.005)

    @g.node("async_wait", requires=[A], provides=[C])
    async def async_wait(rc):
        await asyncio.sleep(30)

    g.add_node("after", lambda rc: None, requires=[B], provides=[D])

    def cancel_later():
        started.wait(WAIT)
        token.cancel()

    threading.Thread(target=cancel_later).start()
    result = execute(g, {A: 0}, cancel=token)
    assert result.status == "canceled"
    assert result.error is None
    assert result.pending(B) and result.pending(C) and result.pending(D)


# covers: G-6
def test_a_canceled_token_cancels_the_run_at_once():
    token = CancelToken()
    token.cancel()
    ran = []
    g = Graph("g", inputs=[A])

    @g.node("x", requires=[A], provides=[B])
    async def x(rc):
        await asyncio.sleep(0)  # a chance to run; the cancel lands first
        ran.append("x")

    result = execute(g, {A: 0}, cancel=token)
    assert result.status == "canceled"
    assert ran == []


# covers: G-6
def test_canceling_the_task_running_the_graph_cancels_every_body():
    state = {}
    g = Graph("g", inputs=[A])

    @g.node("x", requires=[A], provides=[B])
    async def x(rc):
        state["x_started"] = True
        try:
            await asyncio.sleep(30)
        finally:
            state["x_ended"] = True

    async def main():
        task = asyncio.create_task(execute_async(g, {A: 0}))
        await wait_until_async(lambda: "x_started" in state)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert state == {"x_started": True, "x_ended": True}


# covers: G-6
def test_execute_waits_for_plain_bodies_to_return():
    finished = []
    started = threading.Event()
    g = Graph("g", inputs=[A])

    @g.node("boom", requires=[A], provides=[B])
    async def boom(rc):
        await wait_until_async(started.is_set)  # fail while the plain body runs
        raise ValueError

    @g.node("slow", requires=[A], provides=[C])
    def slow(rc):
        started.set()
        wait_until(lambda: rc.canceled)  # the run is ending
        time.sleep(0.2)  # ignores cancellation: execute still waits for it
        finished.append("slow")

    result = execute(g, {A: 0})
    assert result.status == "failed"
    assert finished == ["slow"]


# covers: G-6
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
def test_max_running_must_be_a_positive_integer(bad):
    g = Graph("g", inputs=[A])
    g.add_node("x", lambda rc: None, requires=[A], provides=[B])
    with pytest.raises(ConfigError, match="max_running must be a positive integer"):
        execute(g, {A: 0}, max_running=bad)


# covers: G-6
def test_a_cancelled_error_leaking_from_a_body_is_a_failure_not_a_hang():
    g = Graph("g", inputs=[A])

    @g.node("leaks", requires=[A], provides=[B])
    async def leaks(rc):
        future = asyncio.get_running_loop().create_future()
        future.cancel()  # canceled by someone else, not by the engine
        await future

    g.add_node("after", lambda rc: rc.set(C, 1), requires=[B], provides=[C])
    result = execute(g, {A: 0})
    assert result.status == "failed"
    assert result.error.path == "leaks"
    assert isinstance(result.error.__cause__, asyncio.CancelledError)
