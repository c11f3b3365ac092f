"""The checkpoint seam (G-12): restore, commit before publish, Retry budgets, child scopes.

``MemoryCheckpointer`` (support.py) plays the durable layer: it keeps confirmations and
attempt states in a ``Memory`` that survives between runs, the way a run record does.
"""

import asyncio

import pytest

from durable_core import (
    Attempt,
    CancelToken,
    Checkpointer,
    CopyOnRead,
    CorruptRecordError,
    Graph,
    In,
    Key,
    NodeOutputs,
    Out,
    Retry,
    RetryExhaustedError,
    SkipNode,
    SlotError,
    Values,
    execute,
)
from durable_core.records import NodeReason
from tests.durable_core.graph.support import AttemptState, Memory, MemoryCheckpointer

TEXT = Key("text", str)
WORDS = Key("words", list[str])
MAYBE = Key("maybe", str)
N = Key("n", int)
REPORT = Key("report", str)


def wordcount(ran):
    g = Graph("wordcount", inputs=[TEXT])

    @g.node("split", requires=[TEXT], provides=[WORDS, MAYBE])
    def split(rc):
        ran.append("split")
        rc.set(WORDS, rc.get(TEXT).split())

    @g.node("count", requires=[WORDS], provides=[N])
    async def count(rc):
        ran.append("count")
        rc.set(N, len(rc.get(WORDS)))

    @g.node("report", requires=[N, MAYBE], provides=[REPORT])
    def report(rc):
        ran.append("report")
        rc.set(REPORT, f"{rc.get(N)} words, maybe={rc.skipped(MAYBE)}")

    return g


# covers: G-12, R-NODE-1
def test_restored_nodes_do_not_run_and_publish_their_restored_outputs():
    ran = []
    memory = Memory()
    memory.confirmed[("root", "split")] = NodeOutputs(
        NodeReason.COMPLETED, {"words": ["restored", "words", "here"]}, frozenset({"maybe"})
    )
    cp = MemoryCheckpointer(memory)
    result = execute(wordcount(ran), {TEXT: "a b"}, checkpointer=cp)
    assert result.status == "completed"
    assert ran == ["count", "report"]  # split's body did not run
    assert result[WORDS] == ["restored", "words", "here"]
    assert result[N] == 3
    assert result.skipped(MAYBE)
    assert result[REPORT] == "3 words, maybe=True"
    assert ("restore", "split") in cp.calls
    assert not [c for c in cp.calls if c[0] in ("begin_node", "commit_node") and c[1] == "split"]


# covers: G-12, R-NODE-1
def test_a_restored_skipped_node_cascades():
    ran = []
    memory = Memory()
    memory.confirmed[("root", "split")] = NodeOutputs(
        NodeReason.SKIPPED, {}, frozenset({"words", "maybe"})
    )
    result = execute(wordcount(ran), {TEXT: "a"}, checkpointer=MemoryCheckpointer(memory))
    assert result.status == "completed"
    assert ran == []  # count and report were skipped by the cascade
    assert result.skipped(REPORT)


# covers: G-12
def test_a_second_run_with_the_same_memory_restores_everything():
    ran = []
    memory = Memory()
    first = execute(wordcount(ran), {TEXT: "a b c"}, checkpointer=MemoryCheckpointer(memory))
    assert ran == ["split", "count", "report"]
    second = execute(wordcount(ran), {TEXT: "a b c"}, checkpointer=MemoryCheckpointer(memory))
    assert ran == ["split", "count", "report"]
    assert second.values == first.values


