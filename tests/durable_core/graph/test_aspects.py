"""Aspects: Retry, Timeout, order and fixed positions (G-8)."""

import asyncio
import threading
import time

import attrs
import pytest

from durable_core import (
    Aspect,
    CancelToken,
    Graph,
    Key,
    Retry,
    SkipNode,
    SlotError,
    Timeout,
    execute,
)

A, B, C = (Key(name, int) for name in "abc")


# covers: G-8
@pytest.mark.parametrize("sync", [True, False])
def test_retry_retries_failures_until_success(sync):
    tries = []
    g = Graph("g", inputs=[A])

    def attempt(rc):
        tries.append(rc.attempt.index)
        rc.set(B, 99)  # thrown away when the try fails
        if len(tries) < 3:
            raise ConnectionError("flaky")
        with pytest.raises(SlotError, match="already written"):
            rc.set(B, 1)

    if sync:
        g.add_node("x", attempt, requires=[A], provides=[B], aspects=[Retry(3)])
    else:

        async def body(rc):
            attempt(rc)

        g.add_node("x", body, requires=[A], provides=[B], aspects=[Retry(3)])
    result = execute(g, {A: 0})
    assert result.status == "completed"
    assert tries == [1, 2, 3]
    assert result[B] == 99


# covers: G-8
def test_retry_gives_up_after_its_attempts_with_the_last_error():
    tries = []
    g = Graph("g", inputs=[A])

    @g.node("x", requires=[A], provides=[B], aspects=[Retry(3, delay=0.01)])
    def x(rc):
        tries.append(time.monotonic())
        raise ValueError(f"try {len(tries)}")

    result = execute(g, {A: 0})
    assert result.status == "failed"
    assert len(tries) == 3
    assert str(result.error.__cause__) == "try 3"
    assert tries[1] - tries[0] >= 0.009  # the delay sits between tries


# covers: G-8
def test_retry_does_not_retry_skips():
    tries = []
    g = Graph("g", inputs=[A])

    @g.node("x", requires=[A], provides=[B], aspects=[Retry(5)])
    def x(rc):
        tries.append(1)
        raise SkipNode

    result = execute(g, {A: 0})
    assert result.status == "completed" and result.skipped(B)
    assert tries == [1]


# covers: G-8
def test_retry_does_not_retry_cancellation():
    tries = []
    token = CancelToken()
    g = Graph("g", inputs=[A])

    @g.node("x", requires=[A], provides=[B], aspects=[Retry(5)])
    async def x(rc):
        tries.append(1)
        asyncio.get_running_loop().call_later(0.02, token.cancel)
        await asyncio.sleep(30)

    result = execute(g, {A: 0}, cancel=token)
    assert result.status == "canceled"
    assert tries == [1]


# covers: G-8
def test_timeout_counts_waiting_for_input():
    g = Graph("g", inputs=[A])

    @g.node("slow", requires=[A], provides=[B])
    async def slow(rc):
        await asyncio.sleep(30)  # canceled by the failure of "waits"
        rc.set(B, 1)

    g.add_node("waits", lambda rc: None, requires=[B], provides=[C], aspects=[Timeout(0.05)])
    result = execute(g, {A: 0})
    # failed during the wait: had the wait not counted, the run would complete after 30 s
    assert result.status == "failed"
    assert result.error.path == "waits"
    assert isinstance(result.error.__cause__, TimeoutError)
    assert "timed out after 0.05 s (node:0)" in str(result.error.__cause__)


# covers: G-8
def test_retry_wraps_waiting_for_input_and_the_body():
    tries = []
    entered: list[int] = []
    g = Graph("g", inputs=[A])

    @g.node("slow", requires=[A], provides=[B])
    async def slow(rc):
        # B comes once try 1 timed out and try 2 began, however slow the machine
        deadline = time.monotonic() + 60
        while len(entered) < 2:
            assert time.monotonic() < deadline, entered
            await asyncio.sleep(0.001)
        rc.set(B, 1)

    @g.node(
        "waits",
        requires=[B],
        provides=[C],
        aspects=[Retry(3), Entered(entered), Timeout(0.5)],
    )
    async def waits(rc):
        tries.append(rc.attempt.index)
        rc.set(C, rc.get(B) + 1)

    result = execute(g, {A: 0})
    assert result.status == "completed" and result[C] == 2
    assert tries == [2]  # try 1 timed out while waiting; the body ran once, in try 2


