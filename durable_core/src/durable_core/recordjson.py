"""The record's JSON layout (R-REC-4): one private cattrs converter, record <-> UTF-8 bytes.

Keys are spelled exactly as the seed's field names (``Format``, ``RunID``, ``NodeID``, ``TypeID``
…); ``bytes`` fields are standard base64; output is deterministic (sorted keys, no whitespace),
so equal records give equal bytes.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from durable_core import records as r
from durable_core.errors import CorruptRecordError

__all__ = ["json_name", "record_from_json", "record_to_json"]

_RECORD_TYPES = (
    r.StreamDescriptorRecord,
    r.ValueRecord,
    r.NodeRecord,
    r.ScopeRecord,
    r.AttemptRecord,
    r.PendingMessageRecord,
    r.StreamRecord,
    r.MessageAttemptRecord,
    r.ManagedRecord,
    r.RunRecord,
)


def json_name(attribute: str) -> str:
    """The JSON key of a record attribute (``run_id`` -> ``RunID``)."""
    return "".join("ID" if part == "id" else part.capitalize() for part in attribute.split("_"))


def _b64decode(value: Any, _type: Any) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"expected a base64 string, found {type(value).__name__}")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError(f"invalid standard base64: {exc}") from None


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_unstructure_hook(bytes, lambda b: base64.b64encode(b).decode("ascii"))
    conv.register_structure_hook(bytes, _b64decode)
    for cls in _RECORD_TYPES:
        overrides = {
            a.name: override(rename=json_name(a.name), omit_if_default=(a.name == "stream"))
            for a in attrs.fields(cls)
        }
        conv.register_unstructure_hook(cls, make_dict_unstructure_fn(cls, conv, **overrides))
        conv.register_structure_hook(
            cls, make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=True, **overrides)
        )
    return conv


_CONVERTER = _make_converter()


def record_to_json(record: r.RunRecord) -> bytes:
    """Encode ``record`` as canonical UTF-8 JSON bytes.

    Raises:
        CorruptRecordError: a metadata string or map key is not valid Unicode (a lone surrogate),
            so it cannot be written as UTF-8 (B-FILE-5); nothing is written.
    """
    data = _CONVERTER.unstructure(record, r.RunRecord)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CorruptRecordError(
            f"record of run {record.run_id!r} holds a string that is not valid UTF-8 "
            f"(a lone surrogate at character {exc.start}); metadata strings and map keys must be "
            "valid Unicode (R-REC-4, B-FILE-5). Nothing was written."
        ) from None


def record_from_json(data: bytes) -> r.RunRecord:
    """Decode a record from JSON bytes.

    Raises:
        CorruptRecordError: the bytes are not valid UTF-8 JSON of a run record; the message says
            what is wrong.
    """
    try:
        text = bytes(data).decode("utf-8")
        raw = json.loads(text)
        return _CONVERTER.structure(raw, r.RunRecord)
    except (UnicodeDecodeError, ValueError, TypeError, cattrs.BaseValidationError) as exc:
        raise CorruptRecordError(f"stored record is not a valid run record: {exc}") from exc
