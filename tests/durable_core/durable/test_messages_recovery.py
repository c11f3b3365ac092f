"""Managed containers of processor nodes, with crafted records: the ownership rules (S-9) and
what resume adopts or refuses (S-10)."""

from __future__ import annotations

import hashlib

import attrs
import pytest

from durable_core import (
    AttemptRecord,
    AttemptState,
    CodecError,
    Codecs,
    CorruptRecordError,
    Graph,
    Key,
    ManagedRecord,
    MessageAttemptRecord,
    PendingMessageRecord,
    RunRecord,
    ScopeRecord,
    StreamDescriptorRecord,
    StreamRecord,
    ValueRecord,
    ValueState,
    copy_record,
    validate_record,
)
from durable_core.durable.checkpointer import encode_value_record
from durable_core.durable.messages_recovery import adopt_managed


@attrs.frozen
class Tally:
    count: int = 0
    total: int = 0


TICKS = Key("ticks", int, stream=True)
TOTAL = Key("total", Tally)
FIRST = Key("first", int)
NOTE = Key("note", str)
EVENS = Key("evens", int, stream=True)
START = Key("start", int)

ROOT = "0" * 31 + "1"
TICKS_A = "0" * 31 + "2"
COUNT_A = "0" * 31 + "3"
TRY_A = "0" * 31 + "4"
SUB_A = "0" * 31 + "5"
INNER_A = "0" * 31 + "6"
MSG = "0" * 31 + "7"
STREAM = "ticks:count"
CONTAINER = "count/" + COUNT_A


def build_graph() -> Graph:
    g = Graph("main", inputs=[START])

    @g.node("ticks", requires=[START], provides=[TICKS])
    async def ticks(rc):  # pragma: no cover - never run here
        pass

    @g.processor(
        "count", input=TICKS, state=Tally, initial=Tally(), provides=[TOTAL, FIRST, NOTE, EVENS]
    )
    def count(rc, state, n):  # pragma: no cover - never run here
        return state

    return g


GRAPH = build_graph()


def codecs() -> Codecs:
    registry = Codecs.default()
    registry.register_json(Tally)
    return registry


CODECS = codecs()


def value(key, ready=True, v=None) -> ValueRecord:
    return encode_value_record(CODECS, key, ready, v)


def state_record(tally: Tally) -> ValueRecord:
    return encode_value_record(CODECS, Key("count.state", Tally), True, tally)


def pending(sequence: int) -> PendingMessageRecord:
    data = str(sequence).encode()
    return PendingMessageRecord(sequence, data, hashlib.sha256(data).hexdigest())


def base_record() -> RunRecord:
    """A run whose processor ``count`` committed message 2 and is still active."""
    digest = hashlib.sha256(b"x").hexdigest()
    return RunRecord(
        run_id="run",
        revision=5,
        version="1",
        definition=digest,
        inputs=digest,
        root_scope=ROOT,
        scopes={ROOT: ScopeRecord(graph="main", path="", inputs=digest)},
        attempts={
            TICKS_A: AttemptRecord(parent=ROOT, node_id="ticks"),
            COUNT_A: AttemptRecord(parent=ROOT, node_id="count"),
        },
        streams={
            STREAM: StreamRecord(
                scope=ROOT,
                node_id="ticks",
                key="ticks",
                group="count",
                source_id="ticks@" + ROOT,
                resumable=True,
                last_sequence=3,
                acked_through=2,
                pending=[pending(3)],
            )
        },
        messages={
            MSG: MessageAttemptRecord(
                stream=STREAM,
                group="count",
                sequence=2,
                parent=COUNT_A,
                node_id="count",
                index=1,
                limit=3,
                state=AttemptState.CONFIRMED,
            )
        },
        managed={
            CONTAINER: ManagedRecord(
                scope=ROOT,
                parent=COUNT_A,
                node_id="count",
                state=state_record(Tally(2, 3)),
                values=[value(FIRST, True, 1), value(NOTE, False)],
            )
        },
    )


def adopt(record: RunRecord, failed=()):
    return adopt_managed(GRAPH, record, CODECS, failed)


def container(record: RunRecord) -> ManagedRecord:
    return record.managed[CONTAINER]