# covers: G-12
def test_commit_happens_before_downstream_sees_outputs():
    cp = MemoryCheckpointer(commit_delay=0.03)
    g = Graph("g", inputs=[TEXT])

    @g.node("split", requires=[TEXT], provides=[WORDS])
    def split(rc):
        cp.events.append("body:split")
        rc.set(WORDS, rc.get(TEXT).split())

    @g.node("count", requires=[WORDS], provides=[N])
    async def count(rc):
        cp.events.append("body:count")
        rc.set(N, len(rc.get(WORDS)))

    result = execute(g, {TEXT: "a b"}, checkpointer=cp)
    assert result.status == "completed"
    assert cp.events == [
        "body:split",
        "commit-start:split",
        "commit-end:split",
        "body:count",
        "commit-start:count",
        "commit-end:count",
    ]
    commit = cp.of("commit_node")[0]
    assert commit[1] == "split"
    assert commit[2] == NodeOutputs(NodeReason.COMPLETED, {"words": ["a", "b"]}, frozenset())


# covers: G-12, R-RT-2
def test_a_failing_commit_stops_the_run_with_that_error_and_no_further_calls():
    ran = []
    cp = MemoryCheckpointer(fail_commit_of="split")
    g = wordcount(ran)
    result = execute(g, {TEXT: "a b"}, checkpointer=cp)
    assert result.status == "failed"
    assert isinstance(result.error, OSError)  # the checkpointer's own error, not wrapped
    assert "disk full" in str(result.error)
    assert ran == ["split"]
    assert cp.names()[-1] == "commit_failed"  # nothing after it: no fail_attempt, no close
    assert result.pending(WORDS)


# covers: G-12
def test_commits_of_nodes_finishing_together_are_concurrent():
    class Barrier(MemoryCheckpointer):
        def __init__(self):
            super().__init__()
            self.waiting = 0
            self.both = asyncio.Event()

        async def commit_node(self, attempt, outputs):
            if attempt.node_id in ("left", "right"):
                self.waiting += 1
                if self.waiting == 2:
                    self.both.set()
                # a group commit: both confirmations are in flight at once
                await asyncio.wait_for(self.both.wait(), 60)
            await super().commit_node(attempt, outputs)

    g = Graph("g", inputs=[N])
    g.add_node("left", lambda rc: rc.set(Key("l", int), 1), requires=[N], provides=[Key("l", int)])
    g.add_node("right", lambda rc: rc.set(Key("r", int), 2), requires=[N], provides=[Key("r", int)])
    cp = Barrier()
    result = execute(g, {N: 0}, checkpointer=cp)
    assert result.status == "completed"
    assert cp.waiting == 2


def flaky_graph(fail_times, attempts=3, log=None):
    g = Graph("g", inputs=[N])
    state = {"left": fail_times}

    @g.node("x", requires=[N], provides=[REPORT], aspects=[Retry(attempts)])
    def x(rc):
        if log is not None:
            log.append(rc.attempt.index)
        if state["left"]:
            state["left"] -= 1
            raise ConnectionError(f"try {rc.attempt.index} failed")
        rc.set(REPORT, f"done in try {rc.attempt.index}")

    return g


# covers: G-12, G-8, R-ATT-1, R-ATT-3
def test_the_call_sequence_of_a_retried_node():
    cp = MemoryCheckpointer()
    result = execute(flaky_graph(1), {N: 0}, checkpointer=cp)
    assert result[REPORT] == "done in try 2"
    assert cp.names() == [
        "open_scope",
        "begin_node",
        "begin_try",
        "fail_attempt",
        "begin_try",
        "commit_node",
        "close_scope",
    ]
    root_id = cp.of("begin_node")[0][2]
    first, second = cp.of("begin_try")
    assert first[1:5] == ("x", "node:0", 1, 1) and second[1:5] == ("x", "node:0", 2, 2)
    failed = cp.of("fail_attempt")[0]
    assert failed[1:4] == ("x", "node:0", 1) and isinstance(failed[4], ConnectionError)
    tries = cp.memory.tries(root_id, "x", "node:0")
    assert [(a.index, a.limit, a.state) for a in tries] == [(1, 3, "failed"), (2, 3, "active")]
    assert cp.memory.attempts[root_id].state == "confirmed"


