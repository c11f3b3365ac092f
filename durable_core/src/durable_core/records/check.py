"""The checks on a loaded record before anyone reads it: ``resume``'s first checks, for the
operator views (``inspect``, ``list``, ``show``, ``migrate``) and for ``fork``'s source record.

It sits in the record wing, beside the integrity rules it runs, so the durable layer and the
operator library both use it without importing each other.
"""

from __future__ import annotations

from typing import Any

from durable_core.errors import CorruptRecordError
from durable_core.records import RECORD_FORMAT, RunRecord
from durable_core.records.integrity import validate_record

__all__ = ["check_record", "definition_matches"]


def definition_matches(record: RunRecord, graph: Any) -> bool | None:
    """Whether the record was written by ``graph`` (same definition fingerprint); ``None``
    without a graph."""
    if graph is None:
        return None
    return bool(record.definition == graph.fingerprint())


def check_record(record: RunRecord, run_id: str, graph: Any = None) -> None:
    """The integrity checks ``resume`` makes on a loaded record, for a read-only view.

    The record format must be one this version reads (R-REC-1), the record must name the run
    it was loaded for, and :func:`~durable_core.records.integrity.validate_record` must pass: every
    structural rule and every stored value's digest (R-VAL-3). When ``graph`` wrote the record
    (same definition fingerprint), its nodes and outputs are checked against the graph too.
    Decoding values with codecs is left to ``resume``: a view never needs the run's codecs.

    Args:
        record: the record as loaded.
        run_id: the run id it was loaded for.
        graph: the configuration's graph, or ``None``.

    Raises:
        CorruptRecordError: the first problem, with its JSON path; the record is unchanged.
    """
    if not 1 <= record.format <= RECORD_FORMAT:
        raise CorruptRecordError(
            f"run {run_id!r} has record format {record.format}; this version of Durable reads "
            f"formats 1 to {RECORD_FORMAT}. Use the Durable version that wrote it",
            path="$.Format",
            rule="R-REC-1",
        )
    if record.run_id != run_id:
        raise CorruptRecordError(
            f"the record loaded for run {run_id!r} names run {record.run_id!r}; check the store",
            path="$.RunID",
            rule="R-STORE-3",
        )
    shapes = graph.provided_names() if definition_matches(record, graph) else None
    validate_record(record, definition=shapes)
