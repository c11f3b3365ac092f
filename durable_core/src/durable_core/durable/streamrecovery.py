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
- **generations**: a reading group's generation other than its source's (every entry of a
  source shares one generation; a delivery of any other could never ack);
- **lost reading groups**: a reader that is still reading (in the source's scope, inside a
  Sub node whose try is in the record and valid, or of a Sub's ``Out`` alias in the scopes
  above), not confirmed and not failed, without its entry while the source has sent elements
  (it would silently start after them);
- **cursors**: a writer's ``Cursor`` that is not UTF-8 JSON;
- **counters at the top of their range**: a generation the next resume must raise, or an active
  source's ``LastSequence`` the next element must raise, already at the largest integer a
  record holds (the first save would fail, and every resume after it);
- **non-resumable producers** (S-3): a writer still active in a live scope that sent elements
  with ``send``;
- **inconsistent terminals**: a confirmed writer whose entries are not all completed, a failed
  writer with open entries, failed terminals mixed with canceled or completed ones of the same
  root (S-6), a Sub alias of a failed source that was canceled or lies under a failed ancestor
  (S-4);
- **descriptors**: a stream output whose element ``TypeID``/``Version`` is not the codec its
  key's element type has now (``CodecError``, as for a plain value), whose ``Capacity`` is not
  its key's, whose ``Terminal`` is not ``completed`` (or ``failed`` for an alias of a failed
  source), or that names a source under a failed ancestor from a scope that is still valid.

**Failures known by implication.** A Sub attempt whose child's failure was saved but whose own
was not counts as failed here too, as in
:func:`~durable_core.durable.recovery.propagate_failures`: its scopes are void history, so a
non-resumable producer in them does not block resume, and the repair never writes into them.

**Repair (S-6).** An older record may hold the failed terminal of only some entries of a root
that is still active. When that root lives in a still-valid scope, the plan lists it: the
runtime converges every entry of every source of that root, and the root's failure, in one CAS
before running (:func:`repair`). Entries under failed or confirmed ancestors are never touched.
The repair adds no field and no Retry budget.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import attrs

from durable_core.codecs import Codecs
from durable_core.durable.ledger import Proposal
from durable_core.durable.recovery import propagate_failures
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
from durable_core.graph import Graph, In, Out
from durable_core.graph.streams import StreamState
from durable_core.records import (
    AttemptState,
    RunRecord,
    StreamRecord,
    StreamTerminal,
    ValueRecord,
)
from durable_core.records.fields import INT_MAX

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


class _Ancestry:
    """Whether a scope is still valid, counting the failures the record implies.

    ``failed`` holds the failed attempts and the active ones that
    :func:`~durable_core.durable.recovery.propagate_failures` finds failed by implication (a
    Sub attempt over a failed child whose own failure was never saved): ``resume`` treats
    those as failed, so the stream plan does too.
    """

    def __init__(self, record: RunRecord) -> None:
        self._record = record
        self._failed: set[str] | None = None  # worked out on first use
        self._known: dict[str, str] = {}

    def __call__(self, scope_id: str) -> str:
        """``"live"``, ``"failed"`` (a failed attempt above) or ``"confirmed"`` (a confirmed
        one above: the scope's results are final) for the scope ``scope_id``."""
        known = self._known.get(scope_id)
        if known is not None:
            return known
        record = self._record
        attempts = record.attempts
        failed = self._failed
        if failed is None:
            failed = {aid for aid, a in attempts.items() if a.state is AttemptState.FAILED}
            failed.update(propagate_failures(record).propagated)
            self._failed = failed
        current = scope_id
        state = "live"
        seen: set[str] = set()
        while current != record.root_scope and current not in seen:
            seen.add(current)
            owner = attempts.get(current)
            if owner is None or current in failed:
                state = "failed"  # integrity checks the chains; an orphan is never live
                break
            if owner.state is AttemptState.CONFIRMED:
                state = "confirmed"
            current = owner.parent
        self._known[scope_id] = state
        return state


def _root_attempts(record: RunRecord) -> dict[tuple[str, str], str]:
    """The root attempt id of each ``(scope id, node id)`` (integrity: at most one)."""
    return {
        (a.parent, a.node_id): attempt_id
        for attempt_id, a in record.attempts.items()
        if not a.boundary
    }


