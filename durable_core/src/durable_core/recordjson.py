"""Moved to :mod:`durable_core.records` (``fields``, ``jsonio``, ``encoder``); this path
re-exports its public names for one release."""

from durable_core.records.encoder import RecordEncoder
from durable_core.records.fields import INT_MAX, UINT64_MAX, json_name
from durable_core.records.jsonio import (
    check_shape,
    record_from_fold,
    record_from_json,
    record_to_json,
)
from durable_core.records.model import copy_record

__all__ = [
    "INT_MAX",
    "UINT64_MAX",
    "RecordEncoder",
    "check_shape",
    "copy_record",
    "json_name",
    "record_from_fold",
    "record_from_json",
    "record_to_json",
]
