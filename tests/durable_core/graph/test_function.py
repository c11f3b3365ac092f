"""The function form of node bodies: inputs as parameters, outputs as the return value."""

from __future__ import annotations

import os
import threading

import pytest

from durable_core import (
    SKIP,
    GraphError,
    Key,
    MemoryStore,
    Runtime,
    SkipNode,
    SlotError,
    ThreadExecutor,
    execute,
)
from durable_core.graph import Graph, Stream

N = Key("n", int)
M = Key("m", int)
SUM = Key("sum", int)
DIFF = Key("diff", int)
TEXT = Key("text", str)


def test_inputs_are_passed_in_requires_order_and_a_tuple_fills_the_provides():
    g = Graph("f", inputs=[N, M])

    @g.node("both", requires=[N, M], provides=[SUM, DIFF], executor="default")
    def both(n: int, m: int) -> tuple[int, int]:
        return n + m, n - m

    result = execute(g, {N: 5, M: 3})
    assert (result[SUM], result[DIFF]) == (8, 2)


def test_thread_executor_runs_bodies_in_the_owner_without_pickling():
    lock = threading.Lock()  # cannot be pickled: nothing is
    OBJ = Key("obj", object)
    PID = Key("pid", int)
    g = Graph("t", inputs=[OBJ])
    g.node("where", requires=[OBJ], provides=[PID], executor="default")(
        lambda obj: os.getpid() if obj is lock else -1
    )
    assert execute(g, {OBJ: lock}, executor=ThreadExecutor())[PID] == os.getpid()
    assert execute(g, {OBJ: lock})[PID] == os.getpid()


def test_skip_skips_one_output_and_skipnode_the_whole_node():
    g = Graph("s", inputs=[N])

    @g.node("half", requires=[N], provides=[SUM, DIFF], executor="default")
    def half(n):
        return n, SKIP

    @g.node("never", requires=[N], provides=[TEXT], executor="local")
    def never(n):
        raise SkipNode()

    result = execute(g, {N: 1})
    assert result[SUM] == 1 and result.skipped(DIFF) and result.skipped(TEXT)


def test_a_skipped_input_takes_the_parameter_default_or_fails_the_try():
    def build(body):
        g = Graph("d", inputs=[N])
        g.node("maybe", requires=[N], provides=[M], executor="default")(lambda n: SKIP)
        g.node("use", requires=[N, M], provides=[SUM], executor="default")(body)
        return g

    def with_default(n, m=100):
        return n + m

    def without(n, m):
        return n - m

    assert execute(build(with_default), {N: 1})[SUM] == 101
    result = execute(build(without), {N: 1})
    assert result.status == "failed"
    assert isinstance(result.error.original, SlotError)
    assert "'m' was skipped" in str(result.error.original)


def test_returned_values_are_checked_against_the_declared_types():
    g = Graph("types", inputs=[N])
    g.node("bad", requires=[N], provides=[TEXT], executor="default")(lambda n: n)
    error = execute(g, {N: 1}).error.original
    assert isinstance(error, SlotError) and "key 'text' takes" in str(error)


def test_the_shape_of_the_return_value_must_match_the_provides():
    g = Graph("shape", inputs=[N])
    g.node("three", requires=[N], provides=[SUM, DIFF], executor="default")(lambda n: (1, 2, 3))
    assert "tuple of 2 values" in str(execute(g, {N: 1}).error.original)
    g2 = Graph("none", inputs=[N])
    g2.node("nothing", requires=[N], executor="default")(lambda n: 5)
    assert "provides no key" in str(execute(g2, {N: 1}).error.original)


@pytest.mark.parametrize(
    ("body", "kwargs", "message"),
    [
        (lambda: 1, {}, "one positional argument per required key"),
        (lambda a, b: 1, {}, "one positional argument per required key"),
        (lambda n: 1, {"executor": "gpu"}, "executor must be one of"),
        (lambda n: 1, {"provides": [Key("st", int, stream=True)]}, "stream keys"),
    ],
)
def test_assembly_refuses_a_body_that_does_not_fit(body, kwargs, message):
    g = Graph("bad", inputs=[N])
    options = {"requires": [N], "executor": "default", **kwargs}
    with pytest.raises(GraphError, match=message):
        g.add_node("x", body, **options)


def test_an_async_function_form_body_is_refused():
    g = Graph("a", inputs=[N])

    async def body(n):
        return n

    with pytest.raises(GraphError, match="plain def"):
        g.add_node("x", body, requires=[N], provides=[M], executor="default")


def test_varargs_take_many_inputs():
    keys = [Key(f"k{i}", int) for i in range(4)]
    g = Graph("v", inputs=keys)
    g.node("add", requires=keys, provides=[SUM], executor="default")(lambda *parts: sum(parts))
    assert execute(g, dict(zip(keys, range(4), strict=True)))[SUM] == 6


def test_function_form_runs_durably_and_is_restored_on_resume():
    calls = []
    g = Graph("durable", inputs=[N])

    @g.node("double", requires=[N], provides=[M], executor="default")
    def double(n):
        calls.append(n)
        return 2 * n

    runtime = Runtime(MemoryStore())
    assert runtime.run(g, run_id="r", version="1", inputs={N: 4})[M] == 8
    resumed = runtime.resume(g, run_id="r", version="1", inputs={N: 4})
    assert resumed[M] == 8 and resumed.restored == 1 and calls == [4]


def test_where_a_body_runs_is_not_part_of_the_fingerprint():
    def build(executor):
        g = Graph("fp", inputs=[N])
        g.node("x", requires=[N], provides=[M], executor=executor)(lambda n: n)
        return g.fingerprint()

    assert build("default") == build("local")


def test_stream_inputs_are_refused():
    g = Graph("st", inputs=[Key("s", int, stream=True)])
    with pytest.raises(GraphError, match="stream"):
        g.add_node("x", lambda s: 1, requires=[Key("s", int, stream=True)], executor="local")
    assert Stream  # the engine's stream type stays the run-context form's


def test_a_restored_input_reaches_a_function_form_body_as_its_value():
    """On resume, an input restored from the record is handed over as the value itself."""
    import asyncio

    from durable_core import CancelToken

    WORDS = Key("words", list[str])
    COUNT = Key("count", int)
    token = CancelToken()
    g = Graph("restore", inputs=[TEXT])
    g.node("split", requires=[TEXT], provides=[WORDS], executor="default")(str.split)

    @g.node("count", requires=[WORDS], provides=[COUNT], executor="default")
    def count(words: list[str]) -> int:
        if not token.canceled:  # the first process stops here, before count is confirmed
            token.cancel()
            # a body that returned after the cancel would be kept (confirmed): this one stops
            raise asyncio.CancelledError
        return len(words)

    runtime = Runtime(MemoryStore())
    first = runtime.run(g, run_id="r", version="1", inputs={TEXT: "a b c"}, cancel=token)
    assert first.status == "canceled"
    resumed = runtime.resume(g, run_id="r", version="1", inputs={TEXT: "a b c"})
    assert resumed.status == "completed", resumed.error
    assert resumed[COUNT] == 3 and resumed.restored == 1