def _cannot_continue(problem: str, entry: str, field: str) -> CorruptRecordError:
    return CorruptRecordError(
        f"{problem}; the next save would have to go past the largest number a record can hold "
        f"({INT_MAX}), so this run cannot continue. Nothing ran and nothing was saved. "
        "Start the work again under a new run id (durable fork copies the confirmed nodes "
        "that have no stream output).",
        path=f'$.Streams["{entry}"].{field}',
        rule="S-2",
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _check_cursor(writer: StreamRecord, entry_id: str, label: str) -> None:
    """A writer's ``Cursor`` is empty or UTF-8 JSON (the last ``send_at`` position, as
    ``encode_cursor`` wrote it: no NaN or infinity)."""
    if not writer.cursor:
        return
    try:
        json.loads(writer.cursor.decode("utf-8"), parse_constant=_reject_constant)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise CorruptRecordError(
            f"{label}: the writer's Cursor (the producer's last send_at position) is not UTF-8 "
            f"JSON ({type(exc).__name__}: {exc}), so the producer cannot go on from it. " + _ADVICE,
            path=f'$.Streams["{entry_id}"].Cursor',
            rule="S-3",
        ) from None


class _Readers:
    """What :func:`_check_groups` needs, worked out once per plan: the reading nodes of each
    stream key of each graph (through the ``In`` bindings of its Sub nodes), the scopes in
    which a node's root attempt failed, and the scopes each Sub node of each scope opened."""

    def __init__(self, record: RunRecord) -> None:
        self._paths: dict[tuple[str, str], tuple[str, ...]] = {}
        attempts = record.attempts
        self.failing = {
            a.parent for a in attempts.values() if not a.boundary and a.state is AttemptState.FAILED
        }
        # (scope id, Sub node id) -> the scopes its tries opened; scope id -> its Sub node.
        self.tries: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.mount: dict[str, tuple[str, str]] = {}
        for scope_id in record.scopes:
            current = scope_id
            seen: set[str] = set()
            while current in attempts and current not in seen:
                seen.add(current)
                owner = attempts[current]
                if not owner.boundary:
                    self.tries[(owner.parent, owner.node_id)].append(scope_id)
                    self.mount[scope_id] = (owner.parent, owner.node_id)
                    break
                current = owner.parent

    def of(self, graph: Graph, key: str) -> tuple[str, ...]:
        """The paths, relative to ``graph``, of every node reading its stream ``key``."""
        found = self._paths.get((graph.name, key))
        if found is None:
            paths: list[str] = []
            for node_id, node in graph.nodes.items():
                if not any(k.name == key and k.stream for k in node.requires):
                    continue
                if node.child is None:
                    paths.append(node_id)
                    continue
                for binding in node.bindings:
                    if isinstance(binding, In) and binding.parent.name == key:
                        paths.extend(
                            f"{node_id}/{path}" for path in self.of(node.child, binding.child.name)
                        )
            found = self._paths[(graph.name, key)] = tuple(paths)
        return found


def _expected_groups(
    record: RunRecord,
    readers: _Readers,
    graphs: dict[str, Graph],
    ancestry: _Ancestry,
    source: Source,
) -> Iterator[tuple[str, str]]:
    """``(group, reading node)`` of every reader of ``source`` that must hold its group's
    entry: in the source's scope, inside its Sub nodes (through ``In``) and, for a stream a
    Sub publishes through ``Out``, in the scopes above and their Sub nodes. A reader that is
    confirmed, or inside a Sub node that is confirmed, whose scope is not in the record yet,
    is void or has a failed node, is left out: its obligation ended, or it never started
    reading in a scope the record keeps."""
    level, key = source.scope, source.key
    while True:
        scope = record.scopes[level]
        graph = graphs[scope.graph]
        prefix = f"{scope.path}/" if scope.path else ""
        for path in readers.of(graph, key):
            *subs, node_id = path.split("/")
            current: str | None = level
            for sub in subs:
                assert current is not None
                if sub in record.scopes[current].nodes:
                    current = None  # the Sub node is confirmed: its readers are done
                    break
                tries = [
                    s for s in readers.tries.get((current, sub), ()) if ancestry(s) != "failed"
                ]
                if len(tries) != 1 or tries[0] in readers.failing:
                    current = None  # no valid try in the record, or one that fails
                    break
                current = tries[0]
            if current is not None and node_id not in record.scopes[current].nodes:
                yield prefix + path, node_id
        mount = readers.mount.get(level)
        if mount is None:
            return
        parent, sub = mount
        if parent in readers.failing:
            return
        node = graphs[record.scopes[parent].graph].nodes.get(sub)
        outs = (
            {}
            if node is None
            else {b.child.name: b.parent.name for b in node.bindings if isinstance(b, Out)}
        )
        if key not in outs:
            return
        level, key = parent, outs[key]


def _check_groups(
    record: RunRecord,
    readers: _Readers,
    graphs: dict[str, Graph],
    ancestry: _Ancestry,
    source: Source,
    writer: StreamRecord,
    entries: list[tuple[str, StreamRecord]],
    label: str,
) -> None:
    """Every reader of ``source`` that is still reading (see :func:`_expected_groups`) has
    its group's entry once an element was sent: groups attach before the first element, a
    new Sub try's groups are saved with its scope, and a reader detaches only after its
    confirmation or failure was saved (S-2). Kept entries are not groups."""
    if writer.last_sequence == 0 or source.scope in readers.failing:
        # Nothing sent; or a node of this scope failed: the scope fails with it (the run, for
        # the root scope), and a reader canceled then may have missed the elements sent since.
        return
    groups = {entry.group for _, entry in entries}
    for group, node_id in _expected_groups(record, readers, graphs, ancestry, source):
        if group in groups:
            continue
        raise CorruptRecordError(
            f"{label} has sent {writer.last_sequence} elements, but its reading group "
            f"{group!r} (node {node_id!r}, not confirmed) has no entry: the elements it has "
            "not acknowledged are missing from the record, and resuming would silently skip "
            "them. " + _ADVICE,
            path=f'$.Streams["{source.entry_id(group)}"]',
            rule="S-2",
        )


def plan_streams(graph: Graph, record: RunRecord, codecs: Codecs) -> StreamPlan:
    """Check every stream rule on ``record`` and work out what resume rebuilds.

    Args:
        graph: the run's graph (its definition matches the record's).
        record: the loaded record, already validated (``validate_record``).
        codecs: decodes the unacked elements.

    Returns:
        The :class:`StreamPlan`.

    Raises:
        CorruptRecordError: a forged reference, a generation other than its source's, a lost
            reading group, a cursor that is not JSON, a counter at the top of its range,
            inconsistent terminals, a descriptor that does not agree with its writer or key.
        StreamNotResumableError: an active producer in a live scope sent without positions.
        CodecError: a descriptor's element codec is not the one its key's element type has
            now, or an unacked element no longer decodes to its key's element type.
    """
    graphs = graph.graphs()
    by_source: dict[tuple[str, str, str], list[tuple[str, StreamRecord]]] = defaultdict(list)
    for entry_id, entry in record.streams.items():
        by_source[(entry.scope, entry.node_id, entry.key)].append((entry_id, entry))

    ancestry = _Ancestry(record)
    root_attempts = _root_attempts(record) if record.streams else {}
    readers: _Readers | None = None
    descriptors = list(_descriptors(record))
    element_codecs = _descriptor_codecs(record, graphs, codecs, descriptors)
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
        writer_id = ""
        for entry_id, entry in entries:
            if entry_id != source.entry_id(entry.group) or entry.source_id != source.source_id:
                raise _corrupt(
                    f"{label}: entry for group {entry.group!r} does not carry the source's "
                    "identity (a forged reference)",
                    entry_id,
                )
            if entry.group == WRITER_GROUP:
                writer, writer_id = entry, entry_id
        if writer is None:
            raise _corrupt(f"{label} has reading groups but no writer entry", first_id)
        root_id = root_attempts.get((scope_id, node_id))
        if root_id is None:
            raise _corrupt(
                f"{label} has no writer: node {node_id!r} has no root attempt in that scope "
                "(a forged reference)",
                first_id,
                rule="S-3",
            )
        root_of[(scope_id, node_id, key_name)] = root_id
        for entry_id, entry in entries:
            if entry.generation != writer.generation:
                newer = "a future" if entry.generation > writer.generation else "an older"
                raise _corrupt(
                    f"{label}, group {entry.group!r}: generation {entry.generation} differs "
                    f"from its source's {writer.generation} ({newer} generation); every entry "
                    "of a source shares one generation, and a delivery of any other could "
                    "never be acknowledged",
                    entry_id,
                )
            if entry.last_sequence > writer.last_sequence:
                raise _corrupt(
                    f"{label}, group {entry.group!r}: LastSequence {entry.last_sequence} is past "
                    f"the source's {writer.last_sequence}",
                    entry_id,
                )
        _check_cursor(writer, writer_id, label)
        terminals = {entry.terminal for _, entry in entries}
        roots[root_id].extend(terminals)
        state = record.attempts[root_id].state
        where = ancestry(scope_id)
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
        if where == "failed":
            continue  # void history under a failed ancestor: checked, never rebuilt
        if StreamTerminal.FAILED not in terminals:
            if readers is None:
                readers = _Readers(record)
            _check_groups(record, readers, graphs, ancestry, source, writer, entries, label)
        codec = element_codecs.get((scope_id, node_id, key_name))
        tails = _decode_tails(codecs, codec, key, entries, label)
        positioned, position = decode_cursor(writer.cursor)
        # Every element sent is kept, for groups a Retry of a Sub may open again, or none is
        # (a record that kept nothing for them restores without such a history).
        kept = [tails.pop(group) for group in _kept_groups(tails)]
        history = tuple(item for chunk in kept for item in chunk)
        retained = len(history) == writer.last_sequence and all(
            sequence == expected for expected, (sequence, _) in enumerate(history, 1)
        )
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
            if where == "live" and writer.generation >= INT_MAX:
                raise _cannot_continue(
                    f"{label}: its generation is {writer.generation}, and resume raises it once "
                    "for the readers of the completed stream",
                    writer_id,
                    "Generation",
                )
            completed[(scope_id, node_id, key_name)] = saved
        elif terminals == {StreamTerminal.OPEN}:
            if writer.last_sequence and not writer.resumable:
                where_text = f" (inside {scope.path!r})" if scope.path else ""
                raise StreamNotResumableError(
                    f"resume of run {record.run_id!r} refused: {source.label}{where_text} was "
                    f"still being produced when the run stopped ({writer.last_sequence} "
                    "elements sent), and its producer sent elements with send(), which saves "
                    "no position to go on from. Nothing ran and nothing was saved. Make the "
                    "producer resumable: start from writer.position and send each element "
                    "with send_at(element, position); then start a new run id."
                )
            if writer.generation >= INT_MAX:
                raise _cannot_continue(
                    f"{label}: its generation is {writer.generation}, and resume raises it once "
                    "when the producer goes on",
                    writer_id,
                    "Generation",
                )
            if writer.last_sequence >= INT_MAX:
                raise _cannot_continue(
                    f"{label}: its producer is still running and has sent "
                    f"{writer.last_sequence} elements, and its next element is numbered one "
                    "higher",
                    writer_id,
                    "LastSequence",
                )
            adopted[root_id][key_name] = saved

    repairs = _check_roots(record, ancestry, roots)
    _check_descriptors(record, graphs, ancestry, descriptors, by_source, root_of, completed, failed)
    return StreamPlan(
        adopted=dict(adopted),
        completed=completed,
        failed=frozenset(failed),
        repairs=repairs,
    )


_Output = tuple[str, str, ValueRecord, str, str]
"""A stream output: ``(scope id, node id, value, JSON path of its descriptor, where)``."""


def _descriptors(record: RunRecord) -> Iterator[_Output]:
    """Every stream output of every NodeRecord."""
    for scope_id, scope in record.scopes.items():
        for node_id, node_record in scope.nodes.items():
            for index, value in enumerate(node_record.outputs):
                if value.stream is None:
                    continue
                path = f'$.Scopes["{scope_id}"].Nodes["{node_id}"].Outputs[{index}].Stream'
                where = (
                    f"output {value.name!r} of node {node_id!r} in scope {scope.path or '(root)'!r}"
                )
                yield scope_id, node_id, value, path, where


def _descriptor_codecs(
    record: RunRecord, graphs: dict[str, Graph], codecs: Codecs, descriptors: list[_Output]
) -> dict[tuple[str, str, str], Any]:
    """Check each stream output's element codec, as for a plain value (R-VAL-3): its
    ``TypeID``/``Version`` must be the codec its key's element type has now. Returns the codec
    of each source's own output, which decodes its unacked elements."""
    found: dict[tuple[str, str, str], Any] = {}
    for scope_id, node_id, value, _, _ in descriptors:
        scope = record.scopes[scope_id]
        node = graphs[scope.graph].nodes[node_id]  # decode_confirmed checked both
        key = next(k for k in node.provides if k.name == value.name)
        try:
            codec = codecs.stored_codec(key.type, value.type_id, value.version, name=key.name)
        except CodecError as exc:
            raise CodecError(
                f"run {record.run_id!r}, scope {scope.path or '(root)'!r}, node {node_id!r}: "
                f"the elements of its stream output {value.name!r}: {exc}. Nothing ran and "
                "nothing was saved"
            ) from exc
        d = value.stream
        assert d is not None
        if (d.scope, d.node_id, d.key) == (scope_id, node_id, value.name):
            found[(scope_id, node_id, value.name)] = codec
    return found


def _decode_tails(
    codecs: Codecs,
    codec: Any,
    key: Any,
    entries: list[tuple[str, StreamRecord]],
    label: str,
) -> dict[str, tuple[tuple[int, Any], ...]]:
    tails: dict[str, tuple[tuple[int, Any], ...]] = {}
    if codec is None:  # an active source: no output says which codec wrote it yet
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
    record: RunRecord, ancestry: _Ancestry, roots: dict[str, list[StreamTerminal]]
) -> tuple[tuple[str, str, str], ...]:
    """Refuse mixed terminals of one root; list the active roots to converge (S-6): only in
    scopes still valid (never under a failed attempt, saved or implied)."""
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
        if StreamTerminal.FAILED in kinds and ancestry(attempt.parent) == "live":
            repairs.append((root_id, attempt.parent, attempt.node_id))
    return tuple(sorted(repairs))


