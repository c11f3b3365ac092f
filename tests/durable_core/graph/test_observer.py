"""Observer events: graph started/finished, node waiting/running/finished (G-11)."""

import logging
from collections import Counter

from durable_core import Graph, In, Key, Observer, Out, Retry, execute
from tests.durable_core.graph.support import Memory, MemoryCheckpointer

A, B, C, D = (Key(name, int) for name in "abcd")


class Recorder(Observer):
    def __init__(self):
        self.events = []

    def graph_started(self, event):
        self.events.append(("graph_started", event.path, event.graph))

    def graph_finished(self, event):
        self.events.append(("graph_finished", event.path, event.status))

    def node_waiting(self, event):
        self.events.append(("waiting", event.path))

    def node_running(self, event):
        self.events.append(("running", event.path))

    def node_finished(self, event):
        self.events.append(("finished", event.path, event.outcome, event.restored))


def graph_with_everything():
    child = Graph("child", inputs=[Key("ci", int)])
    child.add_node(
        "inner",
        lambda rc: rc.set(Key("co", int), rc.get(Key("ci", int))),
        requires=[Key("ci", int)],
        provides=[Key("co", int)],
    )
    g = Graph("g", inputs=[A])
    flaky = {"left": 2}

    @g.node("flaky", requires=[A], provides=[B], aspects=[Retry(3)])
    def flaky_body(rc):
        if flaky["left"]:
            flaky["left"] -= 1
            raise ValueError
        rc.set(B, 1)

    g.add_node("skips", lambda rc: None, requires=[A], provides=[C])
    g.add_node("cascade", lambda rc: None, requires=[C], provides=[D])
    g.sub("sub", child, bindings=[In(B, Key("ci", int)), Out(Key("co", int), Key("out", int))])
    return g


# covers: G-11
def test_events_in_order_and_at_most_once_per_node():
    recorder = Recorder()
    result = execute(graph_with_everything(), {A: 1}, observers=[recorder])
    assert result.status == "completed"
    events = recorder.events
    assert events[0] == ("graph_started", "", "g")
    assert events[-1] == ("graph_finished", "", "completed")
    per_node = Counter((e[0], e[1]) for e in events if e[0] in ("waiting", "running", "finished"))
    assert all(count == 1 for count in per_node.values()), per_node
    for path in ("flaky", "skips", "cascade", "sub", "sub/inner"):
        kinds = [
            e[0] for e in events if e[1] == path and e[0] in ("waiting", "running", "finished")
        ]
        if path == "cascade":  # skipped by the cascade: its body never ran
            assert kinds == ["waiting", "finished"]
        else:
            assert kinds == ["waiting", "running", "finished"], path
    finished = {e[1]: (e[2], e[3]) for e in events if e[0] == "finished"}
    assert finished == {
        "flaky": ("completed", False),
        "skips": ("completed", False),
        "cascade": ("skipped", False),
        "sub": ("completed", False),
        "sub/inner": ("completed", False),
    }
    assert ("graph_started", "sub", "child") in events
    assert ("graph_finished", "sub", "completed") in events
    # the child graph's events sit between the Sub node's running and finished
    assert events.index(("running", "sub")) < events.index(("graph_started", "sub", "child"))
    assert events.index(("graph_finished", "sub", "completed")) < events.index(
        ("finished", "sub", "completed", False)
    )


# covers: G-11, G-12
def test_restored_nodes_finish_as_restored_without_running():
    memory = Memory()
    execute(graph_with_everything(), {A: 1}, checkpointer=MemoryCheckpointer(memory))
    recorder = Recorder()
    execute(
        graph_with_everything(),
        {A: 1},
        checkpointer=MemoryCheckpointer(memory),
        observers=[recorder],
    )
    assert not [e for e in recorder.events if e[0] == "running"]
    restored = {e[1] for e in recorder.events if e[0] == "finished" and e[3]}
    assert restored == {"flaky", "skips", "cascade", "sub"}


# covers: G-11
def test_failed_and_canceled_outcomes():
    recorder = Recorder()
    g = Graph("g", inputs=[A])

    @g.node("boom", requires=[A], provides=[B])
    async def boom(rc):
        raise ValueError

    g.add_node("never", lambda rc: None, requires=[B], provides=[C])
    execute(g, {A: 1}, observers=[recorder])
    finished = {e[1]: e[2] for e in recorder.events if e[0] == "finished"}
    assert finished == {"boom": "failed", "never": "canceled"}
    assert recorder.events[-1] == ("graph_finished", "", "failed")


# covers: G-11
def test_an_observer_that_raises_never_fails_a_node(caplog):
    class Broken(Observer):
        def __getattribute__(self, name):
            if name.startswith(("graph_", "node_")):

                def fail(event):
                    raise RuntimeError(f"observer broke in {name}")

                return fail
            return super().__getattribute__(name)

    recorder = Recorder()
    with caplog.at_level(logging.ERROR, logger="durable_core.graph"):
        result = execute(graph_with_everything(), {A: 1}, observers=[Broken(), recorder])
    assert result.status == "completed"
    assert len(recorder.events) > 10  # observers after the broken one still hear everything
    assert "observer broke in node_running" in caplog.text