def spent_memory(*states):
    """A memory where node x's root attempt is active and its tries have ``states``."""
    memory = Memory()
    memory.attempts["r"] = AttemptState("r", "root", "x", "", 1, 1)
    for index, state in enumerate(states, start=1):
        memory.attempts[f"t{index}"] = AttemptState(
            f"t{index}", "r", "x", "node:0", index, 3, state
        )
    return memory


# covers: G-12, G-8, R-ATT-4
def test_a_restart_never_refills_a_retry_budget():
    log = []
    cp = MemoryCheckpointer(spent_memory("failed", "failed"))
    result = execute(flaky_graph(5, log=log), {N: 0}, checkpointer=cp)
    assert log == [3]  # two tries were spent before: only the last one runs
    assert result.status == "failed"
    assert str(result.error.__cause__) == "try 3 failed"
    assert cp.of("begin_try")[0][3:5] == (1, 3)  # proposed 1, the checkpointer answered 3
    assert [c[2:4] for c in cp.of("fail_attempt")] == [("node:0", 3), ("", 1)]


# covers: G-12, R-ATT-4
def test_an_active_try_is_adopted_with_its_index():
    log = []
    cp = MemoryCheckpointer(spent_memory("failed", "active"))
    result = execute(flaky_graph(0, log=log), {N: 0}, checkpointer=cp)
    assert result[REPORT] == "done in try 2"
    assert log == [2]
    assert cp.of("begin_try")[0][5] == "t2"  # the same attempt id as before the restart


# covers: G-12, G-8, R-ATT-4
def test_an_exhausted_budget_fails_the_node_without_running_it():
    log = []
    cp = MemoryCheckpointer(spent_memory("failed", "failed", "failed"))
    result = execute(flaky_graph(0, log=log), {N: 0}, checkpointer=cp)
    assert log == []
    assert result.status == "failed"
    assert isinstance(result.error.__cause__, RetryExhaustedError)
    assert "already spent" in str(result.error.__cause__)
    assert [c[2:4] for c in cp.of("fail_attempt")] == [("", 1)]  # only the root attempt


# covers: G-12, G-4, G-6
def test_skips_and_cancellations_are_never_reported_as_failures():
    token = CancelToken()
    cp = MemoryCheckpointer()
    g = Graph("g", inputs=[N])

    @g.node("skips", requires=[N], provides=[TEXT], aspects=[Retry(2)])
    def skips(rc):
        raise SkipNode

    @g.node("waits", requires=[N], provides=[REPORT])
    async def waits(rc):
        asyncio.get_running_loop().call_later(0.05, token.cancel)
        await asyncio.sleep(30)

    result = execute(g, {N: 0}, checkpointer=cp, cancel=token)
    assert result.status == "canceled"
    assert cp.of("fail_attempt") == []
    (commit,) = cp.of("commit_node")
    assert commit[1] == "skips"
    assert commit[2] == NodeOutputs(NodeReason.SKIPPED, {}, frozenset({"text"}))
    assert cp.memory.attempts[cp.of("begin_node")[1][2]].state == "active"  # adoptable later


# covers: G-12
def test_a_checkpointer_call_in_progress_is_never_canceled():
    token = CancelToken()
    cp = MemoryCheckpointer(commit_delay=0.2)
    ran = []
    g = wordcount(ran)
    loop_cancel = {"armed": False}

    class Canceling(MemoryCheckpointer):
        async def commit_node(self, attempt, outputs):
            if not loop_cancel["armed"]:
                loop_cancel["armed"] = True
                asyncio.get_running_loop().call_later(0.05, token.cancel)
            await cp.commit_node(attempt, outputs)

    result = execute(g, {TEXT: "a"}, checkpointer=Canceling(cp.memory), cancel=token)
    assert result.status == "canceled"
    assert cp.events == ["commit-start:split", "commit-end:split"]  # the commit finished
    assert ran == ["split"]  # but nothing downstream ran after the cancel