def _check_descriptors(
    record: RunRecord,
    graphs: dict[str, Graph],
    ancestry: _Ancestry,
    descriptors: list[_Output],
    by_source: dict[tuple[str, str, str], list[tuple[str, StreamRecord]]],
    root_of: dict[tuple[str, str, str], str],
    completed: dict[tuple[str, str, str], StreamState],
    failed: set[tuple[str, str, str]],
) -> None:
    """Every stream descriptor in a NodeRecord names a real source and its writer, and agrees
    with them and with its key (S-1, S-4)."""
    for scope_id, node_id, value, path, where in descriptors:
        d = value.stream
        assert d is not None
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
        node = graphs[record.scopes[scope_id].graph].nodes[node_id]
        key = next(k for k in node.provides if k.name == value.name)
        if d.capacity != key.capacity:
            raise CorruptRecordError(
                f"{where} says Capacity {d.capacity}, but its key {key.name!r} has capacity "
                f"{key.capacity} (the definition, which matches the record, fixes it). " + _ADVICE,
                path=f"{path}.Capacity",
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
        allowed = {StreamTerminal.COMPLETED}
        if writer.state is AttemptState.FAILED:
            allowed.add(StreamTerminal.FAILED)
        if d.terminal not in allowed:
            raise CorruptRecordError(
                f"{where} says Terminal {d.terminal.value or 'open'!r}, but its writer is "
                f"{writer.state.value}: a stream output is saved completed with its node's "
                f"confirmation. {_ADVICE}",
                path=f"{path}.Terminal",
                rule="S-1",
            )
        if writer.state is AttemptState.CONFIRMED:
            if source not in completed and ancestry(scope_id) != "failed":
                # The source is void (under a failed ancestor) but this output would be
                # restored: no such output is ever saved.
                raise CorruptRecordError(
                    f"{where} references stream {d.key!r} of node {d.node_id!r} in a scope "
                    f"under a failed attempt, whose elements are void, from a scope that is "
                    f"still valid (a forged reference). {_ADVICE}",
                    path=path,
                    rule="S-4",
                )
            continue
        if own:  # integrity: a NodeRecord names its confirmed root attempt
            raise CorruptRecordError(
                f"{where}: its own writer failed. {_ADVICE}", path=path, rule="S-5"
            )
        # A Sub alias of a failed source (S-4): read-only failed endpoint, only when the
        # failure is a real one in a scope whose ancestors are valid.
        if ancestry(d.scope) == "failed" or ancestry(scope_id) == "failed":
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
