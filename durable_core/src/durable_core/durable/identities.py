"""Fresh identities for the record's scopes and attempts (R-REC-3): :func:`new_id`.

An identity is 16 random bytes from ``os.urandom`` (the source ``secrets.token_hex`` reads) as
32 lowercase hex characters. Reading the kernel's random source is a system call, which costs
more than everything else a new attempt takes; the bytes are therefore read for
:data:`_BATCH` identities at once and handed out one by one. Each identity is handed out once:
taking one is a single ``list.pop``, which no other thread can interleave with, and a forked
child drops what its parent had read (it would otherwise hand out the same identities).
"""

from __future__ import annotations

import os
import threading

__all__ = ["new_id"]

_BATCH = 64
"""Identities read from ``os.urandom`` at once."""

_ready: list[str] = []
_refill_lock = threading.Lock()
_urandom = os.urandom


def new_id() -> str:
    """A fresh identity: 16 random bytes as 32 lowercase hex characters (R-REC-3)."""
    try:
        return _ready.pop()
    except IndexError:
        return _refill()


def _refill() -> str:
    with _refill_lock:
        if not _ready:
            text = _urandom(16 * _BATCH).hex()
            _ready.extend(text[i : i + 32] for i in range(0, 32 * _BATCH, 32))
    try:
        return _ready.pop()
    except IndexError:  # taken meanwhile by other threads: read again
        return _refill()


def _forget() -> None:
    """In a forked child: the parent's unread identities are the parent's."""
    global _refill_lock
    _ready.clear()
    _refill_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