# covers: G-12, G-9, R-SCOPE-2
def test_a_child_scope_is_identified_by_the_sub_nodes_deepest_attempt():
    child = Graph("child", inputs=[Key("cn", int), Key("cs", str)])
    runs = []

    @child.node("render", requires=[Key("cn", int), Key("cs", str)], provides=[Key("out", str)])
    def render(rc):
        runs.append(rc.attempt.scope.id)
        if len(runs) == 1:
            raise ConnectionError
        rc.set(Key("out", str), "ok")

    g = Graph("g", inputs=[N])
    g.add_node("skips", lambda rc: None, requires=[N], provides=[TEXT])
    g.sub(
        "report",
        child,
        bindings=[In(N, Key("cn", int)), In(TEXT, Key("cs", str)), Out(Key("out", str), REPORT)],
        aspects=[Retry(2)],
    )
    cp = MemoryCheckpointer()
    result = execute(g, {N: 4}, checkpointer=cp)
    assert result[REPORT] == "ok"
    tries = [c[5] for c in cp.of("begin_try")]
    child_scopes = [c for c in cp.of("open_scope") if c[1] == "report"]
    assert [c[2] for c in child_scopes] == tries  # scope id = the try's attempt id
    assert runs == tries
    assert child_scopes[0][3:] == ({"cn": 4}, frozenset({"cs"}))  # the child's inputs
    assert len(set(tries)) == 2  # the Retry ran the child in a fresh scope


# covers: G-12, G-9, R-SCOPE-2, R-ATT-4
def test_resume_restores_confirmed_nodes_inside_an_adopted_child_scope():
    memory = Memory()
    ran = []
    child = Graph("child", inputs=[Key("cn", int)])

    @child.node("prepare", requires=[Key("cn", int)], provides=[Key("prepared", int)])
    def prepare(rc):
        ran.append("prepare")
        rc.set(Key("prepared", int), rc.get(Key("cn", int)) * 10)

    @child.node("render", requires=[Key("prepared", int)], provides=[Key("out", str)])
    async def render(rc):
        ran.append("render")
        if len(ran) == 2:  # the first process dies here
            token.cancel()
            await asyncio.sleep(30)
        rc.set(Key("out", str), f"value {rc.get(Key('prepared', int))}")

    g = Graph("g", inputs=[N])
    g.sub(
        "report",
        child,
        bindings=[In(N, Key("cn", int)), Out(Key("out", str), REPORT)],
        aspects=[Retry(3)],
    )
    token = CancelToken()
    first = execute(g, {N: 4}, checkpointer=MemoryCheckpointer(memory), cancel=token)
    assert first.status == "canceled"
    assert ran == ["prepare", "render"]

    cp = MemoryCheckpointer(memory)
    second = execute(g, {N: 4}, checkpointer=cp)
    assert second[REPORT] == "value 40"
    assert ran == ["prepare", "render", "render"]  # prepare was restored, not run again
    assert ("restore", "report/prepare") in cp.calls
    (adopted,) = cp.of("begin_try")
    assert adopted[4] == 1  # the active try was adopted: no budget was spent by the restart


# covers: G-12, S-10
def test_staged_values_count_as_already_set():
    memory = Memory()
    memory.staged[("root", "x")] = Values({"text": "adopted"}, frozenset())
    seen = {}
    g = Graph("g", inputs=[N])

    @g.node("x", requires=[N], provides=[TEXT, REPORT])
    def x(rc):
        seen["text"] = rc.get(TEXT)
        with pytest.raises(SlotError, match="already written"):
            rc.set(TEXT, "again")
        rc.set(REPORT, "fresh")

    cp = MemoryCheckpointer(memory)
    result = execute(g, {N: 0}, checkpointer=cp)
    assert seen == {"text": "adopted"}
    assert result[TEXT] == "adopted" and result[REPORT] == "fresh"
    assert cp.of("commit_node")[0][2].ready == {"text": "adopted", "report": "fresh"}


