"""Inbox keys, timers, Runtime.send and suspending, in one process (X-INBOX-1, X-INBOX-2,
X-TIMER, X-WAIT); the kill tests are in tests/e2e."""

from __future__ import annotations

import threading
import time

import pytest

from durable_core import (
    CancelToken,
    CodecError,
    Codecs,
    ConfigError,
    Graph,
    GraphError,
    In,
    Key,
    MemoryStore,
    NotFoundError,
    Runtime,
    execute,
)
from durable_core.durable.inbox import encode_message, inbox_cursors
from durable_core.durable.waiting import can_wait, due_waiting_runs, read_waiting
from durable_core.graph.waits import receive_before, sleep_until

NOTES = Key("notes", str, stream=True, inbox=True)
SEEN = Key("seen", list[str])


def _reader_graph(count: int) -> Graph:
    graph = Graph(f"reads_{count}")

    @graph.node("read", requires=[NOTES], provides=[SEEN])
    async def read(rc):
        reader = rc.reader(NOTES)
        rc.set(SEEN, [await reader.receive() for _ in range(count)])

    return graph


def test_an_inbox_is_a_stream_key_and_part_of_the_fingerprint():
    # covers: X-INBOX-1
    with pytest.raises(GraphError, match="stream=True and inbox=True"):
        Key("x", str, inbox=True)
    assert "inbox=True" in repr(NOTES)
    assert NOTES.describe()["inbox"] is True
    assert Key("notes", str, stream=True) != NOTES
    plain = Graph("g")
    plain.node("read", requires=[Key("notes", str, stream=True)])(lambda rc: None)
    with pytest.raises(GraphError, match="no source"):
        plain.validate()
    graph = _reader_graph(1)
    graph.validate()
    assert sorted(graph.nodes) == ["inbox:notes", "read"]


def test_a_graph_can_wait_when_it_or_a_sub_graph_has_an_inbox_or_a_timer():
    # covers: X-INBOX-1, X-TIMER, X-WAIT
    # Only such a graph asks the store for a waiting note on resume: one that can wait but is
    # taken for one that cannot would never find its note.
    def under_sub(child: Graph) -> Graph:
        parent = Graph("parent", inputs=[Key("n", int)])
        parent.sub("inner", child, bindings=[In(Key("n", int), Key("m", int))])
        parent.validate()
        return parent

    plain = Graph("plain", inputs=[Key("m", int)])
    plain.node("use", requires=[Key("m", int)], provides=[Key("out", int)])(lambda rc: None)
    assert not can_wait(under_sub(plain))
    reader = _reader_graph(1)
    reader.validate()
    assert can_wait(reader)
    inbox_child = Graph("inbox_child", inputs=[Key("m", int)])
    inbox_child.node("read", requires=[Key("m", int), NOTES], provides=[SEEN])(lambda rc: None)
    assert can_wait(under_sub(inbox_child))
    timer_child = Graph("timer_child", inputs=[Key("m", int)])
    timer_child.timer("wait", seconds=1, provides=Key("d", float))
    assert can_wait(under_sub(timer_child))


def test_an_inbox_needs_a_durable_run():
    # covers: X-INBOX-2
    result = execute(_reader_graph(1), {})
    assert result.status == "failed"
    assert "run the graph with Runtime" in str(result.error.__cause__)


def test_timers_refuse_what_is_not_a_wait():
    # covers: X-TIMER
    graph = Graph("t", inputs=[Key("s", float)])
    with pytest.raises(GraphError, match="exactly one"):
        graph.timer("a", provides=Key("d", float))
    with pytest.raises(GraphError, match="float value key"):
        graph.timer("a", seconds=1, provides=Key("d", int))
    with pytest.raises(GraphError, match="finite number"):
        graph.timer("a", seconds=-1, provides=Key("d", float))


def test_send_refuses_an_unknown_run_a_wrong_value_and_a_store_without_inboxes():
    # covers: X-INBOX-1
    store = MemoryStore()
    with pytest.raises(NotFoundError, match="no record"):
        Runtime.send(store, "nobody", NOTES, "hello")
    with pytest.raises(GraphError, match="not an inbox key"):
        Runtime.send(store, "nobody", Key("plain", str, stream=True), "hello")
    with pytest.raises(CodecError, match="takes"):
        Runtime.send(store, "nobody", NOTES, 42)
    with pytest.raises(ConfigError, match="keeps no inboxes"):
        Runtime.send(object(), "nobody", NOTES, "hello")


