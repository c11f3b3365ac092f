"""A body that mutates a value it received changes nothing another reader sees, in an
uninterrupted run as after a resume (every reader gets the value as it was saved)."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Any

import attrs
import pytest

from durable_core import (
    CancelToken,
    Codecs,
    Graph,
    In,
    Key,
    MemoryStore,
    Out,
    Runtime,
    execute,
)
from durable_core.codecs.registry import default_json_codecs
from durable_core.durable.copies import immutable
from tests.durable_core.durable.scenarios import CallLog, enter, open_store

ITEMS = Key("items", list[int])
SEED = Key("seed", list[int])
A_SAW, B_SAW = Key("a_saw", list[int]), Key("b_saw", list[int])
COUNT = Key("count", int)
PAIR = Key("pair", tuple[int, ...])


def graph(log: CallLog, token: CancelToken | None = None) -> Graph:
    """seed -> make -> items; ``a`` mutates items and the seed; ``b`` runs after ``a`` and
    reports what it sees. ``a`` cancels the run when given a token, so ``b`` runs after a
    resume."""
    g = Graph("copies", inputs=[SEED])

    @g.node("make", requires=[SEED], provides=[ITEMS])
    def make(rc: Any) -> None:
        enter(log, "make")
        rc.set(ITEMS, [1, 2, 3])

    @g.node("a", requires=[ITEMS, SEED], provides=[A_SAW])
    def a(rc: Any) -> None:
        enter(log, "a")
        items, seed = rc.get(ITEMS), rc.get(SEED)
        items.append(99)
        seed.clear()
        rc.set(A_SAW, items)
        if token is not None:
            token.cancel()

    @g.node("b", requires=[ITEMS, SEED, A_SAW], provides=[B_SAW])
    def b(rc: Any) -> None:
        enter(log, "b")
        a_saw = rc.get(A_SAW)
        a_saw.append(-1)  # b's own copy
        rc.set(B_SAW, rc.get(ITEMS) + rc.get(SEED))

    return g


@pytest.fixture
def log(tmp_path: Path) -> CallLog:
    return CallLog(tmp_path / "calls.log")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_an_uninterrupted_run_and_a_resumed_run_see_the_same_values(
    kind: str, tmp_path: Path, log: CallLog
) -> None:
    # covers: R-VAL-3, R-RT-3
    whole = open_store(kind, tmp_path / "whole")
    halves = open_store(kind, tmp_path / "halves")
    try:
        uninterrupted = Runtime(whole, Codecs.default()).run(
            graph(log), run_id="r", version="v", inputs={SEED: [7, 8]}
        )
        token = CancelToken()
        first = Runtime(halves, Codecs.default()).run(
            graph(log, token), run_id="r", version="v", inputs={SEED: [7, 8]}, cancel=token
        )
        assert first.status == "canceled"
        resumed = Runtime(halves, Codecs.default()).resume(
            graph(log), run_id="r", version="v", inputs={SEED: [7, 8]}
        )
    finally:
        whole.close()
        halves.close()
    assert uninterrupted.status == resumed.status == "completed"
    assert uninterrupted[B_SAW] == resumed[B_SAW] == [1, 2, 3, 7, 8]
    assert uninterrupted[A_SAW] == resumed[A_SAW] == [1, 2, 3, 99]
    assert uninterrupted[ITEMS] == resumed[ITEMS] == [1, 2, 3]
    assert uninterrupted[SEED] == [7, 8]


def test_each_read_of_a_result_is_its_own_copy(log: CallLog) -> None:
    # covers: R-VAL-3
    result = Runtime(MemoryStore(), Codecs.default()).run(
        graph(log), run_id="r", version="v", inputs={SEED: [7, 8]}
    )
    result[ITEMS].append(5)
    result.values["items"].append(6)
    assert result[ITEMS] == [1, 2, 3]
    assert result.get(ITEMS) == [1, 2, 3]


def test_a_sub_graph_that_mutates_its_input_changes_nothing_outside(log: CallLog) -> None:
    # covers: G-9, R-SCOPE-1
    x, y = Key("x", list[int]), Key("y", list[int])
    child = Graph("child", inputs=[x])

    @child.node("grow", requires=[x], provides=[y])
    def grow(rc: Any) -> None:
        value = rc.get(x)
        value.append(4)
        rc.set(y, value)

    g = Graph("parent", inputs=[SEED])

    @g.node("make", requires=[SEED], provides=[ITEMS])
    def make(rc: Any) -> None:
        rc.set(ITEMS, [1])

    g.sub("sub", child, bindings=[In(ITEMS, x), Out(y, A_SAW)])

    @g.node("after", requires=[ITEMS, A_SAW], provides=[B_SAW])
    def after(rc: Any) -> None:
        out = rc.get(A_SAW)
        out.append(5)  # only this reader's copy
        rc.set(B_SAW, rc.get(ITEMS) + rc.get(A_SAW))

    store = MemoryStore()
    result = Runtime(store, Codecs.default()).run(g, run_id="r", version="v", inputs={SEED: [0]})
    assert result.status == "completed"
    assert result[B_SAW] == [1, 1, 4]
    assert result[A_SAW] == [1, 4]


def test_immutable_values_are_shared_as_they_are(log: CallLog) -> None:
    seen: list[Any] = []
    g = Graph("shared", inputs=[COUNT])

    @g.node("make", requires=[COUNT], provides=[PAIR, ITEMS])
    def make(rc: Any) -> None:
        rc.set(PAIR, (1, 2, 3))
        rc.set(ITEMS, [1])

    for name in ("r1", "r2"):

        @g.node(name, requires=[PAIR, ITEMS], provides=[])
        def read(rc: Any) -> None:
            seen.append((rc.get(PAIR), rc.get(ITEMS)))

    result = Runtime(MemoryStore(), Codecs.default()).run(
        g, run_id="r", version="v", inputs={COUNT: 1}
    )
    assert result.status == "completed"
    (pair1, items1), (pair2, items2) = seen
    assert pair1 is pair2  # a tuple of ints cannot change: no copy
    assert items1 == items2 and items1 is not items2


def test_readers_see_the_saved_form_of_a_value(log: CallLog) -> None:
    # covers: R-VAL-1, R-VAL-3 (an int saved for a float key reads back as a float)
    ratio = Key("ratio", float)
    seen: list[Any] = []
    g = Graph("floats", inputs=[COUNT])

    @g.node("make", requires=[COUNT], provides=[ratio])
    def make(rc: Any) -> None:
        rc.set(ratio, 3)

    @g.node("read", requires=[ratio], provides=[])
    def read(rc: Any) -> None:
        seen.append(rc.get(ratio))

    result = Runtime(MemoryStore(), Codecs.default()).run(
        g, run_id="r", version="v", inputs={COUNT: 1}
    )
    assert result.status == "completed"
    assert type(seen[0]) is float and seen[0] == 3.0
    assert type(result[ratio]) is float


def test_the_plain_engine_shares_values() -> None:
    # covers: G-12 (the default checkpointer shares every value)
    seen: list[Any] = []
    g = Graph("plain", inputs=[COUNT])

    @g.node("make", requires=[COUNT], provides=[ITEMS])
    def make(rc: Any) -> None:
        rc.set(ITEMS, [1])

    for name in ("r1", "r2"):

        @g.node(name, requires=[ITEMS], provides=[])
        def read(rc: Any) -> None:
            seen.append(rc.get(ITEMS))

    execute(g, {COUNT: 1})
    assert seen[0] is seen[1]


class Color(enum.Enum):
    RED = 1


@attrs.frozen
class Frozen:
    a: int
    b: tuple[str, ...]


@attrs.frozen
class FrozenHoldingList:
    a: list[int]


@attrs.define
class Mutable:
    a: int


@dataclasses.dataclass(frozen=True)
class FrozenData:
    a: int


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, True),
        ("s", True),
        (b"b", True),
        (None, True),
        (1.5, True),
        (Color.RED, True),
        ((1, ("a", b"b")), True),
        (frozenset({1, 2}), True),
        (Frozen(1, ("x",)), True),
        (FrozenData(1), True),
        ([1], False),
        ((1, [2]), False),
        ({"a": 1}, False),
        (bytearray(b"x"), False),
        (FrozenHoldingList([1]), False),
        (Mutable(1), False),
        ({1}, False),
    ],
)
def test_what_counts_as_immutable(value: Any, expected: bool) -> None:
    assert immutable(value) is expected


class _TenthsCodec:
    """A float codec that keeps one decimal: what a reader gets is what a resume would."""

    type = float
    id = "test:tenths"
    version = "1"

    def encode(self, value: float) -> bytes:
        return f"{value:.1f}".encode()

    def decode(self, data: bytes) -> float:
        return float(data)


class _Meters(int):
    pass


class _MetersCodec:
    type = _Meters
    id = "test:meters"
    version = "1"

    def encode(self, value: _Meters) -> bytes:
        return str(int(value)).encode()

    def decode(self, data: bytes) -> _Meters:
        return _Meters(int(data))


def test_a_fresh_scalar_reaches_its_readers_as_its_codec_gives_it_back() -> None:
    # covers: R-VAL-3
    # A scalar encoded by its built-in codec is handed on as it is; one encoded by another
    # codec (lossy here) reaches the readers decoded, in an uninterrupted run as after a resume.
    ratio, length, count = Key("ratio", float), Key("length", _Meters), Key("count", int)
    seen = Key("seen", str)
    g = Graph("scalars", inputs=[count])

    @g.node("make", requires=[count], provides=[ratio])
    async def make(rc: Any) -> None:
        rc.set(ratio, 2 / 3)

    @g.node("measure", requires=[count], provides=[length])
    async def measure(rc: Any) -> None:
        rc.set(length, _Meters(rc.get(count)))

    @g.node("read", requires=[ratio, length, count], provides=[seen])
    async def read(rc: Any) -> None:
        rc.set(seen, f"{rc.get(ratio)!r} {type(rc.get(length)).__name__} {rc.get(count)!r}")

    codecs = Codecs()
    for codec in default_json_codecs():
        if codec.type is not float:
            codecs.register(codec)
    codecs.register(_TenthsCodec())
    codecs.register(_MetersCodec())
    result = Runtime(MemoryStore(), codecs).run(g, run_id="r", version="v", inputs={count: 5})
    assert result.status == "completed"
    assert result[seen] == "0.7 _Meters 5"
