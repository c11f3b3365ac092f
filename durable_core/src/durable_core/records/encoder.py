"""Encoding successive versions of one run's record from what changed: :class:`RecordEncoder`.

The encoder remembers the canonical text of every part of the record it last encoded and, told
what changed, encodes only those parts with the writers of :mod:`durable_core.records.fastpath`
(the writing pass of :mod:`durable_core.records.fields` deciding anything unusual); it returns
the save's :mod:`~durable_core.records.delta` delta and, on demand, the complete bytes, which
equal :func:`~durable_core.records.jsonio.record_to_json` byte for byte (R-REC-4, R-STORE-3).
"""

from __future__ import annotations

import json
import typing
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from durable_core._words import a
from durable_core.errors import DurableError
from durable_core.records import model as r
from durable_core.records.delta import GONE, Partial
from durable_core.records.fastpath import _FIELD_TEXT, _STR, _TEXT, _key_prefix, _Slow
from durable_core.records.fields import _CODECS, _SPECS, _Field, _Writer
from durable_core.records.jsonio import check_shape, record_to_json

__all__ = ["RecordEncoder"]


def _canonical_dumps() -> Callable[[Any], str]:
    """``json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode``,
    without building a new C encoder on every call (the saves encode many small parts)."""
    plain = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has the C encoder
        return plain.encode
    # No circular check (markers None): the writers build trees, never cycles.
    tree = make(None, plain.default, _STR, None, ":", ",", True, False, True)

    def dumps(value: Any) -> str:
        kind = type(value)
        if kind is str:
            return _STR(value)
        if kind is int:
            return int.__repr__(value)
        return "".join(tree(value, 0))

    return dumps


_DUMPS = _canonical_dumps()


def _record_map_fields(cls: type) -> dict[str, type]:
    """The fields of ``cls`` holding ``dict[str, <record class>]``, by JSON key."""
    hints = typing.get_type_hints(cls)
    result: dict[str, type] = {}
    for field in _SPECS[cls].fields:
        tp = hints[field.attr]
        if typing.get_origin(tp) is dict:
            value = typing.get_args(tp)[1]
            if isinstance(value, type) and value in _SPECS:
                result[field.key] = value
    return result


_MAP_FIELDS = {cls: _record_map_fields(cls) for cls in _SPECS}

_FIELDS_BY_ATTR = {cls: {f.attr: f for f in spec.fields} for cls, spec in _SPECS.items()}

_QUOTED = {cls: {f.attr: _STR(f.key) for f in spec.fields} for cls, spec in _SPECS.items()}
"""By class and attribute: the JSON text of the field's key (``"Revision"`` with its quotes)."""

_MAP_PLAN = {
    cls: {
        f.attr: (f.key, _STR(f.key) + ",", _MAP_FIELDS[cls][f.key])
        for f in spec.fields
        if f.key in _MAP_FIELDS[cls]
    }
    for cls, spec in _SPECS.items()
}
"""By class and attribute of a map field: its key, its key's JSON text followed by the comma
of a path, and the class of its entries (worked out once, not in every save)."""


def _field_text(cls: type, field: _Field, value: Any) -> str:
    """The canonical JSON text of ``value`` (not None) as ``field`` of a ``cls``.

    Raises:
        CorruptRecordError: the value cannot be written (see :func:`_entry_text`).
    """
    try:
        return _FIELD_TEXT[cls][field.attr](value)
    except _Slow:
        return _DUMPS(field.write(_Writer(False), value, None, field.key))


def _entry_text(cls: type, value: Any) -> str:
    """The canonical JSON text of the record object ``value`` of class ``cls``.

    Raises:
        CorruptRecordError: the object cannot be written (its path is not known here: the
            caller's :func:`check_shape` names it).
    """
    try:
        return _TEXT[cls](value)
    except _Slow:
        return _DUMPS(_CODECS[cls][1](_Writer(False), value, None, None))