def test_a_running_owner_takes_posts_in_without_a_restart():
    # covers: X-INBOX-2
    store = MemoryStore()
    runtime = Runtime(store)
    outcome = {}
    owner = threading.Thread(
        target=lambda: outcome.update(
            result=runtime.run(_reader_graph(3), run_id="r", version="1", inputs={})
        )
    )
    owner.start()
    while True:
        try:
            store.peek("r")
            break
        except NotFoundError:
            time.sleep(0.01)
    sequences = [Runtime.send(store, "r", NOTES, f"note {n}", f"k{n}") for n in range(3)]
    assert Runtime.send(store, "r", NOTES, "note 0", "k0") == 1
    owner.join(30)
    assert sequences == [1, 2, 3]
    result = outcome["result"]
    assert result.status == "completed"
    assert result[SEEN] == ["note 0", "note 1", "note 2"]
    assert inbox_cursors(store.peek("r")) == {"notes": 3}


def test_a_run_suspends_only_once_every_running_node_waits():
    # covers: X-WAIT
    store = MemoryStore()
    graph = Graph("busy")
    DONE = Key("done", float)

    @graph.node("read", requires=[NOTES], provides=[SEEN])
    async def read(rc):
        rc.set(SEEN, [await rc.reader(NOTES).receive()])

    @graph.node("work", provides=[DONE])
    def work(rc):  # computing: the run has something to do
        time.sleep(0.8)
        rc.set(DONE, time.time())

    started = time.time()
    result = Runtime(store).run(graph, run_id="b", version="1", inputs={}, suspend=True)
    assert result.status == "waiting"
    assert time.time() - started >= 0.8
    assert "work" in store.peek("b").scopes[store.peek("b").root_scope].nodes
    assert result.waiting.until is None  # no timer: it waits for messages only
    assert {w for _, w, _ in result.waiting.waits} == {"notes"}
    assert list(read_waiting(store)) == ["b"]
    assert due_waiting_runs(store) == []
    Runtime.send(store, "b", NOTES, "go")
    assert [w.run_id for w in due_waiting_runs(store)] == ["b"]
    done = Runtime(store).resume(graph, run_id="b", version="1", inputs={}, suspend=True)
    assert done.status == "completed" and done[SEEN] == ["go"]
    assert read_waiting(store) == {}


def test_a_cancel_of_a_suspending_run_is_a_cancel():
    # covers: X-WAIT
    store = MemoryStore()
    token = CancelToken()
    token.cancel()
    result = Runtime(store).run(
        _reader_graph(1), run_id="c", version="1", inputs={}, suspend=True, cancel=token
    )
    assert result.status == "canceled"
    assert read_waiting(store) == {}


def test_a_post_that_arrives_while_the_run_suspends_wakes_it_at_once():
    # covers: X-WAIT
    store = MemoryStore()
    original = store.set_waiting

    def set_waiting(run_id, note):  # a post lands right when the note is written
        original(run_id, note)
        if note is not None:
            store.post_message(run_id, "notes", encode_message(Codecs.default(), NOTES, "late"))

    store.set_waiting = set_waiting  # type: ignore[method-assign]
    result = Runtime(store).run(_reader_graph(1), run_id="w", version="1", inputs={}, suspend=True)
    assert result.status == "completed" and result[SEEN] == ["late"]


def test_timers_wait_only_the_time_left_and_receive_before_gives_up_at_the_deadline():
    # covers: X-TIMER
    SOURCE = Key("source", str, stream=True)
    DEADLINE = Key("deadline", float)
    GOT = Key("got", str)
    graph = Graph("timed")
    graph.timer("armed", seconds=0.2, provides=DEADLINE)

    @graph.node("source", provides=[SOURCE])
    async def source(rc):
        await rc.writer(SOURCE).open()
        await sleep_until(rc, time.time() + 5)  # sends nothing in time

    @graph.node("first", requires=[SOURCE, DEADLINE], provides=[GOT])
    async def first(rc):
        delivery = await receive_before(rc, rc.reader(SOURCE), rc.get(DEADLINE))
        rc.set(GOT, "expired" if delivery is None else delivery.value)

    started = time.monotonic()
    token = CancelToken()

    def stop_later():
        time.sleep(0.6)
        token.cancel()

    threading.Thread(target=stop_later).start()
    result = execute(graph, {}, cancel=token)
    assert result.get(GOT) == "expired"
    assert time.monotonic() - started < 5
