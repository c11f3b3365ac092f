"""Proposals: the record one commit proposes, as changes over the committed record (R-RT-1).

A :class:`Proposal` never copies the committed record. Its ``record`` holds the committed
scalars and, for each map (``Scopes``, ``Attempts``, ``Streams``, ``Messages``, ``Managed``), an
:class:`Overlay`: the committed map underneath, the proposal's own entries and deletions on top.
A scope changed through :meth:`Proposal.scope` has an overlay over its ``Nodes`` as well. Making
a proposal and changing an entry cost time in proportion to the change, not to the record.

The ledger adopts a proposal with :func:`adopt`: the changes are written into the committed
record's own maps (each step logged so that :func:`rollback` can undo it), and the returned
:class:`ObjectChange` tells the encoder exactly what changed, so that a save's delta and
bytes are produced without looking at the rest of the record.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import attrs

from durable_core._quickinit import quick_init
from durable_core.records import (
    RECORD_FORMAT,
    AttemptRecord,
    RunRecord,
    ScopeRecord,
    StreamRecord,
)
from durable_core.records.delta import GONE, ListSplice, ObjectChange, Partial

__all__ = ["Overlay", "Proposal", "adopt", "rollback"]


_MISSING: Any = object()


class Overlay(MutableMapping[str, Any]):
    """A map of record entries: a committed ``dict`` underneath, changes on top.

    Reading falls through to the committed map; writing and deleting touch only ``changes``
    (a deleted key maps to :data:`GONE`). The committed map is never changed.
    """

    __slots__ = ("base", "changes")

    def __init__(self, base: dict[str, Any]) -> None:
        self.base = base
        self.changes: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        value = self.changes.get(key, _MISSING)
        if value is _MISSING:
            return self.base[key]
        if value is GONE:
            raise KeyError(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        value = self.changes.get(key, _MISSING)
        if value is _MISSING:
            return self.base.get(key, default)
        return default if value is GONE else value

    def __contains__(self, key: object) -> bool:
        value = self.changes.get(key, _MISSING)  # type: ignore[call-overload]
        if value is _MISSING:
            return key in self.base
        return value is not GONE

    def __setitem__(self, key: str, value: Any) -> None:
        self.changes[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self.changes[key] = GONE

    def __iter__(self) -> Iterator[str]:
        changes = self.changes
        for key in self.base:
            if changes.get(key, _MISSING) is not GONE:
                yield key
        for key, value in changes.items():
            if value is not GONE and key not in self.base:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"Overlay({len(self.base)} committed, {len(self.changes)} changed)"


_RUN_MAPS = ("scopes", "attempts", "streams", "messages", "managed")
_RUN_FIELDS = tuple(
    a.name for a in attrs.fields(RunRecord) if a.name not in _RUN_MAPS and a.name != "revision"
)
_ADOPTED_FIELDS = (*_RUN_FIELDS, "revision")
_SCOPE_FIELDS = tuple(a.name for a in attrs.fields(ScopeRecord) if a.name != "nodes")
_scope_values = operator.attrgetter(*_SCOPE_FIELDS)
_STREAM_FIELDS = tuple(a.name for a in attrs.fields(StreamRecord) if a.name != "pending")

_ATTEMPT_NAMES = tuple(a.name for a in attrs.fields(AttemptRecord))
_new_attempt = quick_init(AttemptRecord, *_ATTEMPT_NAMES)
_attempt_values = operator.attrgetter(*_ATTEMPT_NAMES)
_SCOPE_NAMES = ("graph", "path", "inputs", "nodes", "bindings")
if {a.name for a in attrs.fields(ScopeRecord)} != set(_SCOPE_NAMES):  # pragma: no cover
    raise TypeError("ScopeRecord's fields changed: update _SCOPE_NAMES and Proposal.scope")
_new_scope = quick_init(ScopeRecord, *_SCOPE_NAMES)
_RUN_NAMES = ("run_id", "format", "revision", "version", "definition", "inputs", "root_scope")
if {a.name for a in attrs.fields(RunRecord)} != {*_RUN_NAMES, *_RUN_MAPS}:  # pragma: no cover
    raise TypeError("RunRecord's fields changed: update _RUN_NAMES and Proposal.__init__")
if (  # pragma: no cover - Proposal.__init__ stores these fields without the classes' calls
    Overlay.__slots__ != ("base", "changes")
    or RunRecord.__setattr__ is not object.__setattr__
    or "__slots__" not in RunRecord.__dict__
):
    raise TypeError("Overlay's or RunRecord's fields changed: update Proposal.__init__")
_new_object = object.__new__
# Every field named: the factory default of ``pending`` is never used.
_STREAM_NAMES = (*_STREAM_FIELDS, "pending")
_new_stream = quick_init(StreamRecord, *_STREAM_NAMES)
_stream_values = operator.attrgetter(*_STREAM_FIELDS)
# Every field named: the factory defaults are never used. One change of a scope and one of the
# run record per save.
_new_change = quick_init(ObjectChange, "fields", "maps", "whole", "splices")
_new_partial = quick_init(Partial, "value", "change")
_run_values = operator.attrgetter(*_RUN_FIELDS)


def _copy_attempt(attempt: AttemptRecord) -> AttemptRecord:
    """``attrs.evolve(attempt)``: the fields take no validator or converter (quick_init
    refuses such a class at import), so storing each one is the same object, built faster."""
    return _new_attempt(*_attempt_values(attempt))  # type: ignore[no-any-return]


def _copy_stream(stream: StreamRecord) -> StreamRecord:
    """``attrs.evolve(stream, pending=list(stream.pending))``, built as :func:`_copy_attempt`
    is."""
    return _new_stream(*_stream_values(stream), list(stream.pending))  # type: ignore[no-any-return]


class Proposal:
    """The record proposed by one commit: changes over the committed record, never a copy.

    Mutations read ``record`` freely and change it only through :meth:`scope` and
    :meth:`attempt` (or by setting, adding and deleting entries of its maps): the records
    they return are this proposal's own, so the committed record is never changed (R-RT-1).

    Args:
        committed: the committed record; it is not modified.

    Attributes:
        record: the proposed record; its maps are :class:`Overlay` objects over the committed
            maps (its format is :data:`RECORD_FORMAT`: a format-1 record is written back as
            format 2, R-REC-1).
    """

    __slots__ = ("committed", "record")

    def __init__(self, committed: RunRecord) -> None:
        self.committed = committed
        # One per save: the record and its five overlays stored field by field in this one
        # call (what RunRecord(...) and Overlay(...) store, without their calls).
        record = self.record = _new_object(RunRecord)
        record.run_id = committed.run_id
        record.format = RECORD_FORMAT
        record.revision = committed.revision
        record.version = committed.version
        record.definition = committed.definition
        record.inputs = committed.inputs
        record.root_scope = committed.root_scope
        record.scopes = overlay = _new_object(Overlay)
        overlay.base, overlay.changes = committed.scopes, {}
        record.attempts = overlay = _new_object(Overlay)
        overlay.base, overlay.changes = committed.attempts, {}
        record.streams = overlay = _new_object(Overlay)
        overlay.base, overlay.changes = committed.streams, {}
        record.messages = overlay = _new_object(Overlay)
        overlay.base, overlay.changes = committed.messages, {}
        record.managed = overlay = _new_object(Overlay)
        overlay.base, overlay.changes = committed.managed, {}

    def scope(self, scope_id: str) -> ScopeRecord:
        """The proposal's own, changeable copy of scope ``scope_id`` (its ``nodes`` map is an
        overlay over the committed one: setting and deleting nodes is cheap).

        Raises:
            KeyError: no such scope.
        """
        scopes = self.record.scopes
        if type(scopes) is Overlay:  # read and written in place: a few of these per save
            own = scopes.changes.get(scope_id, _MISSING)
            if own is GONE:
                raise KeyError(scope_id)
            if own is not _MISSING:
                return own  # already the proposal's own
            scope = scopes.base[scope_id]
            nodes = _new_object(Overlay)  # Overlay(scope.nodes), as in __init__
            nodes.base, nodes.changes = scope.nodes, {}
            own = _new_scope(scope.graph, scope.path, scope.inputs, nodes, scope.bindings)
            scopes.changes[scope_id] = own
            return own
        scope = scopes[scope_id]  # the proposal replaced the whole map: copy
        own = attrs.evolve(scope, nodes=dict(scope.nodes))
        scopes[scope_id] = own
        return own

    def attempt(self, attempt_id: str) -> AttemptRecord:
        """The proposal's own, changeable copy of attempt ``attempt_id``.

        Raises:
            KeyError: no such attempt.
        """
        attempts = self.record.attempts
        if type(attempts) is Overlay:
            own = attempts.changes.get(attempt_id, _MISSING)
            if own is GONE:
                raise KeyError(attempt_id)
            if own is not _MISSING:
                return own  # added or copied by this proposal already
            own = _copy_attempt(attempts.base[attempt_id])
            attempts.changes[attempt_id] = own
            return own
        own = _copy_attempt(attempts[attempt_id])
        attempts[attempt_id] = own
        return own

    def stream(self, stream_id: str) -> StreamRecord:
        """The proposal's own, changeable copy of stream record ``stream_id`` (its ``pending``
        list too).

        Raises:
            KeyError: no such stream record.
        """
        streams = self.record.streams
        stream = streams[stream_id]
        if isinstance(streams, Overlay) and stream_id in streams.changes:
            return stream
        own = _copy_stream(stream)
        streams[stream_id] = own
        return own

    def add_stream(self, stream_id: str, stream: StreamRecord) -> None:
        """Add a new stream record (owned by this proposal)."""
        self.record.streams[stream_id] = stream

    def add_scope(self, scope_id: str, scope: ScopeRecord) -> None:
        """Add a new scope record (owned by this proposal)."""
        self.record.scopes[scope_id] = scope

    def add_attempt(self, attempt_id: str, attempt: AttemptRecord) -> None:
        """Add a new attempt record (owned by this proposal)."""
        attempts = self.record.attempts
        if type(attempts) is Overlay:
            attempts.changes[attempt_id] = attempt
        else:
            attempts[attempt_id] = attempt


Undo = list[tuple[Any, str, Any]]
"""What :func:`rollback` puts back, oldest step first: ``(map, key, old)`` restores an entry
of a ``dict`` (``old`` is ``_MISSING`` for an entry that was added), ``(object, attribute,
old)`` a field of a record object. Tuples, not functions: a save logs several steps."""

Partially = Callable[[Any, Any, Undo], Any]


def _apply_map(
    base: dict[str, Any], overlay: Overlay, undo: Undo, partial: Partially | None
) -> dict[str, Any]:
    """Write ``overlay``'s changes into ``base`` (logged in ``undo``); the changed entries."""
    changed: dict[str, Any] = {}
    for key, value in overlay.changes.items():
        old = base.get(key, _MISSING)
        if value is GONE:
            if old is _MISSING:
                continue  # added and deleted by the same proposal
            del base[key]
            undo.append((base, key, old))
            changed[key] = GONE
            continue
        entry: Any = value
        if partial is not None and old is not _MISSING:
            entry = partial(old, value, undo) or value
        base[key] = value
        undo.append((base, key, old))
        changed[key] = entry
    return changed