_PENDING_PLAN = tuple(
    (field.attr, _STR(field.key) + ":", field)
    for field in sorted(_SPECS[r.StreamRecord].fields, key=lambda f: f.key)
)
"""A stream entry's fields in the order of its text: attribute, key's text with its colon, field."""


def _lazy_text(cls: type, value: Any, spliced: dict[str, dict[int, str]], key: str) -> str:
    """The canonical text of entry ``key``, ``value`` (a ``cls`` without maps, changed in part),
    its pending items joined from ``spliced[key]`` when that holds exactly their texts; the
    pending texts are remembered there for the next time.

    Only the ends and the length of the list are compared: every change of the list reaches
    the memo as a splice (:func:`_flat_change`), and one the memo cannot follow empties it.

    Raises:
        CorruptRecordError: as :func:`_entry_text`.
    """
    if cls is not r.StreamRecord:
        return _entry_text(cls, value)
    pending = value.pending
    items = spliced.get(key)
    if type(pending) is not list:
        return _entry_text(cls, value)
    if (
        items is None
        or len(items) != len(pending)
        or (
            pending
            and (
                next(iter(items)) != pending[0].sequence
                or next(reversed(items)) != pending[-1].sequence
            )
        )
    ):
        items = {}
        for message in pending:
            items[message.sequence] = _entry_text(r.PendingMessageRecord, message)
        if len(items) != len(pending):  # a sequence twice: no memo, the entry written whole
            spliced.pop(key, None)
            return _entry_text(cls, value)
        spliced[key] = items
    out = []
    for attr, prefix, field in _PENDING_PLAN:
        item = getattr(value, attr)
        if attr == "pending":
            out.append(prefix + "[" + ",".join(items.values()) + "]")
        elif not (item is None and field.omit_none):
            out.append(prefix + _field_text(cls, field, item))
    return "{" + ",".join(out) + "}"


