"""Sub nodes: a child graph run as one node (G-9)."""

import pytest

from durable_core import Graph, In, Key, NodeFailedError, Out, Retry, execute

N = Key("n", int)
REPORT = Key("report", str)
CHILD_N = Key("child_n", int)
CHILD_EXTRA = Key("child_extra", str)
CHILD_REPORT = Key("child_report", str)
EXTRA = Key("extra", str)


def make_child(log=None, fail_times=0):
    child = Graph("child", inputs=[CHILD_N, CHILD_EXTRA])
    failures = {"left": fail_times}

    @child.node("render", requires=[CHILD_N, CHILD_EXTRA], provides=[CHILD_REPORT])
    def render(rc):
        if log is not None:
            log.append(("render", rc.skipped(CHILD_N), rc.skipped(CHILD_EXTRA)))
        if failures["left"]:
            failures["left"] -= 1
            raise ConnectionError("child broke")
        extra = rc.get(CHILD_EXTRA, "-")
        rc.set(CHILD_REPORT, f"n={rc.get(CHILD_N, None)} extra={extra}")

    return child


def make_parent(child, aspects=()):
    g = Graph("parent", inputs=[N])

    @g.node("extra", requires=[N], provides=[EXTRA])
    def extra(rc):
        if rc.get(N) > 0:
            rc.set(EXTRA, "yes")

    g.sub(
        "report",
        child,
        bindings=[In(N, CHILD_N), In(EXTRA, CHILD_EXTRA), Out(CHILD_REPORT, REPORT)],
        aspects=aspects,
    )
    return g


# covers: G-9
def test_sub_runs_the_child_and_publishes_its_outputs():
    g = make_parent(make_child())
    result = execute(g, {N: 3})
    assert result.status == "completed"
    assert result[REPORT] == "n=3 extra=yes"


# covers: G-9
def test_skipped_inputs_arrive_skipped_in_the_child():
    log = []
    g = make_parent(make_child(log))
    result = execute(g, {N: 0})  # extra is skipped
    assert log == [("render", False, True)]
    assert result[REPORT] == "n=0 extra=-"


# covers: G-9, G-4
def test_a_child_output_left_unwritten_is_skipped_in_the_parent():
    child = Graph("child", inputs=[CHILD_N])
    child.add_node("nothing", lambda rc: None, requires=[CHILD_N], provides=[CHILD_REPORT])
    g = Graph("parent", inputs=[N])
    g.sub("report", child, bindings=[In(N, CHILD_N), Out(CHILD_REPORT, REPORT)])
    g.add_node("after", lambda rc: rc.set(EXTRA, "ran"), requires=[REPORT], provides=[EXTRA])
    result = execute(g, {N: 1})
    assert result.status == "completed"
    assert result.skipped(REPORT) and result.skipped(EXTRA)


# covers: G-9
def test_a_child_failure_fails_the_node_with_the_original_error_reachable():
    g = make_parent(make_child(fail_times=1))
    result = execute(g, {N: 1})
    assert result.status == "failed"
    error = result.error
    assert isinstance(error, NodeFailedError) and error.path == "report"
    assert isinstance(error.__cause__, NodeFailedError)
    assert error.__cause__.path == "report/render"
    assert isinstance(error.original, ConnectionError)
    assert str(error.original) == "child broke"


# covers: G-9, G-8
def test_retry_on_a_sub_reruns_the_whole_child_from_scratch():
    log = []
    child = Graph("child", inputs=[CHILD_N])
    runs = {"prepare": 0}

    @child.node("prepare", requires=[CHILD_N], provides=[CHILD_EXTRA])
    def prepare(rc):
        runs["prepare"] += 1
        rc.set(CHILD_EXTRA, f"prepared {runs['prepare']}")

    @child.node("render", requires=[CHILD_EXTRA], provides=[CHILD_REPORT])
    def render(rc):
        log.append(rc.get(CHILD_EXTRA))
        if len(log) == 1:
            raise ConnectionError("first child run fails")
        rc.set(CHILD_REPORT, rc.get(CHILD_EXTRA))

    g = Graph("parent", inputs=[N])
    g.sub(
        "report",
        child,
        bindings=[In(N, CHILD_N), Out(CHILD_REPORT, REPORT)],
        aspects=[Retry(2)],
    )
    result = execute(g, {N: 1})
    assert result.status == "completed"
    assert runs["prepare"] == 2  # the successful node of the failed child run ran again
    assert log == ["prepared 1", "prepared 2"]
    assert result[REPORT] == "prepared 2"


# covers: G-9
def test_nested_subs_and_pass_through_outputs():
    inner = Graph("inner", inputs=[Key("i", int)])
    inner.add_node(
        "square",
        lambda rc: rc.set(Key("sq", int), rc.get(Key("i", int)) ** 2),
        requires=[Key("i", int)],
        provides=[Key("sq", int)],
    )
    middle = Graph("middle", inputs=[Key("m", int)])
    middle.sub(
        "inner",
        inner,
        bindings=[In(Key("m", int), Key("i", int)), Out(Key("sq", int), Key("msq", int))],
    )
    g = Graph("outer", inputs=[N])
    g.sub(
        "middle",
        middle,
        bindings=[
            In(N, Key("m", int)),
            Out(Key("msq", int), Key("result", int)),
            Out(Key("m", int), Key("echo", int)),  # a child input passed through
        ],
    )
    result = execute(g, {N: 7})
    assert result[Key("result", int)] == 49
    assert result[Key("echo", int)] == 7


# covers: G-9, G-5
def test_nested_failure_paths_name_every_level():
    inner = Graph("inner", inputs=[Key("i", int)])

    @inner.node("boom", requires=[Key("i", int)])
    async def boom(rc):
        raise ZeroDivisionError("deep")

    middle = Graph("middle", inputs=[Key("m", int)])
    middle.sub("inner", inner, bindings=[In(Key("m", int), Key("i", int))])
    g = Graph("outer", inputs=[N])
    g.sub("middle", middle, bindings=[In(N, Key("m", int))])
    result = execute(g, {N: 1})
    paths = []
    error = result.error
    while isinstance(error, NodeFailedError):
        paths.append(error.path)
        error = error.__cause__
    assert paths == ["middle", "middle/inner", "middle/inner/boom"]
    assert isinstance(error, ZeroDivisionError)


# covers: G-9
@pytest.mark.parametrize("value", [0, 5])
def test_a_sub_whose_inputs_are_all_skipped_is_skipped_without_running(value):
    ran = []
    child = Graph("child", inputs=[CHILD_EXTRA])
    child.add_node("r", lambda rc: ran.append(1), requires=[CHILD_EXTRA], provides=[CHILD_REPORT])
    g = Graph("parent", inputs=[N])

    @g.node("extra", requires=[N], provides=[EXTRA])
    def extra(rc):
        if rc.get(N):
            rc.set(EXTRA, "x")

    g.sub("report", child, bindings=[In(EXTRA, CHILD_EXTRA), Out(CHILD_REPORT, REPORT)])
    result = execute(g, {N: value})
    assert result.status == "completed"
    assert ran == ([1] if value else [])
    assert result.skipped(REPORT)
