"""The collector's pause around large builds: restored, and the objects made meanwhile moved to
the oldest generation without a collection walking them."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from durable_core import _nogc
from durable_core._nogc import nogc


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def collector() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        gc.unfreeze()
        if not enabled:
            gc.disable()


def _in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation=generation))


@nogc
def _build(count: int) -> list[Node]:
    assert not gc.isenabled()
    return [Node() for _ in range(count)]


def test_the_objects_built_while_paused_reach_the_oldest_generation_uncollected() -> None:
    collections = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(note)
    try:
        built = _build(_nogc.LARGE)  # more than enough to start a collection of the young ones
    finally:
        gc.callbacks.remove(note)
    assert gc.isenabled()
    assert collections == []
    assert gc.get_count()[0] < 10  # nothing young is left to walk
    assert _in_generation(built[0], 2) and _in_generation(built[-1], 2)
    assert not _in_generation(built[0], 0)


def test_a_cycle_made_while_paused_is_freed_by_the_next_full_collection() -> None:
    @nogc
    def cycle() -> weakref.ref[Node]:
        a, b = Node(), Node()
        a.other, b.other = b, a
        return weakref.ref(a)

    ref = cycle()
    assert ref() is not None
    gc.collect()
    assert ref() is None


def test_objects_frozen_by_the_process_stay_frozen() -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    built = _build(10)
    # The pause did not unfreeze them (unfreezing empties the permanent generation; a frozen
    # object that dies meanwhile leaves it too).
    assert gc.get_freeze_count() > frozen // 2
    assert not _in_generation(built[0], 2)  # what it built stays young, as without the move


def test_a_small_build_stays_young() -> None:
    gc.collect()
    built = _build(_nogc.LARGE // 10)
    assert not _in_generation(built[0], 2)


def test_a_full_collection_runs_once_enough_objects_were_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_nogc, "FULL_AFTER", 3 * _nogc.LARGE)
    monkeypatch.setattr(_nogc, "_moved", [0])
    full = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    @nogc
    def cycle_and_build() -> weakref.ref[Node]:
        a, b = Node(), Node()
        a.other, b.other = b, a
        _build_unpaused(_nogc.LARGE)
        return weakref.ref(a)

    gc.collect()
    gc.callbacks.append(note)
    try:
        ref = cycle_and_build()  # moved, cycle included: nothing frees it yet
        assert ref() is not None and full == []
        cycle_and_build()
        assert full == []
        cycle_and_build()  # the third move passes FULL_AFTER
    finally:
        gc.callbacks.remove(note)
    assert full == [1]
    assert ref() is None
    assert _nogc._moved == [0]


_kept: list[list[Node]] = []


def _build_unpaused(count: int) -> None:
    _kept.append([Node() for _ in range(count)])


def test_a_paused_collector_stays_paused_and_a_raise_restores_it() -> None:
    @nogc
    def fail() -> None:
        raise ValueError("inside")

    with pytest.raises(ValueError):
        fail()
    assert gc.isenabled()
    gc.disable()
    _build(3)
    assert not gc.isenabled()
