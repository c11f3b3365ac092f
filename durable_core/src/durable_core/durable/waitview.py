"""What ``durable inspect`` shows of a run's inboxes, timers and waiting note (X-INBOX, X-TIMER).

:func:`describe_waits` reads, without the run's session and without changing anything: each
inbox's last sequence taken in (from the record), the posts after it still in the store (its
pending posts), the deadline of each confirmed timer of the root graph (with the graph), and
the run's waiting note.
"""

from __future__ import annotations

import json
import time
from typing import Any

from durable_core.durable.inbox import has_inbox, inbox_cursors
from durable_core.durable.waiting import waiting_of

__all__ = ["describe_waits", "print_waits"]

_SHOWN = 10


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def describe_waits(store: Any, record: Any, graph: Any = None) -> dict[str, Any]:
    """``{"inboxes": [...], "timers": [...], "waiting": note or None}`` for ``record``.

    Each inbox: ``key``, ``taken`` (last sequence taken in), ``pending`` (how many posts
    after it), ``posts`` (the first few: ``sequence``, ``idempotency_key``, ``posted_at``).
    Each timer: ``node``, ``key``, ``deadline`` (seconds since the epoch), ``remaining``.
    """
    cursors = inbox_cursors(record)
    inboxes = []
    if has_inbox(store):
        for key in sorted(set(store.inbox_keys(record.run_id)) | set(cursors)):
            taken = cursors.get(key, 0)
            posts = store.read_messages(record.run_id, key, after=taken)
            inboxes.append(
                {
                    "key": key,
                    "taken": taken,
                    "pending": len(posts),
                    "posts": [
                        {
                            "sequence": m.sequence,
                            "idempotency_key": m.idempotency_key,
                            "posted_at": m.posted_at,
                        }
                        for m in posts[:_SHOWN]
                    ],
                }
            )
    timers = []
    root = record.scopes.get(record.root_scope)
    if graph is not None and root is not None:
        now = time.time()
        for node in graph.nodes.values():
            key = getattr(node.body, "durable_timer", None)
            confirmed = root.nodes.get(node.id)
            if key is None or confirmed is None:
                continue
            for value in confirmed.outputs:
                if value.name == key and value.data:
                    deadline = float(json.loads(value.data))
                    timers.append(
                        {
                            "node": node.id,
                            "key": key,
                            "deadline": deadline,
                            "remaining": max(0.0, deadline - now),
                        }
                    )
    note = waiting_of(store, record.run_id)
    waiting = None
    if note is not None:
        waiting = {"until": note.until, "for": note.describe(), "since": note.since}
    return {"inboxes": inboxes, "timers": timers, "waiting": waiting}


def print_waits(waits: dict[str, Any], echo: Any) -> None:
    """The text lines of :func:`describe_waits` for ``durable inspect``."""
    if waits["waiting"] is not None:
        echo(f"waiting    for {waits['waiting']['for']} (no process holds it)")
    for inbox in waits["inboxes"]:
        echo(
            f"inbox      {inbox['key']}: taken in through {inbox['taken']}, "
            f"{inbox['pending']} pending"
        )
        for post in inbox["posts"]:
            key = post["idempotency_key"]
            named = f", idempotency key {key!r}" if key is not None else ""
            echo(f"  {post['sequence']}  posted {_when(post['posted_at'])}{named}")
        if inbox["pending"] > len(inbox["posts"]):
            echo(f"  … and {inbox['pending'] - len(inbox['posts'])} more")
    for timer in waits["timers"]:
        left = timer["remaining"]
        state = f"{left:.1f} s left" if left > 0 else "passed"
        echo(f"timer      {timer['node']}: deadline {_when(timer['deadline'])} ({state})")