class _Parts:
    """The encoded entries of one map: ``parts[key]`` is ``"key":{…}``; ``order`` the sorted
    keys, but for those ``added`` since the map's text was last made (sorted in then);
    ``subs`` the memos of entries that hold maps themselves (scopes), whose part is rebuilt on
    demand after they changed (``stale``)."""

    __slots__ = ("added", "lazy", "order", "parts", "spliced", "stale", "subs")

    def __init__(self) -> None:
        self.parts: dict[str, str] = {}
        self.order: list[str] = []
        self.added: list[str] = []
        """Keys put since ``order`` was last sorted: a save adds its new entries here, and
        only the complete bytes (rarely asked for) need them in order."""
        self.subs: dict[str, _Object] = {}
        self.stale: set[str] = set()
        self.lazy: dict[str, tuple[type, Any]] = {}
        """Entries without maps changed in part (a stream entry): ``(class, value)``, whose
        text is encoded when the complete bytes are asked for, not with every save."""
        self.spliced: dict[str, dict[int, str]] = {}
        """By key of an entry changed in part: the text of each item of its pending list, by
        sequence, in order, as last written whole and then followed through every splice
        (whose appended items' texts the delta wrote already). The entry's complete text
        joins them instead of encoding every pending element again (see :func:`_lazy_text`)."""

    def put(self, key: str, quoted: str, cls: type, value: Any) -> str:
        """Encode entry ``key`` (``quoted``: its JSON string) anew; returns its value's text."""
        if _MAP_FIELDS[cls]:
            sub = self.subs[key] = _Object.build(cls, value)
            text = sub.text()
        else:
            text = _entry_text(cls, value)
        parts = self.parts
        if key not in parts:
            self.added.append(key)
        parts[key] = quoted + ":" + text
        if self.stale:
            self.stale.discard(key)
        if self.lazy:
            self.lazy.pop(key, None)
        if self.spliced:
            self.spliced.pop(key, None)
        return text

    def _sort(self) -> None:
        """Sort the keys added since the last time into ``order``."""
        if self.added:
            order = self.order
            order += self.added
            order.sort()  # a sorted run and a short tail: about one pass over the keys
            self.added.clear()

    def remove(self, key: str) -> None:
        self._sort()
        del self.parts[key]
        del self.order[bisect_left(self.order, key)]
        self.subs.pop(key, None)
        self.stale.discard(key)
        self.lazy.pop(key, None)
        self.spliced.pop(key, None)

    def text(self) -> str:
        out: list[str] = []
        self.write(out)
        return "".join(out)

    def write(self, out: list[str]) -> None:
        """Append the map's text to ``out`` in pieces, joined once by the caller: a record's
        text is large, and every concatenation would copy all of it again. The entries that
        changed inside (``stale``: a scope, changed by nearly every save) are written from
        their memos and not kept, since the next save changes them again."""
        parts = self.parts
        if self.lazy:
            spliced = self.spliced
            for key, (cls, value) in self.lazy.items():
                parts[key] = _key_prefix(key) + _lazy_text(cls, value, spliced, key)
            self.lazy.clear()
        self._sort()
        order = self.order
        out.append("{")
        start = 0
        if self.stale:
            for index in sorted(bisect_left(order, key) for key in self.stale):
                if index > start:  # the entries before it, unchanged: joined in C
                    out.append(",".join(map(parts.__getitem__, order[start:index])))
                    out.append(",")
                key = order[index]
                out.append(_key_prefix(key))
                self.subs[key].write(out)
                out.append(",")
                start = index + 1
            if start == len(order):
                out.pop()  # the comma after the last entry
        if start < len(order):
            out.append(",".join(map(parts.__getitem__, order[start:] if start else order)))
        out.append("}")

    @classmethod
    def build(cls, entry_cls: type, mapping: Any) -> _Parts:
        if type(mapping) is not dict:
            raise TypeError("expected a dict")
        parts = cls()
        for key, value in mapping.items():
            if type(key) is not str:
                raise TypeError("expected str map keys")
            if _MAP_FIELDS[entry_cls]:
                sub = parts.subs[key] = _Object.build(entry_cls, value)
                text = sub.text()
            else:
                text = _entry_text(entry_cls, value)
            parts.parts[key] = _key_prefix(key) + text
        parts.order = sorted(parts.parts)
        return parts


class _Object:
    """The encoded fields of one record object that holds maps (the run record, a scope)."""

    __slots__ = ("fields", "maps")

    def __init__(self) -> None:
        self.fields: dict[str, str] = {}
        self.maps: dict[str, _Parts] = {}

    @classmethod
    def build(cls, record_cls: type, value: Any) -> _Object:
        if not isinstance(value, record_cls):
            raise TypeError(f"expected {a(record_cls.__name__)}")
        memo = cls()
        maps = _MAP_FIELDS[record_cls]
        for field in _SPECS[record_cls].fields:
            item = getattr(value, field.attr)
            entry_cls = maps.get(field.key)
            if entry_cls is not None:
                memo.maps[field.key] = _Parts.build(entry_cls, item)
            elif not (item is None and field.omit_none):
                text = _field_text(record_cls, field, item)
                memo.fields[field.key] = _key_prefix(field.key) + text
        return memo

    def text(self) -> str:
        out: list[str] = []
        self.write(out)
        return "".join(out)

    def write(self, out: list[str]) -> None:
        """Append the object's text to ``out`` in pieces (see :meth:`_Parts.write`)."""
        fields, maps = self.fields, self.maps
        out.append("{")
        for key in sorted((*fields, *maps)):
            text = fields.get(key)
            if text is not None:
                out.append(text)
            else:
                out.append(_key_prefix(key))
                maps[key].write(out)
            out.append(",")
        if fields or maps:
            out[-1] = "}"  # in place of the comma after the last field
        else:
            out.append("}")