# -- Adoption --------------------------------------------------------------------------------


# covers: S-7, S-10
def test_an_active_processor_adopts_its_values_and_state():
    record = base_record()
    validate_record(record, GRAPH.describe_provides())
    before = copy_record(record)
    adopted = adopt(record)
    assert list(adopted) == [(ROOT, "count")]
    a = adopted[(ROOT, "count")]
    assert a.attempt == COUNT_A and a.container == CONTAINER
    assert dict(a.staged.ready) == {"first": 1} and a.staged.skipped == {"note"}
    assert a.state == Tally(2, 3)
    assert record == before  # nothing changes: no revision, no repair


# covers: S-9, S-10
def test_a_container_with_no_values_is_adopted_with_its_state():
    record = base_record()
    container(record).values = []
    validate_record(record, GRAPH.describe_provides())
    a = adopt(record)[(ROOT, "count")]
    assert a.state == Tally(2, 3)
    assert not a.staged.ready and not a.staged.skipped


# covers: S-7, S-9
@pytest.mark.parametrize("live", [True, False], ids=["active", "under-a-failed-attempt"])
def test_a_container_without_its_state_is_refused(live):
    # Every message commit saves the state: an absent one is a lost one, never the initial.
    record = base_record()
    container(record).state = None
    if not live:
        record.attempts[COUNT_A].state = AttemptState.FAILED
    validate_record(record, GRAPH.describe_provides())  # ownership is consistent ...
    error = refused(record)  # ... but the state it continues from is gone
    assert (error.path, error.rule) == (mg("State"), "S-7")
    assert "no state snapshot" in str(error) and "'count'" in str(error)


# covers: S-10
@pytest.mark.parametrize("how", ["failed-parent", "failed-ancestor", "implied", "confirmed"])
def test_containers_under_failed_or_confirmed_attempts_are_never_adopted(how):
    record = base_record()
    if how == "failed-parent":
        record.attempts[COUNT_A].state = AttemptState.FAILED
    elif how in ("failed-ancestor", "implied"):
        # count runs inside a Sub node's child scope; the Sub's attempt failed (or is implied
        # failed by the record).
        nest_in_sub(record)
        if how == "failed-ancestor":
            record.attempts[SUB_A].state = AttemptState.FAILED
    else:
        record.attempts[COUNT_A].state = AttemptState.CONFIRMED
    failed = (SUB_A,) if how == "implied" else ()
    assert adopt(record, failed) == {}
    # ... but they are still decoded: damage under a void attempt is refused all the same.
    container(record).values[0].data = b"2"
    with pytest.raises(CorruptRecordError) as info:
        adopt(record, failed)
    assert info.value.rule == "R-VAL-3"


def nest_in_sub(record: RunRecord) -> None:
    """Move the processor into a child scope owned by the Sub attempt SUB_A."""
    digest = hashlib.sha256(b"x").hexdigest()
    record.attempts[SUB_A] = AttemptRecord(parent=ROOT, node_id="ticks")
    record.scopes[SUB_A] = ScopeRecord(graph="main", path="ticks", inputs=digest)
    record.attempts[COUNT_A].parent = SUB_A
    container(record).scope = SUB_A
    record.streams[STREAM].group = record.messages[MSG].group = "ticks/count"


# -- Refusals (each S-10 rule) ---------------------------------------------------------------


def refused(record: RunRecord) -> CorruptRecordError:
    before = copy_record(record)
    with pytest.raises(CorruptRecordError) as info:
        adopt(record)
    assert record == before  # refused, never repaired
    return info.value


def mg(*rest) -> str:
    path = f'$.Managed["{CONTAINER}"]'
    for part in rest:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


# covers: S-10
def test_a_stream_reference_among_the_values_is_refused():
    record = base_record()
    container(record).values[0].stream = StreamDescriptorRecord(
        source_id="s", scope=ROOT, node_id="ticks", key="ticks", attempt=TICKS_A, capacity=16
    )
    error = refused(record)
    assert (error.path, error.rule) == (mg("Values", 0, "Stream"), "S-10")
    # a value named after a stream key the processor provides, even without a descriptor
    record = base_record()
    container(record).values.append(ValueRecord(name="evens", state=ValueState.SKIPPED))
    error = refused(record)
    assert (error.path, error.rule) == (mg("Values", 2, "Name"), "S-10")


