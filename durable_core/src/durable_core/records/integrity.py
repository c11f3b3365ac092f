"""Whole-record integrity: the structural rules of the data model (seed 000; SPEC R and S).

:func:`validate_record` runs before any resume step: it refuses a record that breaks a rule with
a :class:`~durable_core.errors.CorruptRecordError` naming the JSON path of the first violation
and the rule ID, and it never repairs anything. It checks history, not liveness: a failed
ancestor makes results void, not corrupt, so old scopes under failed attempts are checked like
any other (R-ATT-5). Every check is a dictionary look-up; the whole pass is linear in the size of
the record (digests are computed once per value).

The rules, in the order they are checked, are listed in ``docs/data-model.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from durable_core._digest import SHORT_INPUT, sha256_hex, short_sha256
from durable_core.errors import CorruptRecordError
from durable_core.records.jsonio import check_shape, is_as_read
from durable_core.records.model import (
    RECORD_FORMAT,
    AttemptState,
    NodeReason,
    RunRecord,
    ScopeRecord,
    StreamDescriptorRecord,
    ValueRecord,
    ValueState,
)
from durable_core.records.path import corrupt, path_of

__all__ = ["GraphShapes", "validate_fresh", "validate_record"]

GraphShapes = Mapping[str, Mapping[str, Sequence[str]]]
"""What :func:`validate_record` needs of a definition: ``{graph name: {node id: [provided key
names, in declared order]}}`` for the root graph and every Sub graph."""

_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX32_RUN = re.compile(r"(?:[0-9a-f]{32})*")  # ids joined: each one is 32 lowercase hex

_ADVICE = "Durable does not repair records: keep this one as evidence and find what wrote it."
_ID = "16 random bytes in lowercase hex (32 characters)"
_SHA = "a SHA-256 in lowercase hex (64 characters)"


def validate_record(record: RunRecord, definition: GraphShapes | None = None) -> None:
    """Check every structural rule of the data model on ``record``.

    The checks, in order: the shape (Python types, integer ranges, valid Unicode of every
    metadata string and map key; R-REC-4), the format (R-REC-1), the identity fields (R-REC-2,
    R-REC-3), the root scope (R-SCOPE-1), the attempts and their groups (R-ATT-1…3), the parent
    chains up to the root scope (R-ATT-5, R-SCOPE-2), the scopes' paths and node records
    (R-SCOPE-2, R-NODE-1), the values (R-VAL-1…3, S-1), the streams (S-2), the message attempts
    (S-7) and the managed containers (S-9, S-10).

    Args:
        record: the record to check; it is not modified.
        definition: when given, also check that every scope's graph and every node belong to the
            definition and that each NodeRecord's outputs cover exactly the node's provides
            (R-NODE-1). See :data:`GraphShapes`.

    Raises:
        CorruptRecordError: at the first violation; ``.path`` is its JSON path
            (``$.Attempts["…"].Index``) and ``.rule`` the SPEC rule (``"R-ATT-3"``).
    """
    check_shape(record)
    _Check(record, definition).run()


def validate_fresh(record: RunRecord, definition: GraphShapes | None = None) -> None:
    """:func:`validate_record` of a record a store's ``load`` has just returned, unchanged.

    The same checks and refusals, except that the shape check (R-REC-4) is left out when the
    quick reader built ``record`` (``is_as_read``): that reader took exactly what the shape
    check accepts as it read. A record read any other way is checked whole.

    Raises:
        CorruptRecordError: as :func:`validate_record`.
    """
    if not is_as_read(record):
        check_shape(record)
    _Check(record, definition).run()


def _fail(rule: str, problem: str, *segments: Any) -> CorruptRecordError:
    return corrupt(path_of(*segments), rule, problem, _ADVICE)


def _short(value: str) -> str:
    return repr(value if len(value) <= 70 else value[:70] + "…")


class _Check:
    """One validation pass; the maps it builds are only valid within it."""

    def __init__(self, record: RunRecord, definition: GraphShapes | None) -> None:
        self.record = record
        self.graphs = definition
        self.scopes = record.scopes
        self.attempts = record.attempts
        self.home: dict[str, str] = {}  # attempt id -> id of the scope its node lives in
        self.root_of: dict[str, str] = {}  # attempt id -> its node's root attempt id

    def run(self) -> None:
        self.check_top()
        self.check_attempts()
        self.check_scope_links()
        self.check_chains()
        self.check_scopes()
        self.check_attempt_outcomes()
        self.check_streams()
        owners = self.check_messages()
        self.check_managed(owners)

    # -- RunRecord ---------------------------------------------------------------------------

    def check_top(self) -> None:
        rec = self.record
        if not 1 <= rec.format <= RECORD_FORMAT:
            newer = rec.format > RECORD_FORMAT
            raise _fail(
                "R-REC-1",
                f"expected record format 1 or {RECORD_FORMAT}, found {rec.format}"
                + (
                    "; it is newer than this runtime: upgrade Durable, never save over it"
                    if newer
                    else ""
                ),
                "Format",
            )
        if rec.format == 1:
            for name, mapping in (
                ("Streams", rec.streams),
                ("Messages", rec.messages),
                ("Managed", rec.managed),
            ):
                if mapping:
                    raise _fail(
                        "R-REC-1",
                        f"a format-1 record carries {len(mapping)} {name} entries; incremental "
                        "fields exist only from format 2",
                        name,
                    )
        if not rec.run_id:
            raise _fail("R-REC-2", "expected a non-empty RunID", "RunID")
        for name, value in (("Definition", rec.definition), ("Inputs", rec.inputs)):
            if not _HEX64.fullmatch(value):
                raise _fail("R-REC-2", f"expected {_SHA}, found {_short(value)}", name)
        root = rec.root_scope
        if not _HEX32.fullmatch(root):
            raise _fail(
                "R-REC-3", f"expected a scope id of {_ID}, found {_short(root)}", "RootScope"
            )
        scope = self.scopes.get(root)
        if scope is None:
            raise _fail("R-SCOPE-1", f"the root scope {root} is not in Scopes", "RootScope")
        if root in self.attempts:
            raise _fail(
                "R-SCOPE-2",
                "the root scope's id is also an attempt id; only child scopes are named by an "
                "attempt",
                "Attempts",
                (root,),
            )
        if scope.inputs != rec.inputs:
            raise _fail(
                "R-SCOPE-1",
                f"the root scope's Inputs {_short(scope.inputs)} differ from the record's "
                f"Inputs {_short(rec.inputs)}",
                "Scopes",
                (root,),
                "Inputs",
            )
        if scope.path != "":
            raise _fail(
                "R-SCOPE-2",
                f"the root scope's Path is the empty string, found {_short(scope.path)}",
                "Scopes",
                (root,),
                "Path",
            )

    # -- Attempts ----------------------------------------------------------------------------

    def check_attempts(self) -> None:
        if not self.attempts_quick():
            self.check_attempts_exactly()

    def attempts_quick(self) -> bool:
        """True when every attempt is a root attempt that passes :meth:`check_attempts_exactly`
        (the usual record), found without building the groups; False: let it decide."""
        attempts, scopes = self.attempts, self.scopes
        if not _HEX32_RUN.fullmatch("".join(attempts)):
            return False
        seen: dict[str, set[str]] = {}  # scope id -> node ids with a root attempt in it
        for aid, a in attempts.items():
            node_id = a.node_id
            if (
                len(aid) != 32
                or a.boundary
                or a.index != 1
                or a.limit != 1
                or not node_id
                or "/" in node_id
            ):
                return False
            parent = a.parent
            nodes = seen.get(parent)
            if nodes is None:
                if parent not in scopes:
                    return False
                nodes = seen[parent] = set()
            elif node_id in nodes:
                return False  # two root attempts of one node in one scope
            nodes.add(node_id)
        return True

    def check_attempts_exactly(self) -> None:
        attempts, scopes = self.attempts, self.scopes
        groups: dict[tuple[str, str, str], list[str]] = {}
        for aid, a in attempts.items():
            if not _HEX32.fullmatch(aid):
                raise _fail("R-REC-3", f"expected an attempt id of {_ID}", "Attempts", (aid,))
            _check_node_id(a.node_id, "R-ATT-1", "Attempts", (aid,), "NodeID")
            if a.limit < 1:
                raise _fail(
                    "R-ATT-1", "expected a positive Limit, found 0", "Attempts", (aid,), "Limit"
                )
            if a.boundary == "" and a.limit != 1:
                raise _fail(
                    "R-ATT-2",
                    f"a root attempt (empty Boundary) has Limit 1, found {a.limit}",
                    "Attempts",
                    (aid,),
                    "Limit",
                )
            if not 1 <= a.index <= a.limit:
                raise _fail(
                    "R-ATT-1",
                    f"expected an Index from 1 to Limit {a.limit}, found {a.index}",
                    "Attempts",
                    (aid,),
                    "Index",
                )
            if a.boundary == "":
                if a.parent not in scopes:
                    raise _fail(
                        "R-ATT-5",
                        f"a root attempt's Parent is its scope, but {_short(a.parent)} is not in "
                        "Scopes",
                        "Attempts",
                        (aid,),
                        "Parent",
                    )
            else:
                outer = attempts.get(a.parent)
                if outer is None:
                    raise _fail(
                        "R-ATT-5",
                        f"a Retry attempt's Parent is its outer attempt, but {_short(a.parent)} is "
                        "not in Attempts",
                        "Attempts",
                        (aid,),
                        "Parent",
                    )
                if outer.node_id != a.node_id:
                    raise _fail(
                        "R-ATT-5",
                        f"a Retry attempt of node {a.node_id!r} links to an attempt of node "
                        f"{outer.node_id!r}; both must be of the same node",
                        "Attempts",
                        (aid,),
                        "Parent",
                    )
                if outer.boundary == a.boundary:
                    raise _fail(
                        "R-ATT-3",
                        f"a Retry attempt at boundary {a.boundary!r} is nested in an attempt at "
                        "the same boundary; a Retry never nests in itself",
                        "Attempts",
                        (aid,),
                        "Boundary",
                    )
            groups.setdefault((a.parent, a.node_id, a.boundary), []).append(aid)
        for ids in groups.values():
            _check_group(ids, attempts, "R-ATT-3", "Attempts", "(Parent, NodeID, Boundary)")

    def check_scope_links(self) -> None:
        root = self.record.root_scope
        for sid, scope in self.scopes.items():
            if sid != root and sid not in self.attempts:
                raise _fail(
                    "R-SCOPE-2",
                    "a child scope's id is the attempt id of its Sub node, but no attempt has it",
                    "Scopes",
                    (sid,),
                )
            if not scope.graph:
                raise _fail("R-SCOPE-1", "expected a non-empty Graph", "Scopes", (sid,), "Graph")
            if self.graphs is not None and scope.graph not in self.graphs:
                raise _fail(
                    "R-SCOPE-1",
                    f"graph {scope.graph!r} is not part of the definition",
                    "Scopes",
                    (sid,),
                    "Graph",
                )
            if not _HEX64.fullmatch(scope.inputs):
                raise _fail(
                    "R-SCOPE-1",
                    f"expected {_SHA}, found {_short(scope.inputs)}",
                    "Scopes",
                    (sid,),
                    "Inputs",
                )

    def check_chains(self) -> None:
        """Follow every parent chain to the root scope, once per link (R-ATT-5, R-SCOPE-2).

        The links (attempt -> outer attempt, root attempt -> scope, child scope -> its Sub
        attempt) were checked to exist above, so each chain either reaches the root scope or
        runs in a cycle. Everything on a chain that reached the root is remembered.
        """
        attempts, home, root_of = self.attempts, self.home, self.root_of
        good_scopes = {self.record.root_scope}
        for start, first in attempts.items():
            if start in home:
                continue
            if not first.boundary and first.parent in good_scopes:  # a root attempt: one link
                home[start], root_of[start] = first.parent, start
                continue
            trail: list[tuple[bool, str]] = []  # (is_attempt, id)
            on_trail: set[tuple[bool, str]] = set()
            is_attempt, current = True, start
            while not (current in home if is_attempt else current in good_scopes):
                step = (is_attempt, current)
                if step in on_trail:
                    cycle = trail[trail.index(step) :]
                    names = " -> ".join(("attempt " if a else "scope ") + i for a, i in cycle)
                    raise _fail(
                        "R-ATT-5",
                        f"the parent chain runs in a cycle ({names}) and never reaches the root "
                        "scope",
                        *(
                            ("Attempts", (current,), "Parent")
                            if is_attempt
                            else ("Scopes", (current,))
                        ),
                    )
                on_trail.add(step)
                trail.append(step)
                if is_attempt:
                    a = attempts[current]
                    is_attempt, current = a.boundary != "", a.parent
                else:  # a child scope: its id is its Sub node's attempt
                    is_attempt = True
            for is_attempt, ident in reversed(trail):
                if not is_attempt:
                    good_scopes.add(ident)
                    continue
                a = attempts[ident]
                if a.boundary:
                    home[ident], root_of[ident] = home[a.parent], root_of[a.parent]
                else:
                    home[ident], root_of[ident] = a.parent, ident

    def check_attempt_outcomes(self) -> None:
        attempts, scopes, graphs = self.attempts, self.scopes, self.graphs
        home, confirmed = self.home, AttemptState.CONFIRMED
        last_sid: str | None = None
        scope: ScopeRecord | None = None
        shapes: Mapping[str, Sequence[str]] | None = None
        for aid, a in attempts.items():
            sid = home[aid]
            if sid is not last_sid:  # attempts of one scope mostly come one after another
                last_sid, scope = sid, scopes[sid]
                shapes = None if graphs is None else graphs[scope.graph]
            assert scope is not None
            if shapes is not None and a.node_id not in shapes:
                raise _fail(
                    "R-ATT-5",
                    f"node {a.node_id!r} is not in graph {scope.graph!r} of its scope {sid}",
                    "Attempts",
                    (aid,),
                    "NodeID",
                )
            if a.state != confirmed:  # != : a str state that check_shape took compares too
                continue
            if a.boundary:
                root = attempts[self.root_of[aid]]
                if root.state != confirmed:
                    raise _fail(
                        "R-ATT-2",
                        f"a Retry attempt is confirmed while its root attempt {self.root_of[aid]} "
                        f"is {root.state}; only the root attempt is confirmed, with its NodeRecord",
                        "Attempts",
                        (aid,),
                        "State",
                    )
            else:
                node = scopes[a.parent].nodes.get(a.node_id)
                if node is None or node.attempt != aid:
                    raise _fail(
                        "R-NODE-1",
                        f"a confirmed root attempt of node {a.node_id!r} has no NodeRecord in its "
                        f"scope {a.parent} naming it; the two are saved together",
                        "Attempts",
                        (aid,),
                        "State",
                    )

    # -- Scopes, nodes, values --------------------------------------------------------------

    def check_scopes(self) -> None:
        root = self.record.root_scope
        for sid, scope in self.scopes.items():
            if sid != root:
                sub = self.attempts[sid]
                outer = self.scopes[self.home[sid]].path
                expected = f"{outer}/{sub.node_id}" if outer else sub.node_id
                if scope.path != expected:
                    raise _fail(
                        "R-SCOPE-2",
                        f"the scope of node {sub.node_id!r}'s attempt is mounted at "
                        f"{_short(expected)}, found Path {_short(scope.path)}",
                        "Scopes",
                        (sid,),
                        "Path",
                    )
            for nid in self.nodes_quick(sid, scope, scope.nodes):
                self.check_node_exactly(sid, scope, nid)

    def nodes_quick(self, sid: str, scope: ScopeRecord, nids: Iterable[str]) -> list[str]:
        """Which of ``nids`` (NodeRecords of ``scope``) :meth:`check_node_exactly` must check.

        The others pass it for sure: each is the usual NodeRecord (its confirmed root attempt,
        plain outputs in the order of the node's provides, every digest matching its bytes),
        found without building paths or sets. A digest that matches is 64 lowercase hex digits,
        so its format needs no check of its own.
        """
        attempts, nodes = self.attempts, scope.nodes
        shapes = None if self.graphs is None else self.graphs[scope.graph]
        confirmed, ready, skipped_value, skipped_node = (
            AttemptState.CONFIRMED,
            ValueState.READY,
            ValueState.SKIPPED,
            NodeReason.SKIPPED,
        )
        get_attempt = attempts.get
        exact: list[str] = []
        for nid in nids:
            node = nodes[nid]
            a = get_attempt(node.attempt)
            if (
                a is None
                or node.node_id != nid
                or a.boundary
                or a.node_id != nid
                or a.parent != sid
                or a.state is not confirmed
            ):
                exact.append(nid)
                continue
            outputs = node.outputs
            if len(outputs) == 1:  # the usual node: one output, no list of names to build
                value = outputs[0]
                if shapes is not None:
                    provided = shapes.get(nid)
                    if provided is None or len(provided) != 1 or provided[0] != value.name:
                        exact.append(nid)
                        continue
                if (
                    value.stream is None
                    and value.name
                    and value.state is ready
                    and node.reason != skipped_node  # a str equal to it is skipped too
                    and value.type_id
                    and value.version
                    and (
                        short_sha256(data).hexdigest()  # sha256_hex without a call
                        if len(data := value.data) < SHORT_INPUT
                        else sha256_hex(data)
                    )
                    == value.digest
                ):
                    continue
                outputs = [value]  # anything else: the loop below decides
            if shapes is not None:
                provided = shapes.get(nid)
                if provided is None or len(provided) != len(outputs):
                    exact.append(nid)
                    continue
                if [value.name for value in outputs] != list(provided):
                    exact.append(nid)
                    continue
            elif len({value.name for value in outputs}) != len(outputs):
                exact.append(nid)
                continue
            skipped = node.reason == skipped_node
            for value in outputs:
                if value.stream is not None or not value.name:
                    break
                if value.state is ready:
                    if (
                        skipped
                        or not value.type_id
                        or not value.version
                        or sha256_hex(value.data) != value.digest
                    ):
                        break
                elif value.state is not skipped_value or value.data or value.digest:
                    break
            else:
                continue
            exact.append(nid)
        return exact

    def check_node_exactly(self, sid: str, scope: ScopeRecord, nid: str) -> None:
        node = scope.nodes[nid]
        base = ("Scopes", (sid,), "Nodes", (nid,))
        if node.node_id != nid:
            raise _fail(
                "R-NODE-1",
                f"a NodeRecord is keyed by its NodeID {nid!r}, found {_short(node.node_id)}",
                *base,
                "NodeID",
            )
        a = self.attempts.get(node.attempt)
        problem = None
        if a is None:
            problem = "is not in Attempts"
        elif a.boundary:
            problem = "is a Retry attempt"
        elif a.node_id != nid:
            problem = f"belongs to node {a.node_id!r}"
        elif a.parent != sid:
            problem = f"belongs to scope {a.parent}"
        elif a.state != AttemptState.CONFIRMED:
            problem = f"is {a.state}"
        if problem is not None:
            raise _fail(
                "R-NODE-1",
                f"a NodeRecord names its node's confirmed root attempt in this scope, but "
                f"{_short(node.attempt)} {problem}",
                *base,
                "Attempt",
            )
        provides: set[str] | None = None
        if self.graphs is not None:
            shapes = self.graphs[scope.graph]
            if nid not in shapes:
                raise _fail(
                    "R-NODE-1",
                    f"node {nid!r} is not in graph {scope.graph!r} of the definition",
                    *base,
                )
            provides = set(shapes[nid])
        names: set[str] = set()
        skipped = node.reason == NodeReason.SKIPPED
        for index, value in enumerate(node.outputs):
            where = (*base, "Outputs", index)
            self.check_value(value, where, streams_allowed=True)
            if value.name in names:
                raise _fail("R-NODE-1", f"output {value.name!r} is stored twice", *where, "Name")
            names.add(value.name)
            if provides is not None and value.name not in provides:
                raise _fail(
                    "R-NODE-1",
                    f"output {value.name!r} is not provided by node {nid!r} (it provides "
                    f"{sorted(provides)})",
                    *where,
                    "Name",
                )
            if skipped and value.state != ValueState.SKIPPED:
                raise _fail(
                    "R-NODE-1",
                    f"a node skipped as a whole has only skipped outputs, found {value.state}",
                    *where,
                    "State",
                )
        if provides is not None and names != provides:
            missing = sorted(provides - names)
            raise _fail(
                "R-NODE-1",
                f"the outputs cover every provided key of node {nid!r}; missing {missing}",
                *base,
                "Outputs",
            )

    def check_value(
        self, value: ValueRecord, where: tuple[Any, ...], *, streams_allowed: bool
    ) -> None:
        if not value.name:
            raise _fail("R-VAL-1", "expected a non-empty Name", *where, "Name")
        if value.stream is not None:
            if self.record.format == 1:
                raise _fail("R-REC-1", "a format-1 record carries a stream value", *where, "Stream")
            if not streams_allowed:
                raise _fail(
                    "S-10",
                    "a managed container holds ordinary values only, found a stream reference",
                    *where,
                    "Stream",
                )
            if value.state != ValueState.READY:
                raise _fail("S-1", f"a stream value is ready, found {value.state}", *where, "State")
            for name, present in (("Data", value.data), ("Digest", value.digest)):
                if present:
                    raise _fail("S-1", f"a stream value excludes {name}", *where, name)
            for name, text in (("TypeID", value.type_id), ("Version", value.version)):
                if not text:
                    raise _fail(
                        "S-1", f"expected the element type's non-empty {name}", *where, name
                    )
            self.check_descriptor(value.stream, (*where, "Stream"))
        elif value.state == ValueState.READY:
            for name, text in (("TypeID", value.type_id), ("Version", value.version)):
                if not text:
                    raise _fail(
                        "R-VAL-1",
                        f"a ready value names its codec: expected a non-empty {name}",
                        *where,
                        name,
                    )
            _check_digest(value.data, value.digest, "R-VAL-1", where)
        else:
            if value.data:
                raise _fail(
                    "R-VAL-2",
                    f"a skipped value has no Data, found {len(value.data)} bytes",
                    *where,
                    "Data",
                )
            if value.digest:
                raise _fail("R-VAL-2", "a skipped value has an empty Digest", *where, "Digest")

    def check_descriptor(self, d: StreamDescriptorRecord, where: tuple[Any, ...]) -> None:
        for name, text in (("SourceID", d.source_id), ("NodeID", d.node_id), ("Key", d.key)):
            if not text:
                raise _fail("S-1", f"expected a non-empty {name}", *where, name)
        if d.scope not in self.scopes:
            raise _fail(
                "S-1", f"the source's scope {_short(d.scope)} is not in Scopes", *where, "Scope"
            )
        if d.capacity < 1:
            raise _fail("S-1", "expected a positive Capacity, found 0", *where, "Capacity")
        a = self.attempts.get(d.attempt)
        if a is None or a.boundary or a.node_id != d.node_id or a.parent != d.scope:
            raise _fail(
                "S-1",
                f"expected the root attempt of node {d.node_id!r} in scope {d.scope} (the real "
                f"writer), found {_short(d.attempt)}, which is not",
                *where,
                "Attempt",
            )

    # -- Streams, messages, managed containers ------------------------------------------------

    def check_streams(self) -> None:
        for key, s in self.record.streams.items():
            base = ("Streams", (key,))
            if s.scope not in self.scopes:
                raise _fail(
                    "S-2", f"the stream's scope {_short(s.scope)} is not in Scopes", *base, "Scope"
                )
            for name, text in (("NodeID", s.node_id), ("Key", s.key)):
                if not text:
                    raise _fail("S-2", f"expected a non-empty {name}", *base, name)
            self.check_defined(s.scope, s.node_id, "S-2", (*base, "NodeID"))
            if s.generation < 1:
                raise _fail(
                    "S-2", "expected a Generation of at least 1, found 0", *base, "Generation"
                )
            if s.acked_through > s.last_sequence:
                raise _fail(
                    "S-2",
                    f"AckedThrough {s.acked_through} is past LastSequence {s.last_sequence}",
                    *base,
                    "AckedThrough",
                )
            previous = s.acked_through
            for index, message in enumerate(s.pending):
                where = (*base, "Pending", index)
                if not previous < message.sequence <= s.last_sequence:
                    raise _fail(
                        "S-2",
                        f"pending sequences increase strictly within (AckedThrough "
                        f"{s.acked_through}, LastSequence {s.last_sequence}], found "
                        f"{message.sequence} after {previous}",
                        *where,
                        "Sequence",
                    )
                previous = message.sequence
                _check_digest(message.data, message.digest, "S-2", where, "S-2")

    def check_messages(self) -> dict[tuple[str, str, str], str]:
        """Check message attempts (S-7); return the owners of confirmed ones (S-9)."""
        streams, attempts = self.record.streams, self.attempts
        groups: dict[tuple[str, str, int, str, str], list[str]] = {}
        owners: dict[tuple[str, str, str], str] = {}
        for mid, m in self.record.messages.items():
            base = ("Messages", (mid,))
            stream = streams.get(m.stream)
            if stream is None:
                raise _fail(
                    "S-7", f"the input stream {_short(m.stream)} is not in Streams", *base, "Stream"
                )
            if m.group != stream.group:
                raise _fail(
                    "S-7",
                    f"the message is read by group {stream.group!r} of its stream, found "
                    f"{_short(m.group)}",
                    *base,
                    "Group",
                )
            if not 1 <= m.sequence <= stream.last_sequence:
                raise _fail(
                    "S-7",
                    f"expected a Sequence from 1 to the stream's LastSequence "
                    f"{stream.last_sequence}, found {m.sequence}",
                    *base,
                    "Sequence",
                )
            parent = attempts.get(m.parent)
            if parent is None:
                raise _fail(
                    "S-7",
                    f"the processing attempt {_short(m.parent)} is not in Attempts",
                    *base,
                    "Parent",
                )
            if parent.node_id != m.node_id:
                raise _fail(
                    "S-7",
                    f"the processing attempt belongs to node {parent.node_id!r}, found "
                    f"{_short(m.node_id)}",
                    *base,
                    "NodeID",
                )
            if m.limit < 1:
                raise _fail("S-7", "expected a positive Limit, found 0", *base, "Limit")
            if not 1 <= m.index <= m.limit:
                raise _fail(
                    "S-7",
                    f"expected an Index from 1 to Limit {m.limit}, found {m.index}",
                    *base,
                    "Index",
                )
            groups.setdefault((m.stream, m.group, m.sequence, m.parent, m.node_id), []).append(mid)
            if m.state == AttemptState.CONFIRMED:
                owners.setdefault((self.home[m.parent], m.parent, m.node_id), mid)
        for ids in groups.values():
            _check_group(
                ids, self.record.messages, "S-7", "Messages", "one message and processing attempt"
            )
        return owners

    def check_managed(self, confirmed: dict[tuple[str, str, str], str]) -> None:
        seen: dict[tuple[str, str, str], str] = {}
        for key, mg in self.record.managed.items():
            base = ("Managed", (key,))
            if mg.scope not in self.scopes:
                raise _fail("S-9", f"the scope {_short(mg.scope)} is not in Scopes", *base, "Scope")
            parent = self.attempts.get(mg.parent)
            if parent is None:
                raise _fail(
                    "S-9", f"the attempt {_short(mg.parent)} is not in Attempts", *base, "Parent"
                )
            if parent.node_id != mg.node_id:
                raise _fail(
                    "S-9",
                    f"the attempt belongs to node {parent.node_id!r}, found {_short(mg.node_id)}",
                    *base,
                    "NodeID",
                )
            if self.home[mg.parent] != mg.scope:
                raise _fail(
                    "S-9",
                    f"the attempt belongs to scope {self.home[mg.parent]}, found {mg.scope}",
                    *base,
                    "Scope",
                )
            self.check_defined(mg.scope, mg.node_id, "S-9", (*base, "NodeID"))
            owner = (mg.scope, mg.parent, mg.node_id)
            if owner in seen:
                raise _fail(
                    "S-9",
                    f"Managed[{seen[owner]!r}] already holds the state of this Scope/Parent/NodeID",
                    *base,
                )
            seen[owner] = key
            if owner not in confirmed:
                raise _fail(
                    "S-9",
                    "no confirmed message attempt has this container's Scope/Parent/NodeID",
                    *base,
                )
            if mg.state is not None:
                self.check_value(mg.state, (*base, "State"), streams_allowed=False)
            names: set[str] = set()
            for index, value in enumerate(mg.values):
                where = (*base, "Values", index)
                self.check_value(value, where, streams_allowed=False)
                if value.name in names:
                    raise _fail("S-10", f"value {value.name!r} is stored twice", *where, "Name")
                names.add(value.name)
        for owner, mid in confirmed.items():
            if owner not in seen:
                raise _fail(
                    "S-9",
                    f"a confirmed message attempt has no ManagedRecord with Scope {owner[0]}, "
                    f"Parent {owner[1]} and NodeID {owner[2]!r}",
                    "Messages",
                    (mid,),
                )

    def check_defined(self, sid: str, node_id: str, rule: str, where: tuple[Any, ...]) -> None:
        if self.graphs is None:
            return
        graph = self.scopes[sid].graph
        if node_id not in self.graphs[graph]:
            raise _fail(
                rule, f"node {node_id!r} is not in graph {graph!r} of the definition", *where
            )


def _check_node_id(node_id: str, rule: str, *where: Any) -> None:
    if not node_id or "/" in node_id:
        raise _fail(
            rule, f"expected a non-empty node id without '/', found {_short(node_id)}", *where
        )


def _check_digest(
    data: bytes, digest: str, rule: str, where: tuple[Any, ...], mismatch_rule: str = "R-VAL-3"
) -> None:
    if not _HEX64.fullmatch(digest):
        raise _fail(rule, f"expected a Digest of {_SHA}, found {_short(digest)}", *where, "Digest")
    if sha256_hex(data) != digest:
        raise _fail(
            mismatch_rule,
            f"the Digest does not match the {len(data)} bytes of Data: they were damaged or lost",
            *where,
            "Digest",
        )


def _check_group(
    ids: list[str], records: Mapping[str, Any], rule: str, field: str, owner: str
) -> None:
    """Indexes 1…n exactly once, one Limit, every attempt but the last one failed."""
    count = len(ids)
    limit = records[ids[0]].limit
    seen: set[int] = set()
    for ident in ids:
        item = records[ident]
        if item.limit != limit:
            raise _fail(
                rule,
                f"attempts under one {owner} share one Limit: {ids[0]} has {limit}, this one "
                f"{item.limit}",
                field,
                (ident,),
                "Limit",
            )
        if item.index > count or item.index in seen:
            raise _fail(
                rule,
                f"indexes under one {owner} run 1…{count} without gaps or repeats, found "
                f"{item.index}",
                field,
                (ident,),
                "Index",
            )
        seen.add(item.index)
    for ident in ids:
        item = records[ident]
        if item.index < count and item.state != AttemptState.FAILED:
            raise _fail(
                rule,
                f"attempt {item.index} of {count} under one {owner} is {item.state}; every "
                "earlier attempt has failed",
                field,
                (ident,),
                "State",
            )