def _delta_text(
    base: int, revision: int, sets: list[str], unsets: list[str], splices: list[str]
) -> bytes:
    """A delta's canonical bytes from the texts of its entries (keys in sorted order; the
    ``Splice`` key only when there is one)."""
    spliced = f',"Splice":[{",".join(splices)}]' if splices else ""
    return (
        f'{{"Base":{int.__repr__(base)},"Revision":{int.__repr__(revision)},'
        f'"Set":[{",".join(sets)}]{spliced},"Unset":[{",".join(unsets)}]}}'
    ).encode()


def _field_sets(cls: type, value: Any, change: Any, path: str) -> list[str] | None:
    """The ``Set`` texts of the changed fields (not maps) of ``value``, a ``cls``; ``path`` as
    in :meth:`RecordEncoder._apply`. ``None`` when a field dropped that is omitted when None
    (whether the stored record holds it is not known without its text)."""
    fields = _FIELDS_BY_ATTR[cls]
    texts = []
    for attr in change.fields:
        field = fields[attr]
        item = getattr(value, attr)
        if item is None and field.omit_none:
            return None
        texts.append(f"[{path}{_STR(field.key)}],{_field_text(cls, field, item)}]")
    return texts


def _flat_change(
    cls: type,
    value: Any,
    change: Any,
    path: str,
    sets: list[str],
    splices: list[str],
    items: dict[int, str] | None = None,
) -> bool:
    """Add the ``Set`` entries and ``Splice`` texts of ``change`` of ``value``, a record object
    without maps (a stream entry) changed in part; ``path`` as in :meth:`RecordEncoder._apply`.
    ``items``, when given, holds the texts of the entry's pending items by sequence
    (``_Parts.spliced``): the splices are applied to it, and it is emptied when one does not
    fit it. Returns False, having added nothing, when a field dropped that is omitted when
    None (the entry is then written whole)."""
    texts = _field_sets(cls, value, change, path)
    if texts is None:
        return False
    fields = _FIELDS_BY_ATTR[cls]
    item_cls = r.PendingMessageRecord
    for attr, splice in change.splices.items():
        dropped = ",".join(map(int.__repr__, splice.dropped))
        added = [_entry_text(item_cls, m) for m in splice.appended]
        splices.append(f"[{path}{_STR(fields[attr].key)}],[{dropped}],[{','.join(added)}]]")
        if items is not None and attr == "pending":
            for sequence in splice.dropped:
                if items.pop(sequence, None) is None:
                    items.clear()  # it held another list: rebuilt when next written whole
                    break
            else:
                for message, text in zip(splice.appended, added, strict=True):
                    items[message.sequence] = text
    sets.extend(texts)
    return True