# covers: G-12, R-NODE-1, R-VAL-3
@pytest.mark.parametrize(
    ("outputs", "problem"),
    [
        (NodeOutputs(NodeReason.COMPLETED, {"words": ["a"]}, frozenset()), "cover"),
        (NodeOutputs(NodeReason.COMPLETED, {"words": "a b", "maybe": "x"}, frozenset()), "holds"),
        (NodeOutputs(NodeReason.SKIPPED, {"words": ["a"]}, frozenset({"maybe"})), "skipped node"),
        (
            NodeOutputs(NodeReason.COMPLETED, {"words": ["a"], "maybe": ""}, frozenset({"maybe"})),
            "ready and skipped",
        ),
    ],
)
def test_restored_outputs_that_do_not_match_the_graph_are_refused(outputs, problem):
    ran = []
    memory = Memory()
    memory.confirmed[("root", "split")] = outputs
    result = execute(wordcount(ran), {TEXT: "a"}, checkpointer=MemoryCheckpointer(memory))
    assert result.status == "failed"
    assert isinstance(result.error, CorruptRecordError)
    assert result.error.rule == "R-NODE-1"
    assert "node 'split'" in str(result.error) and problem in str(result.error)
    assert ran == []


# covers: G-12
def test_a_checkpointer_returning_the_wrong_type_stops_the_run():
    class Wrong(Checkpointer):
        async def begin_node(self, scope, node):
            return {"id": "x"}

    result = execute(wordcount([]), {TEXT: "a"}, checkpointer=Wrong())
    assert result.status == "failed"
    assert isinstance(result.error, TypeError)
    assert "begin_node must return an Attempt" in str(result.error)


# covers: G-12, G-10
def test_streams_are_opened_through_the_checkpointer_and_end_after_the_commit():
    LINES = Key("lines", str, stream=True)
    cp = MemoryCheckpointer(commit_delay=0.02)
    g = Graph("g", inputs=[N])

    @g.node("produce", requires=[N], provides=[LINES])
    async def produce(rc):
        writer = rc.writer(LINES)
        for i in range(3):
            await writer.send(str(i))
            cp.events.append(f"sent:{i}")

    @g.node("read", requires=[LINES], provides=[REPORT])
    async def read(rc):
        lines = []
        async for line in rc.reader(LINES):
            cp.events.append(f"read:{line}")
            lines.append(line)
        cp.events.append("read:end")
        rc.set(REPORT, ",".join(lines))

    result = execute(g, {N: 0}, checkpointer=cp)
    assert result[REPORT] == "0,1,2"
    events = cp.events
    assert events[0] == "open_stream:produce"
    assert events.index("commit-end:produce") < events.index("read:end")
    (producer_commit,) = [c for c in cp.of("commit_node") if c[1] == "produce"]
    stream = producer_commit[2].ready["lines"]
    assert stream.sequence == 3 and stream.state == "completed"


# covers: G-12
def test_attempt_handles_describe_their_place():
    cp = MemoryCheckpointer()
    seen = {}
    g = Graph("g", inputs=[N], aspects=[Retry(2)])

    @g.node("x", requires=[N], provides=[REPORT], aspects=[Retry(2)])
    def x(rc):
        attempt = rc.attempt
        seen["chain"] = []
        while attempt is not None:
            seen["chain"].append((attempt.boundary, attempt.index, attempt.limit))
            attempt = attempt.parent
        seen["root_is_root"] = rc.attempt.root.parent is None
        seen["path"] = rc.attempt.path

    execute(g, {N: 0}, checkpointer=cp)
    assert seen == {
        "chain": [("node:0", 1, 2), ("graph:0", 1, 2), ("", 1, 1)],
        "root_is_root": True,
        "path": "x",
    }


class CopyingCheckpointer(Checkpointer):
    """Gives every reader of a list its own copy; records what ``share`` was called with."""

    def __init__(self):
        self.calls = []

    def share(self, scope, attempt, ready):
        self.calls.append((scope.path, attempt.node_id if attempt else None, sorted(ready)))
        return {
            name: CopyOnRead(lambda v=value: list(v)) if isinstance(value, list) else value
            for name, value in ready.items()
        }


