"""The record wing: Durable's persistent data model, its exact JSON layout, deltas and rules.

``durable_core.records`` itself names the record classes (:mod:`.model`); its modules are:

- :mod:`.model`: the attrs classes of the run record and :func:`copy_record`;
- :mod:`.path`: paths into a record and the error that names them;
- :mod:`.fields`: the field table of every record class and its exact readers and writers;
- :mod:`.fastpath`: the quick paths generated from the field table;
- :mod:`.jsonio`: a record <-> canonical JSON bytes (the public read and write);
- :mod:`.encoder`: :class:`~.encoder.RecordEncoder`, successive versions of one record;
- :mod:`.delta`: the change of one save against the stored record;
- :mod:`.integrity`: :func:`~.integrity.validate_record`, the structural rules.
- :mod:`.check`: :func:`~.check.check_record`, the checks on a loaded record that ``resume``,
  ``fork`` and the operator views share (its format and run id, then the structural rules).

The wing sits on the ground floor: it imports only :mod:`durable_core.errors` and the small
helpers beside it, never the store, the graph or the plugins.
"""

from __future__ import annotations

from durable_core.records.model import (
    RECORD_FORMAT,
    AttemptRecord,
    AttemptState,
    ManagedRecord,
    MessageAttemptRecord,
    NodeReason,
    NodeRecord,
    PendingMessageRecord,
    RunRecord,
    ScopeRecord,
    StreamDescriptorRecord,
    StreamRecord,
    StreamTerminal,
    ValueRecord,
    ValueState,
    copy_record,
)

__all__ = [
    "RECORD_FORMAT",
    "AttemptRecord",
    "AttemptState",
    "ManagedRecord",
    "MessageAttemptRecord",
    "NodeReason",
    "NodeRecord",
    "PendingMessageRecord",
    "RunRecord",
    "ScopeRecord",
    "StreamDescriptorRecord",
    "StreamRecord",
    "StreamTerminal",
    "ValueRecord",
    "ValueState",
    "copy_record",
]