class RecordEncoder:
    """Encodes successive versions of one run's record from what changed between them.

    :meth:`encode` encodes a whole record and remembers the text of each of its parts (every
    scope, node, attempt, stream, message and managed record) by its place in the record.
    :meth:`encode_change` is then told exactly what changed (a
    :class:`~durable_core.durable.proposal.ObjectChange`): it encodes only those parts with the
    same exact writers as :func:`record_to_json` and returns the save's
    :mod:`~durable_core.records.delta` delta, plus the complete bytes on demand. Nothing is
    remembered by object identity: what is re-encoded is what the change names.

    The complete bytes are identical to ``record_to_json(record)``.
    """

    def __init__(self) -> None:
        self._root: _Object | None = None
        self._generation = 0

    def encode(self, record: r.RunRecord) -> bytes:
        """The canonical JSON bytes of ``record`` (as :func:`record_to_json`); its parts are
        remembered for :meth:`encode_change`.

        Raises:
            CorruptRecordError: as :func:`record_to_json`, naming the path.
        """
        self._generation += 1
        try:
            self._root = _Object.build(r.RunRecord, record)
            return self._root.text().encode("utf-8")
        except Exception:
            self._root = None
            return record_to_json(record)  # raises, naming the path

    def encode_change(
        self, record: r.RunRecord, change: Any, base: int
    ) -> tuple[bytes | None, Callable[[], bytes]]:
        """The delta of one save, and a function returning the complete bytes.

        An encoder that has not seen the record before (the first save after a resume,
        whose record was decoded from the store) writes the delta from the change alone: the
        change names every part that differs from the record it was loaded as. It remembers
        nothing then, so its complete bytes are encoded whole when they are asked for. The
        delta is ``None`` (a whole save) only when such an encoder is told of a field
        dropped that the record may not have held.

        Args:
            record: the record after the change (``record.revision`` is the new revision).
            change: what changed since the record last given to :meth:`encode` or
                :meth:`encode_change`, or since the record was loaded.
            base: the revision before the change.

        Returns:
            ``(delta, data)``: the delta's canonical bytes, and a function returning
            ``record_to_json(record)``'s bytes; it may only be called before the next call of
            this encoder (afterwards it raises ``DurableError``).

        Raises:
            CorruptRecordError: a changed part cannot be written (naming the path).
        """
        self._generation += 1
        generation = self._generation
        sets: list[str] = []
        unsets: list[str] = []
        splices: list[str] = []
        if self._root is None:
            # The first save after a resume: nothing remembered, but the change names every
            # part that differs from the stored record, so the delta is those parts' text
            # alone. The complete bytes, when a store asks for them, are encoded whole then.
            try:
                known = _unremembered(r.RunRecord, record, change, "[", sets, unsets, splices)
            except Exception:
                check_shape(record)  # raises, naming the path
                raise
            if not known:  # a field dropped that may not have been stored: a whole save
                self.encode(record)
                self._generation = generation
                return None, self._data(generation, record)
            delta = _delta_text(base, record.revision, sets, unsets, splices)
            return delta, self._whole(generation, record)
        try:
            self._apply(r.RunRecord, self._root, record, change, "[", sets, unsets, splices)
            delta = _delta_text(base, record.revision, sets, unsets, splices)
        except Exception:
            self._root = None
            check_shape(record)  # raises, naming the path
            raise
        return delta, self._data(generation, record)

    def _whole(self, generation: int, record: r.RunRecord) -> Callable[[], bytes]:
        """The complete bytes of ``record`` encoded on demand, while no other change has been
        encoded since ``generation`` (nothing is remembered of them)."""

        def data() -> bytes:
            if generation == self._generation:
                text = _Object.build(r.RunRecord, record).text()
                # Checked again: a change encoded meanwhile (another thread) may have been
                # half applied to what was just read.
                if generation == self._generation:
                    return text.encode("utf-8")
            raise DurableError(
                f"the complete bytes of revision {record.revision} are no longer available: "
                "the encoder has encoded another change since; read EncodedRecord.data before "
                "the next save"
            )

        return data

    def _data(self, generation: int, record: r.RunRecord) -> Callable[[], bytes]:
        def data() -> bytes:
            root = self._root
            if generation == self._generation and root is not None:
                text = root.text()
                # Checked again: a change encoded meanwhile (another thread) may have been
                # half applied to what was just read.
                if generation == self._generation:
                    return text.encode("utf-8")
            raise DurableError(
                f"the complete bytes of revision {record.revision} are no longer available: "
                "the encoder has encoded another change since; read EncodedRecord.data before "
                "the next save"
            )

        return data

    def _apply(
        self,
        cls: type,
        memo: _Object,
        value: Any,
        change: Any,
        path: str,
        sets: list[str],
        unsets: list[str],
        splices: list[str],
    ) -> None:
        """Encode ``change`` of ``value`` (of class ``cls``, remembered in ``memo``) into
        ``memo``, adding each ``Set`` entry's, each ``Unset`` path's and each ``Splice``'s text
        to ``sets``, ``unsets`` and ``splices``; ``path`` is the JSON text of the object's path
        without its closing bracket (``[`` for the record, ``["Scopes","<id>",`` for a
        scope)."""
        fields = _FIELDS_BY_ATTR[cls]
        quoted_keys = _QUOTED[cls]
        for attr in change.fields:
            field = fields[attr]
            item = getattr(value, attr)
            quoted = quoted_keys[attr]
            if item is None and field.omit_none:
                if memo.fields.pop(field.key, None) is not None:
                    unsets.append(f"{path}{quoted}]")
                continue
            text = _field_text(cls, field, item)
            memo.fields[field.key] = quoted + ":" + text
            sets.append(f"[{path}{quoted}],{text}]")
        if change.whole:
            maps = _MAP_FIELDS[cls]
            for attr in change.whole:
                field = fields[attr]
                parts = memo.maps[field.key] = _Parts.build(maps[field.key], getattr(value, attr))
                sets.append(f"[{path}{_STR(field.key)}],{parts.text()}]")
        plan = _MAP_PLAN[cls]
        for attr, entries in change.maps.items():
            map_key, quoted_key, entry_cls = plan[attr]
            parts = memo.maps[map_key]
            within = path + quoted_key
            for key, entry in entries.items():
                if type(key) is not str:
                    raise TypeError("expected str map keys")
                quoted = _STR(key)
                if entry is GONE:
                    parts.remove(key)
                    unsets.append(f"{within}{quoted}]")
                elif type(entry) is Partial and key in parts.subs:
                    self._apply(
                        entry_cls,
                        parts.subs[key],
                        entry.value,
                        entry.change,
                        f"{within}{quoted},",
                        sets,
                        unsets,
                        splices,
                    )
                    parts.stale.add(key)
                elif (
                    type(entry) is Partial
                    and key in parts.parts
                    and _flat_change(
                        entry_cls,
                        entry.value,
                        entry.change,
                        f"{within}{quoted},",
                        sets,
                        splices,
                        parts.spliced.get(key),
                    )
                ):
                    parts.lazy[key] = (entry_cls, entry.value)
                else:
                    if type(entry) is Partial:
                        entry = entry.value
                    text = parts.put(key, quoted, entry_cls, entry)
                    sets.append(f"[{within}{quoted}],{text}]")