# covers: G-12
def test_share_decides_what_each_reader_gets():
    seen = []
    g = Graph("g", inputs=[TEXT])

    @g.node("split", requires=[TEXT], provides=[WORDS])
    def split(rc):
        rc.set(WORDS, rc.get(TEXT).split())

    for name in ("r1", "r2"):

        @g.node(name, requires=[WORDS], provides=[])
        def read(rc):
            words = rc.get(WORDS)
            seen.append(words)
            words.append("mutated")

    cp = CopyingCheckpointer()
    result = execute(g, {TEXT: "a b"}, checkpointer=cp)
    assert result.status == "completed"
    assert seen[0] is not seen[1]
    assert sorted(map(tuple, seen)) == [("a", "b", "mutated")] * 2
    assert result[WORDS] == ["a", "b"]
    assert cp.calls == [("", None, ["text"]), ("", "split", ["words"])]


# covers: G-12, R-RT-2
@pytest.mark.parametrize(
    ("answer", "error"),
    [(lambda ready: 1 / 0, ZeroDivisionError), (lambda ready: {}, TypeError)],
)
def test_a_failing_or_wrong_share_stops_the_run(answer, error):
    ran = []

    class Failing(Checkpointer):
        def share(self, scope, attempt, ready):
            return ready if attempt is None else answer(ready)

    result = execute(wordcount(ran), {TEXT: "a b"}, checkpointer=Failing())
    assert result.status == "failed"
    assert isinstance(result.error, error)
    assert ran == ["split"]  # nothing downstream saw split's outputs


class QuickRestore(Checkpointer):
    """Restores ``split`` through ``restore_node``; records every begin_node."""

    def __init__(self, answer=None):
        self.begun = []
        self.answer = answer

    def restore_node(self, scope, node):
        if self.answer is not None:
            return self.answer(scope, node)
        if node.id != "split":
            return None
        outputs = NodeOutputs(NodeReason.COMPLETED, {"words": ["x", "y", "z"]}, {"maybe"})
        return Attempt(id="a", scope=scope, node=node, restored=outputs)

    async def begin_node(self, scope, node):
        self.begun.append(node.id)
        return await super().begin_node(scope, node)


# covers: G-12, R-NODE-1
def test_a_node_restored_at_once_publishes_without_begin_node():
    ran = []
    events = []

    class Events:
        def node_finished(self, event):
            events.append((event.node_id, event.outcome, event.restored))

    cp = QuickRestore()
    result = execute(wordcount(ran), {TEXT: "a b"}, checkpointer=cp, observers=[Events()])
    assert result.status == "completed"
    assert ran == ["count", "report"]
    assert cp.begun == ["count", "report"]
    assert result[N] == 3
    assert ("split", "completed", True) in events


# covers: G-12, R-RT-2
@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (lambda scope, node: 1 / 0, ZeroDivisionError),
        (lambda scope, node: Attempt(id="a", scope=scope, node=node), TypeError),
    ],
)
def test_a_failing_or_wrong_restore_node_stops_the_run(answer, error):
    ran = []
    result = execute(wordcount(ran), {TEXT: "a b"}, checkpointer=QuickRestore(answer))
    assert result.status == "failed"
    assert isinstance(result.error, error)
    assert ran == []


class RestoreAll(Checkpointer):
    """Answers ``restore_nodes`` for the whole scope at once; records every ``share``."""

    def __init__(self, answer):
        self.answer = answer
        self.shared = []

    def restore_nodes(self, scope, nodes):
        return self.answer(scope, nodes)

    def share(self, scope, attempt, ready):
        self.shared.append(attempt.node_id if attempt else None)
        return ready


def _restored(scope, node, ready, skipped=frozenset(), **marks):
    outputs = NodeOutputs(NodeReason.COMPLETED, ready, frozenset(skipped), **marks)
    return Attempt(id=node.id, scope=scope, node=node, restored=outputs)