# covers: G-8
def test_timeout_on_a_plain_body_keeps_its_slot_until_it_returns():
    ended = threading.Event()
    errors = []
    g = Graph("g", inputs=[A])

    @g.node("stuck", requires=[A], provides=[B], aspects=[Retry(2), Timeout(0.3)])
    def stuck(rc):
        if rc.attempt.index == 1:
            deadline = time.monotonic() + 60  # busy past its Timeout, not looking at it
            while not rc.canceled and time.monotonic() < deadline:
                time.sleep(0.01)
            assert rc.canceled
            try:
                rc.set(B, -1)  # too late: this try was canceled by its Timeout
            except asyncio.CancelledError as error:
                errors.append(error)
            ended.set()
            return
        assert ended.is_set()  # one slot: try 2 waited for try 1's thread to return
        rc.set(B, 2)

    result = execute(g, {A: 0}, max_running=1)
    assert result.status == "completed" and result[B] == 2
    assert len(errors) == 1


@attrs.frozen
class Entered(Aspect):
    """Logs the attempt index each time the chain below it is entered (each Retry try)."""

    log: list = attrs.field(eq=False)

    async def around(self, call):
        self.log.append(call.attempt.index)
        return await call.proceed()

    def describe(self):
        return {"kind": "entered"}


@attrs.frozen
class Trace(Aspect):
    name: str
    log: list = attrs.field(eq=False)

    async def around(self, call):
        self.log.append(f"enter {self.name} at {call.boundary} for {call.path}")
        try:
            return await call.proceed()
        finally:
            self.log.append(f"leave {self.name}")

    def describe(self):
        return {"kind": "trace", "name": self.name}


# covers: G-8
def test_aspect_order_first_is_outermost_and_graph_aspects_sit_outside():
    log = []
    g = Graph("g", inputs=[A], aspects=[Trace("G0", log), Trace("G1", log)])

    @g.node("x", requires=[A], provides=[B], aspects=[Trace("N0", log), Trace("N1", log)])
    def x(rc):
        log.append("body")

    execute(g, {A: 0})
    assert log == [
        "enter G0 at graph:0 for x",
        "enter G1 at graph:1 for x",
        "enter N0 at node:0 for x",
        "enter N1 at node:1 for x",
        "body",
        "leave N1",
        "leave N0",
        "leave G1",
        "leave G0",
    ]


# covers: G-8
def test_an_outer_retry_retries_an_exhausted_inner_retry_with_a_fresh_budget():
    tries = []
    g = Graph("g", inputs=[A], aspects=[Retry(2)])

    @g.node("x", requires=[A], provides=[B], aspects=[Retry(2)])
    def x(rc):
        tries.append((rc.attempt.parent.index, rc.attempt.index, rc.attempt.boundary))
        if len(tries) < 4:
            raise ValueError

    result = execute(g, {A: 0})
    assert result.status == "completed"
    assert tries == [(1, 1, "node:0"), (1, 2, "node:0"), (2, 1, "node:0"), (2, 2, "node:0")]


# covers: G-8
def test_an_aspect_must_return_what_proceed_returned():
    class Broken(Aspect):
        async def around(self, call):
            await call.proceed()
            return "oops"

    g = Graph("g", inputs=[A])
    g.add_node("x", lambda rc: rc.set(B, 1), requires=[A], provides=[B], aspects=[Broken()])
    result = execute(g, {A: 0})
    assert result.status == "failed"
    assert "must return the result of call.proceed()" in str(result.error.__cause__)
