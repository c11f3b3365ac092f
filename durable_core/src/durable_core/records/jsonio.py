"""A run record <-> canonical UTF-8 JSON bytes: the public read and write (R-REC-4).

:func:`record_to_json` writes, :func:`record_from_json` reads strictly, :func:`check_shape`
checks that a record can be written. The layout and what reading refuses are described in
:mod:`durable_core.records.fields`. Reading a record and checking its shape each take a quick
path (:mod:`durable_core.records.fastpath`) generated from the same field table, which accepts
only what the exact path accepts and hands anything else to it (the exact path names the
problem).

See ``docs/data-model.md`` for the full layout and the decisions.
"""

from __future__ import annotations

import json
import re
import weakref

import orjson

from durable_core._nogc import nogc
from durable_core.errors import CorruptRecordError
from durable_core.records import model as r
from durable_core.records.delta import Folded
from durable_core.records.fastpath import _QUICK_READ, _QUICK_RUN, _SHAPE_OK, _Slow
from durable_core.records.fields import (
    _READ_ADVICE,
    _READ_RUN,
    _SURROGATE_ESCAPE,
    _WRITE_RUN,
    _NonFinite,
    _object_pairs,
    _read_format,
    _Reader,
    _Writer,
)
from durable_core.records.path import corrupt

__all__ = ["check_shape", "record_from_fold", "record_from_json", "record_to_json"]

_AS_READ: weakref.WeakValueDictionary[int, r.RunRecord] = weakref.WeakValueDictionary()
"""The records the quick reader returned, by ``id`` (an entry goes when its record does)."""


def _as_read(record: r.RunRecord) -> r.RunRecord:
    _AS_READ[id(record)] = record
    return record


def is_as_read(record: r.RunRecord) -> bool:
    """Whether ``record`` is an object :func:`record_from_json` or :func:`record_from_fold`
    built on the quick path.

    Such a record passes :func:`check_shape` for sure as long as nobody changed it: the quick
    reader is generated from the same field table as the shape check and takes exactly what it
    accepts (exact types, integers in range, strings from UTF-8 text without escapes, so
    without lone surrogates). Whether it was changed since is the caller's knowledge: a store's
    ``load`` returns a fresh record that only its caller holds.
    """
    return _AS_READ.get(id(record)) is record


def record_to_json(record: r.RunRecord) -> bytes:
    """Encode ``record`` as canonical UTF-8 JSON bytes (R-REC-4).

    Keys are the seed's field names, maps and objects are written with sorted keys and no
    whitespace, ``bytes`` as standard base64; ``ValueRecord.Stream`` and ``ManagedRecord.State``
    are omitted when ``None``. Equal records give equal bytes.

    Args:
        record: the record to encode; it is not modified.

    Returns:
        The UTF-8 JSON bytes, which :func:`record_from_json` reads back into an equal record.

    Raises:
        CorruptRecordError: the record cannot be written as a valid record: a metadata string or
            map key holds a lone surrogate (R-REC-4, B-FILE-5), a field has the wrong Python type,
            an integer is negative or too large, ``format`` is not 1 to ``RECORD_FORMAT``
            (R-REC-1), or ``revision`` is not in 1…2**64-1 (R-REC-2).
            The message names the path (``$.Scopes["…"].Graph``); nothing is written.
    """
    tree = _WRITE_RUN(_Writer(surrogates=False), record, None, None)
    text = json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        _WRITE_RUN(_Writer(surrogates=True), record, None, None)  # raises, naming the path
        raise CorruptRecordError(  # pragma: no cover - the exact pass always finds it
            "run record holds a string that is not valid Unicode; nothing was written",
            rule="R-REC-4",
        ) from None


@nogc
def record_from_json(data: bytes | bytearray | memoryview) -> r.RunRecord:
    """Decode a run record from JSON bytes, strictly (R-REC-4, B-FILE-5).

    Only the shape is checked here (JSON, types, names, ranges, Unicode); the data model's
    structural rules are :func:`durable_core.validate_record`'s job.

    Args:
        data: the stored bytes (UTF-8 JSON).

    Returns:
        The decoded record (enum fields as enum members).

    Raises:
        CorruptRecordError: the bytes are not a run record. ``.path`` names the JSON path of the
            first problem (``$.Scopes["…"].Nodes["split"].Outputs[0].Digest``; ``$`` for
            unparsable text) and ``.rule`` the rule: ``R-REC-1`` for a ``Format`` other than 1 to
            :data:`~durable_core.records.RECORD_FORMAT` (checked first: a newer format may hold
            fields this runtime does not know), ``R-REC-2`` for a bad ``Revision``,
            ``R-REC-4`` for everything else.
    """
    raw_bytes = bytes(data)
    invalid_utf8: UnicodeDecodeError | None = None
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Keep going so that the path of the bad string can be named: surrogateescape turns each
        # invalid byte into a lone surrogate, which the string checks below report.
        invalid_utf8 = exc
        text = raw_bytes.decode("utf-8", "surrogateescape")
    surrogates = invalid_utf8 is not None or (
        "\\" in text and _SURROGATE_ESCAPE.search(text) is not None
    )
    if not surrogates:
        quick = _read_plain(text)
        if quick is not None:
            return _as_read(quick)
    try:
        tree = json.loads(text, object_pairs_hook=_object_pairs, parse_constant=_NonFinite)
    except RecursionError:
        raise corrupt(None, "R-REC-4", "the JSON is nested too deeply", _READ_ADVICE) from None
    except ValueError as exc:  # JSONDecodeError, or an integer literal of thousands of digits
        if invalid_utf8 is not None:
            problem = (
                f"the bytes are not valid UTF-8 (first invalid byte at offset {invalid_utf8.start})"
            )
        elif isinstance(exc, json.JSONDecodeError):
            problem = (
                f"the text is not one JSON value: {exc.msg} at line {exc.lineno} column "
                f"{exc.colno} (character {exc.pos})"
            )
        else:
            problem = f"the text is not valid JSON: {exc}"
        raise corrupt(None, "R-REC-4", problem, _READ_ADVICE) from None
    if isinstance(tree, dict) and "Format" in tree:
        # Before anything else: a newer format may hold fields this runtime does not know.
        _read_format(_Reader(False, None), tree["Format"], None, "Format")
    if not surrogates:
        try:
            return _as_read(_QUICK_READ(tree))  # the hook marked any duplicate key
        except _Slow:
            pass  # the exact reader below decides, and names the path of a problem
    record = _READ_RUN(_Reader(surrogates, invalid_utf8), tree, None, None)
    if invalid_utf8 is not None:  # pragma: no cover - every string and key is checked above
        raise corrupt(None, "R-REC-4", "the bytes are not valid UTF-8", _READ_ADVICE)
    return record


