"""The rules every store with the run-history capability shares: what an append may hold, and
how a history file's complete lines are read back (a torn last line left out)."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["check_entries", "complete_lines"]


def check_entries(root_scope: str, entries: Sequence[str]) -> None:
    """The checks every :class:`~durable_core.store.capabilities.RunHistory` makes before appending.

    Raises:
        ValueError: ``root_scope`` is empty or holds a tab or a line break, or an entry is not
            a str or holds a line break.
    """
    if not isinstance(root_scope, str) or not root_scope or re.search(r"[\t\r\n]", root_scope):
        raise ValueError(f"a history's root scope must be a non-empty line, got {root_scope!r}")
    for entry in entries:
        if not isinstance(entry, str) or "\n" in entry or "\r" in entry:
            raise ValueError(f"a history entry must be one line of text, got {entry!r:.80}")


def complete_lines(data: bytes, prefix: bytes = b"") -> list[str]:
    """The whole lines of ``data`` (a torn last line is left out), each without its line break
    and without ``prefix`` (lines that do not start with ``prefix`` are left out)."""
    out = []
    for raw in data[: data.rfind(b"\n") + 1].splitlines():
        if prefix:
            if not raw.startswith(prefix):
                continue
            raw = raw[len(prefix) :]
        out.append(raw.decode("utf-8", "replace"))
    return out
