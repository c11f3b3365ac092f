"""Recovery events of a durable run (delivered to runtime observers and the
``durable_recovery_event`` hook).

Each event describes something that has just been made durable (or restored from the record):
observers never see an event for a change whose save failed. Events are delivered on the event
loop's thread, in the order of the saves they describe; several events may share one revision
(their changes were saved together: group commit).
"""

from __future__ import annotations

import enum

import attrs

from durable_core.durable.definition_diff import DefinitionFingerprints

__all__ = ["EventKind", "InputFingerprints", "RecoveryEvent"]


class EventKind(enum.StrEnum):
    """What happened."""

    RUN_STARTED = "run_started"
    """``run`` wrote the first record (revision 1)."""
    RUN_RESUMED = "run_resumed"
    """``resume`` loaded and validated the record; nodes are about to run."""
    NODE_RESTORED = "node_restored"
    """A confirmed node was restored from the record; its body does not run."""
    ATTEMPT_ADOPTED = "attempt_adopted"
    """An active attempt from an earlier process is taken over (same attempt id)."""
    ATTEMPT_STARTED = "attempt_started"
    """A new attempt (root or Retry try) was recorded active before its body starts."""
    NODE_RUNNING = "node_running"
    """The node's body started (a Sub node: its child graph), its inputs having arrived: the
    time since its root attempt started (or was adopted) was spent waiting. Once per node per
    process, at its first try; not saved (the record does not change), ``revision`` is the
    committed one."""
    ATTEMPT_FAILED = "attempt_failed"
    """An attempt was recorded failed."""
    MESSAGE_FAILED = "message_failed"
    """A processor's try of one message was recorded failed (``sequence`` names the message;
    the try is ``attempt_index`` of ``attempt_limit``, the next try follows while the budget
    lasts)."""
    NODE_CONFIRMED = "node_confirmed"
    """A node's root attempt and complete NodeRecord were saved together."""
    RUN_FINISHED = "run_finished"
    """The run ended (``status`` says how)."""


@attrs.frozen
class InputFingerprints:
    """The fingerprints of a run's root inputs: the whole one (the record's ``Inputs``) and
    one per input key (kept in the run's history only, so that a refused ``resume`` can name
    the input that changed).

    Attributes:
        fingerprint: the record's ``Inputs`` fingerprint.
        keys: each root input's own fingerprint (its name, codec id, version and digest), by
            key name.
    """

    fingerprint: str
    keys: dict[str, str]


STOPPED = "stopped"
"""``RUN_FINISHED``'s status when the durable layer stopped the run (a failed save, a value no
codec encodes): not a node's failure; the record stays resumable."""


@attrs.frozen
class RecoveryEvent:
    """One recovery event.

    Attributes:
        kind: what happened.
        run_id: the run.
        scope_path: static mount position of the scope ("" for the root graph, "report" for a
            node inside the Sub ``report``).
        node_id: the node, or "" for run-level events.
        attempt_index: 1-based index of the attempt (0 when not about an attempt).
        attempt_limit: the attempt's budget (0 when not about an attempt).
        revision: the record revision after the save that the event describes (for
            ``NODE_RESTORED``, ``ATTEMPT_ADOPTED`` and ``RUN_FINISHED``: the committed revision
            at that moment).
        status: for ``RUN_FINISHED``: "completed", "failed" (a node failed for good),
            "canceled", or "stopped" (the durable layer stopped the run before it ended: a
            save failed, or a value could not be encoded; the record stays resumable); else
            "".
        total_nodes: for ``RUN_STARTED``/``RUN_RESUMED``: number of nodes in the root graph
            and all Sub graphs; else 0.
        attempt_id: the attempt's id in the record ("" when not about an attempt).
        error: for ``ATTEMPT_FAILED``, ``MESSAGE_FAILED`` and a failed or stopped
            ``RUN_FINISHED``: the error's type and
            message (never stored in the record, R-REC-2); else "".
        scope_id: the id of the scope the node runs in ("" for run-level events): the
            record's ``RootScope`` for the root graph, a child scope's id (the Sub node's
            attempt id, R-SCOPE-2) inside a Sub. Two child runs of a Sub node retried by a
            ``Retry`` have the same ``scope_path`` and different ``scope_id``.
        sequence: for ``MESSAGE_FAILED``: the message's sequence number in the processor's
            input stream; else 0.
        where: for ``ATTEMPT_FAILED`` and ``MESSAGE_FAILED``: the file, line and function
            where the try failed (``"jobs/etl.py:42 in load"``, see
            :class:`~durable_core.durable.failures.Failure`); else "". Never stored in the
            record.
        traceback: for ``ATTEMPT_FAILED`` and ``MESSAGE_FAILED``: the try's formatted
            traceback, bounded in size; else "". Never stored in the record.
        definition: for ``RUN_STARTED``/``RUN_RESUMED``: the graph's
            :class:`~durable_core.durable.definition_diff.DefinitionFingerprints` (the whole
            fingerprint, and its parts' computed when asked for); else None. Not compared.
        inputs: for ``RUN_STARTED``/``RUN_RESUMED``: the root inputs'
            :class:`InputFingerprints`; else None. Not compared.
        boundary: for an event about a Retry try: the Retry's boundary in the record
            (``"node:0"``); "" for a node's root attempt and for other events.
    """

    kind: EventKind
    run_id: str
    scope_path: str = ""
    node_id: str = ""
    attempt_index: int = 0
    attempt_limit: int = 0
    revision: int = 0
    status: str = ""
    total_nodes: int = 0
    attempt_id: str = ""
    error: str = ""
    scope_id: str = ""
    definition: DefinitionFingerprints | None = attrs.field(default=None, eq=False, repr=False)
    where: str = ""
    traceback: str = attrs.field(default="", eq=False, repr=False)
    sequence: int = 0
    boundary: str = ""
    inputs: InputFingerprints | None = attrs.field(default=None, eq=False, repr=False)