# covers: S-10
def test_a_stream_reference_as_the_state_is_refused():
    record = base_record()
    container(record).state.stream = StreamDescriptorRecord(
        source_id="s", scope=ROOT, node_id="ticks", key="ticks", attempt=TICKS_A, capacity=16
    )
    error = refused(record)
    assert (error.path, error.rule) == (mg("State", "Stream"), "S-10")


# covers: S-10
def test_an_undeclared_key_is_refused():
    record = base_record()
    container(record).values.append(value(Key("other", int), True, 5))
    error = refused(record)
    assert (error.path, error.rule) == (mg("Values", 2, "Name"), "S-10")
    assert "not provided by node 'count'" in str(error)


# covers: S-10
def test_a_duplicate_key_is_refused():
    record = base_record()
    container(record).values.append(value(FIRST, True, 7))
    error = refused(record)
    assert (error.path, error.rule) == (mg("Values", 2, "Name"), "S-10")
    with pytest.raises(CorruptRecordError):  # the whole-record check refuses it too
        validate_record(record, GRAPH.describe_provides())


# covers: S-10
def test_pending_is_refused():
    record = base_record()
    container(record).values[1].state = "pending"
    error = refused(record)
    assert (error.path, error.rule) == (mg("Values", 1, "State"), "S-10")
    with pytest.raises(CorruptRecordError):
        validate_record(record)  # a stored value is never pending


# covers: S-10
def test_a_wrong_type_or_codec_version_is_refused():
    record = base_record()
    container(record).values[0] = attrs.evolve(value(NOTE, True, "one"), name="first")
    with pytest.raises(CodecError, match="value 'first'"):
        adopt(record)
    record = base_record()
    container(record).values[0].version = "2"
    with pytest.raises(CodecError, match="cannot be adopted"):
        adopt(record)
    record = base_record()
    container(record).state = value(FIRST, True, 3)  # an int where a Tally is stored
    with pytest.raises(CodecError, match="the state of processor 'count'"):
        adopt(record)


# covers: S-10
def test_a_container_under_a_nested_attempt_is_refused():
    record = base_record()
    record.attempts[TRY_A] = AttemptRecord(
        parent=COUNT_A, node_id="count", boundary="node:0", index=1, limit=2
    )
    record.messages[MSG].parent = TRY_A
    container(record).parent = TRY_A
    validate_record(record)  # ownership is consistent ...
    error = refused(record)  # ... but a nested attempt carries no values
    assert (error.path, error.rule) == (mg("Parent"), "S-10")


# covers: S-10
def test_a_container_of_a_node_that_is_not_a_processor_is_refused():
    record = base_record()
    record.messages[MSG].parent = TICKS_A
    record.messages[MSG].node_id = "ticks"
    record.managed = {
        "ticks/" + TICKS_A: attrs.evolve(container(record), parent=TICKS_A, node_id="ticks")
    }
    validate_record(record, GRAPH.describe_provides())
    with pytest.raises(CorruptRecordError) as info:
        adopt(record)
    assert info.value.rule == "S-10" and "not a processor node" in str(info.value)


# -- Ownership (S-9), with records shaped like a processor's ---------------------------------


# covers: S-9
def test_a_missing_or_misowned_container_is_refused_by_the_record_check():
    record = base_record()
    record.managed.clear()
    with pytest.raises(CorruptRecordError) as info:
        validate_record(record, GRAPH.describe_provides())
    assert info.value.rule == "S-9" and info.value.path == f'$.Messages["{MSG}"]'

    record = base_record()
    container(record).node_id = "ticks"  # owned by another node than its messages
    with pytest.raises(CorruptRecordError) as info:
        validate_record(record, GRAPH.describe_provides())
    assert info.value.rule == "S-9"

    record = base_record()
    record.messages[MSG].state = AttemptState.ACTIVE  # a container with no confirmed message
    with pytest.raises(CorruptRecordError) as info:
        validate_record(record, GRAPH.describe_provides())
    assert info.value.rule == "S-9" and info.value.path == mg()