def _scope_partial(old: ScopeRecord, new: ScopeRecord, undo: Undo) -> Any:
    """A scope changed in place: its nodes written into the committed map (logged in
    ``undo``) and what changed among them; ``None`` (set it whole) otherwise."""
    nodes = new.nodes
    if not isinstance(nodes, Overlay) or nodes.base is not old.nodes:
        if isinstance(nodes, Overlay):
            new.nodes = dict(nodes)
        return None  # set whole
    base = old.nodes
    changed = _apply_map(base, nodes, undo, None)
    new.nodes = base
    if _scope_values(new) != _scope_values(old):
        return None  # a scope's own fields never change in practice: set it whole
    return _new_partial(new, _new_change([], {"nodes": changed}, [], {}))


def _sequence(message: Any) -> int:
    return message.sequence  # type: ignore[no-any-return]


def _pending_splice(old: list[Any], new: list[Any]) -> ListSplice | None:
    """How ``new`` follows from ``old`` (two sequence-ordered lists of pending messages) as
    sequences dropped, then messages appended past the last one left; ``None`` when it does
    not (the entry is then written whole). Exact: the splice applied to ``old`` gives a list
    equal to ``new``. The comparisons run over the lists in C (the messages a proposal kept
    are the committed objects); what is built in Python is in proportion to the change, except
    for acknowledgements out of order, which look at every pending message once."""
    cut = bisect.bisect_right(new, old[-1].sequence, key=_sequence) if old and new else 0
    kept = new[:cut]
    count = len(old) - cut
    if count < 0:
        return None
    if old[count:] == kept:  # the front was dropped (acknowledged in order), or nothing
        dropped = [m.sequence for m in old[:count]]
    else:
        survivors = {m.sequence for m in kept}
        dropped = [m.sequence for m in old if m.sequence not in survivors]
        if len(dropped) != count or [m for m in old if m.sequence in survivors] != kept:
            return None
    return ListSplice(dropped, new[cut:])