_SPACE_BEFORE_COLON = re.compile(r'" +:')


def _read_plain(text: str) -> r.RunRecord | None:
    """The record in ``text`` read on the quick path, or ``None`` when the exact path must read it.

    The quick path parses with orjson (no Python call per object; about 1.4 times as fast as
    ``json.loads`` on a large record) and proves
    afterwards that no object held a key twice: in text without a backslash every ``"`` opens or
    closes a string, so when no key is followed by whitespace before its colon, ``'":'`` occurs
    once per key (and once more for every string that begins with ``:``). Parsing without a
    hook keeps one entry per key, so the keys the quick reader counts in the parsed objects
    equal that count exactly when there was no duplicate (and no string began with ``:``).
    Anything else (a backslash, a tab or line break, a space before a colon, a count that
    differs, text the quick reader does not take) returns ``None``, and the exact path decides
    and names the problem. What orjson refuses and ``json.loads`` takes (``NaN``, ``1e400``)
    goes to the exact path, which refuses it; what orjson reads differently (an integer beyond
    64 bits becomes a float) the quick reader refuses, as no field of a record is a float.
    """
    if "\\" in text or "\n" in text or "\r" in text or "\t" in text:
        return None  # escapes, or whitespace that only a layout other than ours writes
    if '" ' in text and _SPACE_BEFORE_COLON.search(text) is not None:
        return None  # a space after a closing quote may stand before a colon
    try:
        tree = orjson.loads(text)
    except (ValueError, RecursionError):
        return None  # the exact path parses again and says what is wrong
    if isinstance(tree, dict) and "Format" in tree:
        # Before anything else: a newer format may hold fields this runtime does not know.
        _read_format(_Reader(False, None), tree["Format"], None, "Format")
    keys = [0]
    try:
        record = _QUICK_RUN(tree, keys)
    except _Slow:
        return None
    if keys[0] != text.count('":'):
        return None
    return record  # type: ignore[no-any-return]


@nogc
def record_from_fold(folded: Folded) -> r.RunRecord:
    """Decode the record a complete record and its deltas fold into (R-REC-4, R-STORE-3).

    The same record, and the same refusals, as :func:`record_from_json` of
    ``folded.data()``. The usual fold (no backslash in any of the bytes, so no string holds an
    escape and no lone surrogate) is read from the folded tree by the quick reader, without
    writing it as text and parsing it again; anything else is read exactly from the folded
    tree written as ASCII JSON (so that a lone surrogate is refused naming its path).

    Raises:
        CorruptRecordError: as :func:`record_from_json`, or the deltas do not fold
            (:meth:`~durable_core.records.delta.Folded.tree`).
    """
    if not folded.escaped():
        tree = folded.tree()  # every object checked for a key written twice as it was parsed
        if isinstance(tree, dict) and "Format" in tree:
            # Before anything else: a newer format may hold fields this runtime does not know.
            _read_format(_Reader(False, None), tree["Format"], None, "Format")
        try:
            return _as_read(_QUICK_READ(tree))
        except _Slow:
            pass  # the exact reader decides, and names the path of a problem
    # Escapes kept as escapes: the exact reader names a lone surrogate's path (the folded
    # record's UTF-8 bytes could not hold it); every other string reads back the same.
    text = json.dumps(folded.tree(), sort_keys=True, separators=(",", ":"))
    return record_from_json(text.encode("ascii"))


def check_shape(record: r.RunRecord) -> None:
    """Check that ``record`` can be written: Python types, integer ranges, valid Unicode.

    It accepts exactly what the writing pass of :func:`record_to_json` accepts; it is the
    first step of :func:`durable_core.validate_record`. A quick pass generated from the field
    table checks the usual record (exact types) without producing any text; when it finds
    anything else, the writing pass itself decides and names the path.

    Raises:
        CorruptRecordError: as :func:`record_to_json`, naming the path.
    """
    if not _SHAPE_OK(record):
        _WRITE_RUN(_Writer(surrogates=True), record, None, None)
