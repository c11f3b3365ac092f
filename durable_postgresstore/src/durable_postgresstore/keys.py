"""Advisory-lock keys: a stable signed 64-bit number per run id (B-PG-1).

PostgreSQL advisory locks are keyed by one ``bigint``. A run's key is the first 8 bytes of
``SHA-256("pulse_durable/run\\0" + UTF-8 run id)`` read as a big-endian signed integer. Every
process and host computes the same key for the same run id, whatever its Python version.

Two different run ids can share a key (probability about n²/2⁶⁵ for n runs held at once). A
collision can only make ``acquire`` of the second run raise a false ``BusyError`` while the
first is held; it can never give two sessions the same run, because ownership of a run id
always needs its key's lock. Other applications using bigint advisory locks in the same
database share this key space too; the prefix makes a clash with theirs as unlikely as any
other collision.

To find the owner of a run (E-1)::

    SELECT pid, application_name, client_addr, backend_start
    FROM pg_locks JOIN pg_stat_activity USING (pid)
    WHERE locktype = 'advisory' AND objsubid = 1
      AND ((classid::bigint << 32) | objid::bigint) = <advisory_key(run_id)>
"""

from __future__ import annotations

import hashlib

__all__ = ["SCHEMA_INIT_KEY", "advisory_key", "history_key"]

_RUN_PREFIX = b"pulse_durable/run\x00"


def _key(data: bytes) -> int:
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big", signed=True)


def advisory_key(run_id: str) -> int:
    """The advisory-lock key of ``run_id``: a signed 64-bit integer (B-PG-1).

    Args:
        run_id: the run id (encoded as UTF-8; a lone surrogate is kept as its code unit so that
            every string has a key).

    Returns:
        An integer in ``-2**63 … 2**63 - 1``.
    """
    return _key(_RUN_PREFIX + run_id.encode("utf-8", "surrogatepass"))


def history_key(run_id: str) -> int:
    """The transaction-level advisory-lock key under which entries are appended to a run's
    history (so that two appenders number them one after the other). Never the run's own key:
    the run's owner holds that one for its whole session."""
    return _key(b"pulse_durable/history\x00" + run_id.encode("utf-8", "surrogatepass"))


SCHEMA_INIT_KEY = _key(b"pulse_durable/schema-init")
"""Transaction-level advisory lock serializing schema creation across processes."""