def _changed(new: Any, old: Any) -> bool:
    return new is not old and (new != old or type(new) is not type(old))


def _stream_partial(old: StreamRecord, new: StreamRecord, undo: Undo) -> Any:
    """A stream entry changed in place: the fields that changed, and its pending list as a
    splice (S-2: a save's bytes follow what changed, not the group's backlog); ``None`` (set
    it whole) when its pending list did not change by drops and appends."""
    splice = None if new.pending is old.pending else _pending_splice(old.pending, new.pending)
    if splice is None and new.pending is not old.pending:
        return None
    fields = [name for name in _STREAM_FIELDS if _changed(getattr(new, name), getattr(old, name))]
    moved = splice is not None and (splice.dropped or splice.appended)
    splices = {"pending": splice} if moved else {}
    return _new_partial(new, _new_change(fields, {}, [], splices))


def adopt(proposal: Proposal, committed: RunRecord) -> tuple[ObjectChange, Undo]:
    """Write ``proposal``'s changes into ``committed`` in place.

    Args:
        proposal: a proposal made over ``committed``.
        committed: the committed record; it becomes the proposed record.

    Returns:
        What changed (for the encoder) and the undo log (for :func:`rollback`).
    """
    record = proposal.record
    undo: Undo = []
    change = _new_change([], {}, [], {})
    # A save changes the revision; the other fields rarely: one look tells they are the same.
    same = all(map(operator.is_, _run_values(record), _run_values(committed)))
    for name in ("revision",) if same else _ADOPTED_FIELDS:
        new, old = getattr(record, name), getattr(committed, name)
        if new is not old and (new != old or type(new) is not type(old)):
            setattr(committed, name, new)
            undo.append((committed, name, old))
            change.fields.append(name)
    for name in _RUN_MAPS:
        value = getattr(record, name)
        base = getattr(committed, name)
        if isinstance(value, Overlay) and value.base is base:
            if not value.changes:
                continue
            partial = _PARTIALS.get(name)
            changed = _apply_map(base, value, undo, partial)
            if changed:
                change.maps[name] = changed
            continue
        # The proposal assigned a new map: it replaces the committed one.
        whole = dict(value)
        if name == "scopes":
            for scope_id, scope in list(whole.items()):
                if isinstance(scope.nodes, Overlay):
                    whole[scope_id] = attrs.evolve(scope, nodes=dict(scope.nodes))
        setattr(committed, name, whole)
        undo.append((committed, name, base))
        change.whole.append(name)
    return change, undo


_PARTIALS: dict[str, Partially] = {"scopes": _scope_partial, "streams": _stream_partial}
"""By map: how an entry changed in place is told apart from one set whole."""


def rollback(undo: Undo) -> None:
    """Undo an :func:`adopt`, newest step first: the committed record is as it was."""
    for target, key, old in reversed(undo):
        if isinstance(target, dict):
            if old is _MISSING:
                del target[key]
            else:
                target[key] = old
        else:
            setattr(target, key, old)
    undo.clear()
