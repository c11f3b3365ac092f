"""The one delta-fold policy of Durable's stores: when a save keeps its delta, when it folds.

A store that keeps deltas (file, SQLite, PostgreSQL; SPEC R-STORE-3) saves a change as its delta
while the deltas kept since the last complete record stay small beside that record, and writes
the complete record (dropping the deltas) once they would pass :data:`FOLD_RATIO` of its size,
or whenever it does not know what is stored. The kit's
:meth:`~durable_core.store.kit.FoldingSession._delta_to_keep` applies this policy for every
backend; closing a session that wrote folds what is left
(:meth:`~durable_core.store.kit.FoldingSession._fold_on_close`).
"""

from __future__ import annotations

__all__ = ["FOLD_RATIO", "fold_due"]

FOLD_RATIO = 1.0
"""The deltas kept after a complete record may add up to this share of its size (bytes/bytes)."""


def fold_due(kept: int, record: int, delta: int, ratio: float = FOLD_RATIO) -> bool:
    """Whether a save should write the complete record instead of keeping its delta.

    Args:
        kept: bytes of the deltas already kept after the complete record (with any per-entry
            framing the medium adds).
        record: bytes of that complete record.
        delta: bytes this save's delta would add (with its framing).
        ratio: the share of ``record`` the deltas may reach (:data:`FOLD_RATIO`).

    Returns:
        True when ``kept + delta`` would pass ``ratio * record``.
    """
    return kept + delta > ratio * record