# covers: S-9
def test_manual_acks_active_and_failed_messages_need_no_container():
    record = base_record()
    record.messages.clear()
    record.managed.clear()  # acks without message attempts: a plain reader acked 1 and 2
    validate_record(record, GRAPH.describe_provides())
    for state in (AttemptState.ACTIVE, AttemptState.FAILED):
        record = base_record()
        record.messages[MSG].state = state
        record.managed.clear()
        validate_record(record, GRAPH.describe_provides())


# covers: S-9
def test_history_stays_valid_after_its_parent_failed_or_the_generation_rose():
    record = base_record()
    record.attempts[COUNT_A].state = AttemptState.FAILED
    record.streams[STREAM].generation = 7
    validate_record(record, GRAPH.describe_provides())
    assert adopt(record) == {}  # valid history, but void: never adopted


# -- Messages against their input stream (S-7, S-8) ------------------------------------------


def msg(*rest) -> str:
    path = f'$.Messages["{MSG}"]'
    for part in rest:
        path += f".{part}"
    return path


# covers: S-8
@pytest.mark.parametrize("where", ["pending", "ahead"])
def test_a_confirmed_message_not_acknowledged_by_its_group_is_refused(where):
    record = base_record()
    entry = record.streams[STREAM]
    entry.acked_through = 1
    entry.pending = [pending(2), pending(3)] if where == "pending" else [pending(3)]
    validate_record(record, GRAPH.describe_provides())
    error = refused(record)
    assert (error.path, error.rule) == (msg("Sequence"), "S-8")
    assert "message 2 of processor 'count' is confirmed" in str(error)
    assert ("still pending" if where == "pending" else "past the group's AckedThrough 1") in str(
        error
    )


# covers: S-8, S-9
def test_a_confirmed_message_of_a_failed_processor_is_history_whatever_its_group_says():
    record = base_record()
    record.attempts[COUNT_A].state = AttemptState.FAILED
    entry = record.streams[STREAM]
    entry.acked_through, entry.pending = 1, [pending(2), pending(3)]
    assert adopt(record) == {}  # valid history, never continued


def other_group(record: RunRecord, *, node: str = "ticks", key: str = "ticks", group: str) -> None:
    """Point the message at another reading group's entry (with a consistent Group)."""
    record.streams["other"] = attrs.evolve(
        record.streams[STREAM], node_id=node, key=key, group=group
    )
    record.messages[MSG].stream = "other"
    record.messages[MSG].group = group


# covers: S-7
@pytest.mark.parametrize(
    "forged", ["another-group", "another-key", "failed-try"], ids=lambda name: name
)
def test_a_message_attempt_naming_another_input_than_the_processors_own_is_refused(forged):
    record = base_record()
    if forged == "another-group":  # the entry of another reader of the same stream
        other_group(record, group="sum")
    elif forged == "another-key":  # the processor's group, but of a stream it does not read
        other_group(record, node="count", key="evens", group="count")
    else:  # a failed try needs no container, but its input is checked all the same
        record.messages[MSG].state = AttemptState.FAILED
        record.managed.clear()
        other_group(record, group="sum")
    validate_record(record, GRAPH.describe_provides())
    error = refused(record)
    assert (error.path, error.rule) == (msg("Stream"), "S-7")
    assert "processor 'count'" in str(error) and "own input 'ticks'" in str(error)


# covers: S-7
def test_a_message_attempt_of_a_nested_attempt_or_a_plain_node_is_refused():
    record = base_record()
    record.managed.clear()
    record.messages[MSG].state = AttemptState.FAILED
    record.attempts[TRY_A] = AttemptRecord(
        parent=COUNT_A, node_id="count", boundary="node:0", index=1, limit=2
    )
    record.messages[MSG].parent = TRY_A
    validate_record(record, GRAPH.describe_provides())
    error = refused(record)
    assert (error.path, error.rule) == (msg("Parent"), "S-7")

    record = base_record()
    record.managed.clear()
    record.messages[MSG].state = AttemptState.FAILED
    record.messages[MSG].parent, record.messages[MSG].node_id = TICKS_A, "ticks"
    validate_record(record, GRAPH.describe_provides())
    error = refused(record)
    assert (error.path, error.rule) == (msg("NodeID"), "S-7")
    assert "not a processor node" in str(error)
