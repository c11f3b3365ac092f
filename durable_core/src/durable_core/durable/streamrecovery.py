"""What ``resume`` checks and rebuilds for durable streams, before anything runs (S-1…S-6).

:func:`plan_streams` validates every stream entry and every stream descriptor of a loaded
(already structurally valid) record against the definition and the attempts, decodes every
unacked element, and returns a :class:`StreamPlan`: the state each adopted producer continues
from, the unacked tails of completed sources, the failed endpoints of confirmed Sub aliases, and
the repairs to save before running. Every refusal is raised here, before any recovery event,
start or save:

- **forged references**: an entry or a descriptor naming a node that does not provide that
  stream key, a source without its writer entry or writer root attempt, a source id that is not
  the source's, a descriptor naming another attempt than the writer's root attempt, a confirmed
  output referencing a source that is still being written;
- **future generations**: a reading group's generation above its source's;
- **non-resumable producers** (S-3): a writer still active in a live scope that sent elements
  with ``send``;
- **inconsistent terminals**: a confirmed writer whose entries are not all completed, a failed
  writer with open entries, failed terminals mixed with canceled or completed ones of the same
  root (S-6), a Sub alias of a failed source that was canceled or lies under a failed ancestor
  (S-4).

**Repair (S-6).** An older record may hold the failed terminal of only some entries of a root
that is still active. When that root lives in a still-valid scope, the plan lists it: the
runtime converges every entry of every source of that root, and the root's failure, in one CAS
before running (:func:`repair`). Entries under failed or confirmed ancestors are never touched.
The repair adds no field and no Retry budget.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import attrs

from durable_core.codecs import Codecs
from durable_core.durable.ledger import Proposal
from durable_core.durable.streams import (
    WRITER_GROUP,
    Source,
    decode_cursor,
    fail_sources,
    kept_group,
)
from durable_core.errors import (
    CodecError,
    CorruptRecordError,
    StreamNotResumableError,
)
from durable_core.graph import Graph
from durable_core.graph.streams import StreamState
from durable_core.records import (
    AttemptState,
    RunRecord,
    StreamRecord,
    StreamTerminal,
)

__all__ = ["StreamPlan", "plan_streams", "repair"]

_ADVICE = "Durable does not repair such records: keep this one as evidence and find what wrote it."


@attrs.frozen
class StreamPlan:
    """What the durable checkpointer needs to continue a run's streams.

    Attributes:
        adopted: by writer root attempt id: the saved state of each stream (by key name) its
            active producer had opened; the producer goes on from there.
        completed: by ``(scope, node, key)`` of a completed source: its state, with every
            reading group's unacked tail.
        failed: ``(scope, node, key)`` of sources whose writer failed (their confirmed Sub
            aliases restore as read-only failed endpoints).
        repairs: writer root attempt ids ``(attempt id, scope, node)`` to converge to failed in
            one save before running (S-6).
    """

    adopted: dict[str, dict[str, StreamState]] = attrs.Factory(dict)
    completed: dict[tuple[str, str, str], StreamState] = attrs.Factory(dict)
    failed: frozenset[tuple[str, str, str]] = frozenset()
    repairs: tuple[tuple[str, str, str], ...] = ()


def _corrupt(problem: str, entry: str | None = None, rule: str = "S-2") -> CorruptRecordError:
    path = f'$.Streams["{entry}"]' if entry is not None else None
    return CorruptRecordError(f"{problem}. {_ADVICE}", path=path, rule=rule)


def _ancestry(record: RunRecord, scope_id: str) -> str:
    """``"live"``, ``"failed"`` (a failed attempt above) or ``"confirmed"`` (a confirmed one
    above: the scope's results are final) for the scope ``scope_id``."""
    attempts = record.attempts
    current = scope_id
    state = "live"
    seen: set[str] = set()
    while current != record.root_scope and current not in seen:
        seen.add(current)
        owner = attempts.get(current)
        if owner is None:
            return "failed"  # integrity checks the chains; an orphan is never live
        if owner.state is AttemptState.FAILED:
            return "failed"
        if owner.state is AttemptState.CONFIRMED:
            state = "confirmed"
        current = owner.parent
    return state


def _writer_root(record: RunRecord, scope: str, node_id: str) -> str | None:
    for attempt_id, attempt in record.attempts.items():
        if attempt.parent == scope and attempt.node_id == node_id and not attempt.boundary:
            return attempt_id
    return None


def plan_streams(graph: Graph, record: RunRecord, codecs: Codecs) -> StreamPlan:
    """Check every stream rule on ``record`` and work out what resume rebuilds.

    Args:
        graph: the run's graph (its definition matches the record's).
        record: the loaded record, already validated (``validate_record``).
        codecs: decodes the unacked elements.

    Returns:
        The :class:`StreamPlan`.

    Raises:
        CorruptRecordError: a forged reference, a future generation, inconsistent terminals.
        StreamNotResumableError: an active producer in a live scope sent without positions.
        CodecError: an unacked element no longer decodes to its key's element type.
    """
    graphs = graph.graphs()
    by_source: dict[tuple[str, str, str], list[tuple[str, StreamRecord]]] = defaultdict(list)
    for entry_id, entry in record.streams.items():
        by_source[(entry.scope, entry.node_id, entry.key)].append((entry_id, entry))

    adopted: dict[str, dict[str, StreamState]] = defaultdict(dict)
    completed: dict[tuple[str, str, str], StreamState] = {}
    failed: set[tuple[str, str, str]] = set()
    roots: dict[str, list[StreamTerminal]] = defaultdict(list)
    root_of: dict[tuple[str, str, str], str] = {}

    for (scope_id, node_id, key_name), entries in by_source.items():
        source = Source(scope_id, node_id, key_name)
        scope = record.scopes[scope_id]
        label = f"{source.label} in scope {scope.path or '(root)'!r}"
        first_id = entries[0][0]
        node = graphs[scope.graph].nodes.get(node_id) if scope.graph in graphs else None
        key = None if node is None else {k.name: k for k in node.provides}.get(key_name)
        if key is None or not key.stream:
            raise _corrupt(
                f"the record holds {label}, but graph {scope.graph!r} has no node {node_id!r} "
                f"providing a stream key {key_name!r} (a forged reference)",
                first_id,
            )
        writer = None
        for entry_id, entry in entries:
            if entry_id != source.entry_id(entry.group) or entry.source_id != source.source_id:
                raise _corrupt(
                    f"{label}: entry for group {entry.group!r} does not carry the source's "
                    "identity (a forged reference)",
                    entry_id,
                )
            if entry.group == WRITER_GROUP:
                writer = entry
        if writer is None:
            raise _corrupt(f"{label} has reading groups but no writer entry", first_id)
        root_id = _writer_root(record, scope_id, node_id)
        if root_id is None:
            raise _corrupt(
                f"{label} has no writer: node {node_id!r} has no root attempt in that scope "
                "(a forged reference)",
                first_id,
                rule="S-3",
            )
        root_of[(scope_id, node_id, key_name)] = root_id
        for entry_id, entry in entries:
            if entry.generation > writer.generation:
                raise _corrupt(
                    f"{label}, group {entry.group!r}: generation {entry.generation} is newer "
                    f"than its source's {writer.generation} (a future generation)",
                    entry_id,
                )
            if entry.last_sequence > writer.last_sequence:
                raise _corrupt(
                    f"{label}, group {entry.group!r}: LastSequence {entry.last_sequence} is past "
                    f"the source's {writer.last_sequence}",
                    entry_id,
                )
        terminals = {entry.terminal for _, entry in entries}
        roots[root_id].extend(terminals)
        state = record.attempts[root_id].state
        ancestry = _ancestry(record, scope_id)
        if state is AttemptState.CONFIRMED and terminals != {StreamTerminal.COMPLETED}:
            raise _corrupt(
                f"{label}: its writer is confirmed but its entries are "
                f"{sorted(t.value or 'open' for t in terminals)}, not all completed",
                first_id,
                rule="S-1",
            )
        if state is AttemptState.FAILED and terminals != {StreamTerminal.FAILED}:
            raise _corrupt(
                f"{label}: its writer failed but its entries are "
                f"{sorted(t.value or 'open' for t in terminals)}; a failure saves every "
                "entry failed with the writer, in one save",
                first_id,
                rule="S-5",
            )
        if state is AttemptState.FAILED:
            failed.add((scope_id, node_id, key_name))
            continue
        if ancestry == "failed":
            continue  # void history under a failed ancestor: checked, never rebuilt
        tails = _decode_tails(codecs, key, entries, label)
        positioned, position = decode_cursor(writer.cursor)
        # Every element sent is kept, for groups a Retry of a Sub may open again, or none is
        # (a record that kept nothing for them restores without such a history).
        kept = [tails.pop(group) for group in _kept_groups(tails)]
        history = tuple(item for chunk in kept for item in chunk)
        retained = [sequence for sequence, _ in history] == list(range(1, writer.last_sequence + 1))
        saved = StreamState(
            sequence=writer.last_sequence,
            position=position,
            positioned=positioned,
            resumable=writer.resumable,
            generation=writer.generation + 1,
            tails=tails,
            retained=retained,
            history=history if retained else (),
        )
        if state is AttemptState.CONFIRMED:
            completed[(scope_id, node_id, key_name)] = saved
        elif terminals == {StreamTerminal.OPEN}:
            if writer.last_sequence and not writer.resumable:
                where = f" (inside {scope.path!r})" if scope.path else ""
                raise StreamNotResumableError(
                    f"resume of run {record.run_id!r} refused: {source.label}{where} was still "
                    f"being produced when the run stopped ({writer.last_sequence} elements "
                    "sent), and its producer sent elements with send(), which saves no "
                    "position to go on from. Nothing ran and nothing was saved. Make the "
                    "producer resumable: start from writer.position and send each element "
                    "with send_at(element, position); then start a new run id."
                )
            adopted[root_id][key_name] = saved

    repairs = _check_roots(record, roots, root_of)
    _check_descriptors(record, graphs, by_source, root_of, failed)
    return StreamPlan(
        adopted=dict(adopted),
        completed=completed,
        failed=frozenset(failed),
        repairs=repairs,
    )


def _decode_tails(
    codecs: Codecs, key: Any, entries: list[tuple[str, StreamRecord]], label: str
) -> dict[str, tuple[tuple[int, Any], ...]]:
    tails: dict[str, tuple[tuple[int, Any], ...]] = {}
    try:
        codec = codecs.lookup(key.type)
    except CodecError as exc:
        raise CodecError(f"{label}: its elements cannot be decoded: {exc}") from exc
    for _, entry in entries:
        if entry.group == WRITER_GROUP or entry.terminal is StreamTerminal.FAILED:
            continue
        tail = []
        for message in entry.pending:
            try:
                value = codec.decode(message.data)
            except Exception as exc:
                raise CodecError(
                    f"{label}, group {entry.group!r}: element {message.sequence} no longer "
                    f"decodes with codec {codec.id!r} ({type(exc).__name__}: {exc})"
                ) from exc
            if not key.accepts(value):
                raise CodecError(
                    f"{label}, group {entry.group!r}: element {message.sequence} decodes to a "
                    f"{type(value).__name__}, not to the element type {key!r}"
                )
            tail.append((message.sequence, value))
        tails[entry.group] = tuple(tail)
    return tails


def _kept_groups(tails: dict[str, Any]) -> list[str]:
    """The kept entries' groups among ``tails``, in order (``/kept/1``, ``/kept/2``, …)."""
    found = []
    index = 1
    while kept_group(index) in tails:
        found.append(kept_group(index))
        index += 1
    return found


def _check_roots(
    record: RunRecord,
    roots: dict[str, list[StreamTerminal]],
    root_of: dict[tuple[str, str, str], str],
) -> tuple[tuple[str, str, str], ...]:
    """Refuse mixed terminals of one root; list the active roots to converge (S-6)."""
    repairs = []
    for root_id, terminals in roots.items():
        kinds = set(terminals)
        if StreamTerminal.FAILED in kinds and kinds & {
            StreamTerminal.CANCELED,
            StreamTerminal.COMPLETED,
        }:
            raise _corrupt(
                f"the streams opened by root attempt {root_id} mix failed terminals with "
                f"{sorted(t.value for t in kinds - {StreamTerminal.FAILED, StreamTerminal.OPEN})}"
                " ones; a root's streams fail together or not at all",
                rule="S-6",
            )
        attempt = record.attempts[root_id]
        if attempt.state is not AttemptState.ACTIVE:
            continue
        if kinds & {StreamTerminal.COMPLETED, StreamTerminal.CANCELED}:
            raise _corrupt(
                f"the streams opened by root attempt {root_id} are "
                f"{sorted(t.value or 'open' for t in kinds)} while the attempt is still active; "
                "a stream completes only with its writer's confirmation",
                rule="S-1",
            )
        if StreamTerminal.FAILED in kinds and _ancestry(record, attempt.parent) == "live":
            repairs.append((root_id, attempt.parent, attempt.node_id))
    return tuple(sorted(repairs))


def _check_descriptors(
    record: RunRecord,
    graphs: dict[str, Graph],
    by_source: dict[tuple[str, str, str], list[tuple[str, StreamRecord]]],
    root_of: dict[tuple[str, str, str], str],
    failed: set[tuple[str, str, str]],
) -> None:
    """Every stream descriptor in a NodeRecord names a real source and its writer (S-1, S-4)."""
    for scope_id, scope in record.scopes.items():
        for node_id, node_record in scope.nodes.items():
            for index, value in enumerate(node_record.outputs):
                d = value.stream
                if d is None:
                    continue
                path = f'$.Scopes["{scope_id}"].Nodes["{node_id}"].Outputs[{index}].Stream'
                where = (
                    f"output {value.name!r} of node {node_id!r} in scope {scope.path or '(root)'!r}"
                )
                source = (d.scope, d.node_id, d.key)
                if source not in by_source or d.source_id != Source(*source).source_id:
                    raise CorruptRecordError(
                        f"{where} references stream {d.key!r} of node {d.node_id!r}, which has "
                        f"no entries in Streams (a forged reference). {_ADVICE}",
                        path=path,
                        rule="S-1",
                    )
                if d.attempt != root_of[source]:
                    raise CorruptRecordError(
                        f"{where} names writer attempt {d.attempt}, but the stream's writer is "
                        f"root attempt {root_of[source]} (a forged reference). {_ADVICE}",
                        path=path,
                        rule="S-1",
                    )
                writer = record.attempts[d.attempt]
                own = (scope_id, node_id, value.name) == source
                if writer.state is AttemptState.ACTIVE:
                    raise CorruptRecordError(
                        f"{where} is confirmed, but the stream it references is still being "
                        f"written (a forged reference). {_ADVICE}",
                        path=path,
                        rule="S-1",
                    )
                if writer.state is AttemptState.FAILED:
                    if own:  # integrity: a NodeRecord names its confirmed root attempt
                        raise CorruptRecordError(
                            f"{where}: its own writer failed. {_ADVICE}", path=path, rule="S-5"
                        )
                    # A Sub alias of a failed source (S-4): read-only failed endpoint, only
                    # when the failure is a real one in a scope whose ancestors are valid.
                    if (
                        _ancestry(record, d.scope) == "failed"
                        or _ancestry(record, scope_id) == "failed"
                    ):
                        raise CorruptRecordError(
                            f"{where} is a Sub alias of a stream under a failed ancestor; it "
                            f"cannot be restored. {_ADVICE}",
                            path=path,
                            rule="S-4",
                        )
                    if source not in failed:
                        raise CorruptRecordError(
                            f"{where} is a Sub alias of a stream whose writer failed but whose "
                            f"entries are not failed (canceled is not a failure). {_ADVICE}",
                            path=path,
                            rule="S-4",
                        )


def repair(proposal: Proposal, repairs: tuple[tuple[str, str, str], ...]) -> None:
    """Converge each listed root: every entry of its sources failed, the root attempt failed
    (S-6). One mutation, so the runtime saves all of it in one CAS."""
    for root_id, scope_id, node_id in repairs:
        fail_sources(proposal, scope_id, node_id)
        if proposal.record.attempts[root_id].state is AttemptState.ACTIVE:
            proposal.attempt(root_id).state = AttemptState.FAILED
