"""Who owns a run: the process, host and time a :class:`~durable_core.errors.BusyError` names
(E-1: "find the owner").

A store that can know its runs' owners records them where a rival acquirer can read them:

- the file and SQLite stores write :func:`owner_to_bytes` of the owning process into the run's
  lock file while they hold its OS lock (:mod:`durable_core.store.locks`);
- the PostgreSQL store puts :func:`owner_tag` into the owning connection's
  ``application_name``, which ``pg_stat_activity`` shows to every other session;
- the memory store's owner is always this process.

What a reader finds there is a hint, never a lock: it may be missing (an owner that has just
locked, an older Durable, a file system that hides it) and then the owner is unknown.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import socket
import time

import attrs

__all__ = [
    "RunOwner",
    "current_owner",
    "owner_from_bytes",
    "owner_from_tag",
    "owner_tag",
    "owner_to_bytes",
]

_TAG = re.compile(r"(?:^|\s)(\d+)@(\S+) (\d{1,12})$")
_TAG_LIMIT = 63  # PostgreSQL keeps at most NAMEDATALEN - 1 bytes of application_name


def _utc(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(int(seconds), tz=datetime.UTC)


@attrs.frozen
class RunOwner:
    """The session that owns a run, as far as the store can tell.

    Attributes:
        pid: the owning process's id on its host, or ``None`` when unknown.
        host: the host name of the owning process (``socket.gethostname()`` there), or
            ``None`` when unknown.
        since: when it took the run (timezone-aware UTC, whole seconds), or ``None``.
        detail: what else the store knows, for people (e.g. the PostgreSQL backend pid and
            client address), or ``None``.
    """

    pid: int | None = None
    host: str | None = None
    since: datetime.datetime | None = None
    detail: str | None = None

    @property
    def is_this_process(self) -> bool:
        """True when the owner is the calling process (same pid on this host)."""
        return self.pid == os.getpid() and self.host == socket.gethostname()

    def describe(self) -> str:
        """``pid 4242 on host 'build-7' since 2026-12-01 11:02:03 UTC`` (the parts known)."""
        parts = []
        if self.pid is not None:
            parts.append(f"pid {self.pid}")
        if self.host is not None:
            parts.append(f"on host {self.host!r}")
        if self.is_this_process:
            parts.append("(this process)")
        if self.since is not None:
            parts.append(f"since {self.since:%Y-%m-%d %H:%M:%S} UTC")
        if self.detail:
            parts.append(f"({self.detail})" if parts else self.detail)
        return " ".join(parts) if parts else "an owner the store cannot name"


def current_owner(since: float | None = None) -> RunOwner:
    """This process as a run's owner.

    Args:
        since: when it took the run, seconds since the epoch; ``None``: now.
    """
    return RunOwner(
        pid=os.getpid(),
        host=socket.gethostname(),
        since=_utc(time.time() if since is None else since),
    )


def owner_to_bytes(owner: RunOwner) -> bytes:
    """The lock file content naming ``owner``: one JSON object and a newline (UTF-8).

    The newline comes last, so a reader that sees a file cut short (a write in progress) finds
    no newline and treats the owner as unknown rather than misread.
    """
    data = {
        "pid": owner.pid,
        "host": owner.host,
        "since": None if owner.since is None else owner.since.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return json.dumps(data, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n"


def owner_from_bytes(data: bytes) -> RunOwner | None:
    """The owner named by lock file content, or ``None`` when it names none (empty, cut
    short, not written by Durable)."""
    if not data.endswith(b"\n"):
        return None
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(parsed, dict):
        return None
    pid, host, since = parsed.get("pid"), parsed.get("host"), parsed.get("since")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    if not isinstance(host, str):
        host = None
    when = None
    if isinstance(since, str):
        try:
            when = datetime.datetime.strptime(since, "%Y-%m-%dT%H:%M:%SZ").replace(
                tzinfo=datetime.UTC
            )
        except ValueError:
            when = None
    return RunOwner(pid=pid, host=host, since=when)


def owner_tag(base: str, owner: RunOwner) -> str:
    """``<base> <pid>@<host> <since, epoch seconds>`` within PostgreSQL's 63 bytes of
    ``application_name``: ``base`` is shortened first, then the host name (ending ``~``)."""
    since = 0 if owner.since is None else int(owner.since.timestamp())
    host = (owner.host or "?").encode("ascii", "replace").decode("ascii").replace(" ", "_")
    suffix = f"{owner.pid}@{host} {since}"
    if len(suffix) > _TAG_LIMIT:
        keep = _TAG_LIMIT - len(f"{owner.pid}@~ {since}")
        suffix = f"{owner.pid}@{host[:keep]}~ {since}"
    room = _TAG_LIMIT - len(suffix) - 1
    base = base.encode("ascii", "replace").decode("ascii")[: max(room, 0)].strip()
    return f"{base} {suffix}" if base else suffix


def owner_from_tag(tag: str | None) -> RunOwner | None:
    """The owner an ``application_name`` made by :func:`owner_tag` names, or ``None``."""
    match = _TAG.search(tag or "")
    if match is None:
        return None
    since = int(match.group(3))
    return RunOwner(
        pid=int(match.group(1)),
        host=match.group(2),
        since=_utc(since) if since else None,
    )