# covers: G-12, R-NODE-1
@pytest.mark.parametrize("as_is", [True, False])
def test_restore_nodes_answers_a_scope_at_once_and_as_is_outputs_skip_share(as_is):
    ran = []

    def answer(scope, nodes):
        answers = []
        for node in nodes:
            if node.id == "split":
                answers.append(_restored(scope, node, {"words": ["x", "y"]}, {"maybe"}))
            elif node.id == "count":
                answers.append(_restored(scope, node, {"n": 7}, checked=True, as_is=as_is))
            else:
                answers.append(None)
        return answers

    cp = RestoreAll(answer)
    result = execute(wordcount(ran), {TEXT: "a b"}, checkpointer=cp)
    assert result.status == "completed", result.error
    assert ran == ["report"]
    assert result[REPORT] == "7 words, maybe=True"
    # Outputs marked as_is reach their readers as they are; anything else goes through share.
    assert cp.shared == ([None, "split", "report"] if as_is else [None, "split", "count", "report"])


# covers: G-12, R-NODE-1
def test_as_is_outputs_still_cover_exactly_the_provides():
    def answer(scope, nodes):
        return [
            _restored(scope, node, {"words": ["a"]}, checked=True, as_is=True)
            if node.id == "split"
            else None
            for node in nodes
        ]

    result = execute(wordcount([]), {TEXT: "a"}, checkpointer=RestoreAll(answer))
    assert result.status == "failed" and isinstance(result.error, CorruptRecordError)
    assert "cover" in str(result.error)


# covers: G-12, R-RT-2
@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (lambda scope, nodes: 1 / 0, ZeroDivisionError),
        (lambda scope, nodes: [None], TypeError),  # one answer for three nodes
        (lambda scope, nodes: None, TypeError),
        (lambda scope, nodes: [Attempt(id="a", scope=scope, node=n) for n in nodes], TypeError),
    ],
)
def test_a_failing_or_wrong_restore_nodes_stops_the_run(answer, error):
    result = execute(wordcount([]), {TEXT: "a b"}, checkpointer=RestoreAll(answer))
    assert result.status == "failed"
    assert isinstance(result.error, error)
    assert "restore_nodes" in str(result.error) or error is ZeroDivisionError


# covers: G-12, R-NODE-1
def test_restored_outputs_marked_checked_skip_only_the_type_check():
    # A checkpointer that decoded each value with a check of its key's type says so
    # (checked=True): the engine does not check the types again. Unmarked outputs (any
    # other checkpointer) are checked as before, and the cover of the provides always is.
    ran = []
    wrong = {"words": "not a list", "maybe": "x"}

    def restored(checked, ready=wrong):
        def answer(scope, node):
            if node.id != "split":
                return None
            outputs = NodeOutputs(NodeReason.COMPLETED, ready, frozenset(), checked=checked)
            return Attempt(id="a", scope=scope, node=node, restored=outputs)

        return answer

    unmarked = execute(wordcount(ran), {TEXT: "a"}, checkpointer=QuickRestore(restored(False)))
    assert unmarked.status == "failed" and isinstance(unmarked.error, CorruptRecordError)
    assert "key 'words' holds a str" in str(unmarked.error)

    marked = execute(wordcount(ran), {TEXT: "a"}, checkpointer=QuickRestore(restored(True)))
    assert marked.status == "completed"
    assert marked[WORDS] == "not a list"  # taken as the checkpointer vouched for it

    short = execute(
        wordcount(ran), {TEXT: "a"}, checkpointer=QuickRestore(restored(True, {"words": ["a"]}))
    )
    assert short.status == "failed" and isinstance(short.error, CorruptRecordError)
    assert "cover" in str(short.error)
    assert ran == ["count", "report"]  # only the marked run went on past split
    assert NodeOutputs(NodeReason.COMPLETED, wrong, checked=True) == NodeOutputs(
        NodeReason.COMPLETED, wrong
    )


