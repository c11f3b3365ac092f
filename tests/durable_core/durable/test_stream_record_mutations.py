"""Records with streams, messages and managed state, changed by one mutation and resumed through
the file and SQLite stores: refused before anything runs, or resumed to the uninterrupted result.

The bases are real runs (a resumable ``send_at`` producer, a value reader, an acking reader and
a batched processor with managed state, in the root and inside a Sub, with a producer inside the
Sub published through ``Out``), stopped by their own bodies at chosen elements. Each case takes
one base, changes its record once (generations, fronts, Pending, cursors, Resumable, terminals,
entry identities, dropped or copied entries, message attempts, managed state and values,
descriptors, digests), writes it back as the complete record or as a delta after it (journal
entry or delta row), and resumes it. See ``stream_mutations`` for the graphs and mutations.

Every case must be refused before anything runs, with a ``DurableError``, no body called and
every stored byte as it was; or complete with the outputs of an uninterrupted run, the acking
reader having handled every element (no silent loss). A mutation that the docs say is refused
(a forged identity, a spoiled digest or codec, a bad cursor, a future generation…) must be
refused. The default run takes a few hundred cases; the ``slow`` ones more than 5,000 (half of
them in ``test_stream_record_mutations_more``, a file of its own so that two parallel workers
share them).
"""

# covers: S-1, S-2, S-3, S-4, S-5, S-7, S-9, S-10, R-RT-3

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from tests.durable_core.durable import stream_mutations as sm

KINDS = ("file", "sqlite")


class World(dict):  # type: ignore[type-arg]
    def __repr__(self) -> str:  # Hypothesis prints the arguments of a failing case
        return "world"


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    """The bases on both stores, the uninterrupted outputs, and a directory for the cases."""
    root = Path(tempfile.mkdtemp(prefix="stream-mutations-"))
    try:
        expected = {graph: sm.expected_outputs(graph) for graph in sm.GRAPHS}
        bases = {
            (name, kind): sm.build_base(name, kind, root / f"base-{name}-{kind}")
            for name in sm.BASES
            for kind in KINDS
        }
        yield World(root=root, bases=bases, expected=expected, cases=itertools.count())
    finally:
        shutil.rmtree(root, ignore_errors=True)


def check_one_case(world: dict[str, Any], data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(sm.BASES)), label="base")
    kind = data.draw(st.sampled_from(KINDS), label="store")
    family = data.draw(st.sampled_from(sorted(sm.FAMILIES)), label="family")
    delta = data.draw(st.booleans(), label="as a delta")
    chooser = sm.Chooser(
        lambda seq: data.draw(st.sampled_from(list(seq))),
        lambda lo, hi: data.draw(st.integers(lo, hi)),
    )
    base = world["bases"][(name, kind)]
    mutation = sm.FAMILIES[family](base.record, chooser)
    assume(mutation is not None)
    directory = world["root"] / f"case-{next(world['cases'])}"
    try:
        outcome = sm.run_case(base, mutation, directory, delta, world["expected"][base.graph])
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    event(f"outcome: {outcome.kind}")  # --hypothesis-show-statistics counts them
    written = "a delta" if delta else "the complete record"
    assert outcome.ok, (
        f"base {name} on the {kind} store, {mutation.name}, written as {written}: "
        f"{outcome.kind}: {outcome.detail}"
    )


@settings(max_examples=600, derandomize=True, database=None)
@given(data=st.data())
def test_a_mutated_record_is_refused_before_anything_runs_or_resumes_to_the_full_result(
    world: dict[str, Any], data: st.DataObject
) -> None:
    # covers: S-1, S-2, S-3, S-4, S-5, S-7, S-9, S-10
    check_one_case(world, data)


@pytest.mark.slow
@settings(max_examples=2600, database=None)  # and as many in test_stream_record_mutations_more
@given(data=st.data())
def test_many_mutated_records_are_refused_before_anything_runs_or_resume_to_the_full_result(
    world: dict[str, Any], data: st.DataObject
) -> None:
    # covers: S-1, S-2, S-3, S-4, S-5, S-7, S-9, S-10
    check_one_case(world, data)


def test_the_bases_stop_mid_way_with_streams_messages_and_managed_state(
    world: dict[str, Any],
) -> None:
    # covers: S-2, S-7, S-9
    # The cases are only worth something if the bases hold what the mutations change.
    for (name, _kind), base in world["bases"].items():
        record = base.record
        assert record.streams and record.messages and record.managed, name
        assert any(e.pending for e in record.streams.values()), name
    active = {
        name
        for (name, _), base in world["bases"].items()
        if any(sm._writer_active(base.record, k) for k in base.record.streams)
    }
    assert {"flat-acks3", "flat-proc5", "nested-acks3"} <= active
    assert any(
        sm._descriptors(b.record) for (n, _), b in world["bases"].items() if n == "flat-done"
    )
    nested = world["bases"][("nested-acks3", "file")].record
    assert {s.path for s in nested.scopes.values()} == {"", "part"}


def test_an_unchanged_record_resumes_to_the_full_result(world: dict[str, Any]) -> None:
    # covers: S-2, S-3, S-7
    # The baseline of every case: with no mutation, each base completes as if never stopped.
    for (name, kind), base in world["bases"].items():
        for delta in (False, True):
            directory = world["root"] / f"unchanged-{name}-{kind}-{delta}"
            outcome = sm.run_case(
                base,
                sm.Mutation("no change", lambda record: None),
                directory,
                delta,
                world["expected"][base.graph],
            )
            assert outcome.kind == "completed", (name, kind, delta, outcome)