def _unremembered(
    cls: type,
    value: Any,
    change: Any,
    path: str,
    sets: list[str],
    unsets: list[str],
    splices: list[str],
) -> bool:
    """Add the ``Set`` entries and ``Unset`` paths of ``change`` of ``value`` (a ``cls``) to
    ``sets`` and ``unsets`` without any remembered text, as :meth:`RecordEncoder._apply` does
    with it; ``path`` as there. Returns False, having added only part of them, when the change
    drops an omitted-when-None field: whether the stored record holds it is not known here."""
    texts = _field_sets(cls, value, change, path)
    if texts is None:
        return False
    sets.extend(texts)
    fields = _FIELDS_BY_ATTR[cls]
    maps = _MAP_FIELDS[cls]
    for attr in change.whole:
        field = fields[attr]
        text = _Parts.build(maps[field.key], getattr(value, attr)).text()
        sets.append(f"[{path}{_STR(field.key)}],{text}]")
    for attr, entries in change.maps.items():
        field = fields[attr]
        entry_cls = maps[field.key]
        within = path + _STR(field.key) + ","
        holds_maps = bool(_MAP_FIELDS[entry_cls])
        for key, entry in entries.items():
            if type(key) is not str:
                raise TypeError("expected str map keys")
            quoted = _STR(key)
            if entry is GONE:
                unsets.append(f"{within}{quoted}]")
            elif type(entry) is Partial and holds_maps:
                if not _unremembered(
                    entry_cls,
                    entry.value,
                    entry.change,
                    f"{within}{quoted},",
                    sets,
                    unsets,
                    splices,
                ):
                    return False
            elif type(entry) is Partial:
                if not _flat_change(
                    entry_cls, entry.value, entry.change, f"{within}{quoted},", sets, splices
                ):
                    sets.append(f"[{within}{quoted}],{_entry_text(entry_cls, entry.value)}]")
            else:
                if holds_maps:
                    text = _Object.build(entry_cls, entry).text()
                else:
                    text = _entry_text(entry_cls, entry)
                sets.append(f"[{within}{quoted}],{text}]")
    return True