# covers: G-12
@pytest.mark.parametrize("enabled", [True, False])
def test_the_garbage_collector_is_paused_while_nodes_are_restored(enabled):
    # Restoring many confirmed nodes allocates objects that all stay alive: the collector is
    # paused around the loop (as record decoding does) and left as it was found.
    import gc

    seen = []

    def answer(scope, node):
        seen.append(gc.isenabled())
        if node.id != "split":
            return None
        outputs = NodeOutputs(NodeReason.COMPLETED, {"words": ["x"]}, {"maybe"})
        return Attempt(id="a", scope=scope, node=node, restored=outputs)

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        result = execute(wordcount([]), {TEXT: "a b"}, checkpointer=QuickRestore(answer))
        after = gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert result.status == "completed" and result[N] == 1
    assert seen == [False, False, False]
    assert after is enabled


# covers: G-7, G-12
def test_watch_bodies_counts_the_bodies_holding_a_running_slot():
    """The checkpointer learns how many bodies run: a plain body in its worker thread and an
    async body awaiting hold a slot; a node committing after its body returned holds none."""
    A0, FAST, SLOW, LAST = (Key(name, int) for name in ("a0", "fast", "slow", "last"))
    seen: dict[str, int] = {}

    class Watching(Checkpointer):
        running = None

        def watch_bodies(self, running):
            self.running = running

        async def commit_node(self, attempt, outputs):
            seen[attempt.node_id] = self.running()

    g = Graph("g", inputs=[A0])
    release = asyncio.Event()

    @g.node("fast", requires=[A0], provides=[FAST])
    async def fast(rc):
        await asyncio.sleep(0.05)  # "slow" is in its body by now
        rc.set(FAST, 1)

    @g.node("slow", requires=[A0], provides=[SLOW])
    async def slow(rc):
        await release.wait()  # holds its slot while it waits
        rc.set(SLOW, 2)

    @g.node("plain", requires=[FAST], provides=[LAST])
    def plain(rc):
        # In a worker thread: the async "slow" body still waits, so two bodies run.
        rc.set(LAST, rc.get(FAST) + 1)

    class Releasing(Watching):
        async def commit_node(self, attempt, outputs):
            await super().commit_node(attempt, outputs)
            if attempt.node_id == "plain":
                release.set()

    cp = Releasing()
    result = execute(g, {A0: 0}, checkpointer=cp)
    assert result.status == "completed"
    assert seen == {"fast": 1, "plain": 1, "slow": 0}
    assert cp.running() == 0


class RunningCheckpointer(MemoryCheckpointer):
    """Puts ``node_running`` on the shared timeline with the commits and the bodies."""

    def node_running(self, attempt):
        self.events.append(f"running:{attempt.path}:{attempt.id}:{attempt.boundary or 'root'}")


# covers: G-12
def test_node_running_is_told_once_per_node_when_its_inputs_have_arrived():
    cp = RunningCheckpointer()
    g = Graph("g", inputs=[N])
    twice = Key("twice", int)

    @g.node("a", requires=[N], provides=[twice])
    def a(rc):
        cp.events.append("body:a")
        rc.set(twice, 2)

    @g.node("b", requires=[twice], provides=[REPORT], aspects=[Retry(3)])
    async def b(rc):
        cp.events.append(f"body:b:{rc.attempt.index}")
        if rc.attempt.index == 1:
            raise ConnectionError("first try fails")
        rc.set(REPORT, "done")

    assert execute(g, {N: 1}, checkpointer=cp)[REPORT] == "done"
    roots = {call[1]: call[2] for call in cp.of("begin_node")}
    assert cp.events == [
        f"running:a:{roots['a']}:root",
        "body:a",
        "commit-start:a",
        "commit-end:a",
        f"running:b:{roots['b']}:root",  # only once b's input was confirmed; first try only
        "body:b:1",
        "body:b:2",
        "commit-start:b",
        "commit-end:b",
    ]
    again = RunningCheckpointer(cp.memory)  # both confirmed: restored, no body starts
    assert execute(g, {N: 1}, checkpointer=again).status == "completed"
    assert again.events == []
