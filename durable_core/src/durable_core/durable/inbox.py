"""Posting to a run's inbox, and the feed its intake node reads (X-INBOX-1, X-INBOX-2).

:func:`send` (``Runtime.send``) encodes a value with the run's codecs and keeps it in the
store's inbox (:class:`~durable_core.store.inbox.RunInbox`): no session, no ownership, durable
when it returns. A message's payload is the JSON object ``{"TypeID", "Version", "Data"}`` (the
codec id and version, and the encoded bytes in base64), decoded with the same checks as a
stored value.

:class:`StoreInboxFeed` is what an intake node (:mod:`durable_core.graph.inbox`) takes
messages through in a durable run: it reads the messages after the stream's saved position,
decodes them, drops those whose intake was saved, and polls (a short pause that grows while
nothing is posted, up to :data:`MAX_POLL` seconds).

:func:`inbox_cursors` reads, from a record, the last inbox sequence each intake took in: the
stream's saved ``Cursor``, which is the only place that says what was taken in.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from durable_core.codecs import Codecs
from durable_core.codecs.registry import digest_of
from durable_core.errors import CodecError, ConfigError, CorruptRecordError, GraphError
from durable_core.graph.inbox import INTAKE_PREFIX
from durable_core.store.capabilities import Capability, capabilities
from durable_core.store.inbox import RunInbox

if TYPE_CHECKING:
    from durable_core.graph import Graph, Key
    from durable_core.graph.context import RunContext
    from durable_core.records import RunRecord

__all__ = [
    "MAX_POLL",
    "MIN_POLL",
    "StoreInboxFeed",
    "decode_message",
    "encode_message",
    "has_inbox",
    "inbox_cursors",
    "inbox_keys",
    "require_inbox",
    "send",
]

MIN_POLL = 0.02
"""Seconds an idle intake first waits before it looks at the inbox again."""

MAX_POLL = 0.25
"""The longest pause between two looks at an inbox while nothing is posted."""


def has_inbox(store: Any) -> bool:
    """Whether ``store`` declares ``Capability.INBOX`` (it keeps runs' inboxes)."""
    return Capability.INBOX in capabilities(store)


def require_inbox(store: Any, what: str = "post to a run") -> RunInbox:
    """``store`` as a :class:`RunInbox`.

    Raises:
        ConfigError: the store keeps no inboxes.
    """
    if not has_inbox(store):
        raise ConfigError(
            f"cannot {what}: {type(store).__name__} keeps no inboxes; use the file, SQLite, "
            "PostgreSQL or memory store (see docs/storage.md, 'Optional capabilities')"
        )
    return store  # type: ignore[no-any-return]


def _check_inbox_key(key: Any) -> None:
    if not getattr(key, "inbox", False):
        raise GraphError(
            f"{key!r} is not an inbox key: only a stream key declared with inbox=True takes "
            "posted messages"
        )


def encode_message(codecs: Codecs, key: Key[Any], value: Any) -> bytes:
    """The payload of a message carrying ``value`` for inbox ``key``.

    Raises:
        GraphError: ``key`` is not an inbox key.
        CodecError: the value is not of the key's element type, or cannot be encoded.
    """
    _check_inbox_key(key)
    if not key.accepts(value):
        raise CodecError(
            f"inbox {key.name!r} takes {key!r} elements, got {type(value).__name__}: {value!r:.80}"
        )
    encoded = codecs.encode_value(key.type, value, name=key.name)
    return json.dumps(
        {
            "TypeID": encoded.codec_id,
            "Version": encoded.version,
            "Data": base64.b64encode(encoded.data).decode("ascii"),
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode("ascii")


def decode_message(codecs: Codecs, key: Key[Any], payload: bytes, sequence: int = 0) -> Any:
    """The value a message carries.

    Raises:
        CorruptRecordError: the payload is not a message Durable posted.
        CodecError: the value does not decode with the key's codec (the codec changed).
    """
    try:
        parsed = json.loads(payload)
        data = base64.b64decode(parsed["Data"], validate=True)
        codec_id, version = parsed["TypeID"], parsed["Version"]
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise CorruptRecordError(
            f"message {sequence} of inbox {key.name!r} is not a message Durable posted ({exc})"
        ) from None
    return codecs.decode_value(
        key.type, codec_id, version, data, digest_of(data), name=f"{key.name}#{sequence}"
    )


def send(
    store: Any,
    run_id: str,
    key: Key[Any],
    value: Any,
    idempotency_key: str | None = None,
    *,
    codecs: Codecs | None = None,
) -> int:
    """Post ``value`` to the inbox ``key`` of run ``run_id``; return its inbox sequence once it
    is durable (X-INBOX-1).

    Needs no ownership of the run and never waits for its owner; the run takes the message in
    when it runs (at once if it is running, else when it is resumed). With an
    ``idempotency_key`` already posted to that inbox, nothing is posted and the first post's
    sequence is returned: repeat a post whose outcome you do not know with the same key.

    Args:
        store: the run's store (it must keep inboxes).
        run_id: the run.
        key: an inbox key of the run's graph (``Key(..., stream=True, inbox=True)``).
        value: an element of the key's type.
        idempotency_key: a non-empty string naming this post, or None.
        codecs: the run's codecs (default: the built-in JSON codecs).

    Raises:
        NotFoundError: the store has no record of the run (nothing posted).
        ConfigError: the store keeps no inboxes, or the idempotency key is invalid.
        GraphError: ``key`` is not an inbox key.
        CodecError: the value is not of the key's type, or cannot be encoded.
    """
    inbox = require_inbox(store)
    payload = encode_message(codecs or Codecs.default(), key, value)
    return inbox.post_message(run_id, key.name, payload, idempotency_key)


def inbox_keys(graph: Graph) -> dict[str, Key[Any]]:
    """Every inbox key of ``graph`` and its Sub graphs, by name."""
    found: dict[str, Key[Any]] = {}
    for sub in graph.graphs().values():
        for key in sub.keys.values():
            if key.inbox:
                found.setdefault(key.name, key)
    return found


def inbox_cursors(record: RunRecord) -> dict[str, int]:
    """The last inbox sequence each intake of ``record`` took in, by inbox key name (0 when the
    intake saved nothing yet); read from the writer entries of the intake nodes' streams."""
    cursors: dict[str, int] = {}
    for entry in record.streams.values():
        if entry.group or not entry.node_id.startswith(INTAKE_PREFIX):
            continue
        try:
            cursor = json.loads(entry.cursor) if entry.cursor else 0
        except ValueError:
            cursor = 0
        if isinstance(cursor, int) and not isinstance(cursor, bool):
            cursors[entry.key] = max(cursors.get(entry.key, 0), cursor)
    return cursors


class StoreInboxFeed:
    """The feed of a durable run's intake nodes, over a :class:`RunInbox` store."""

    def __init__(self, store: Any, run_id: str, codecs: Codecs) -> None:
        self._store = store
        self._run_id = run_id
        self._codecs = codecs
        self._pause = MIN_POLL
        self._posted: asyncio.Event | None = None  # set when a post is announced
        self._stop_watching: Any = None

    def _watch(self) -> None:
        """Listen for announced posts where the store can announce them (PostgreSQL's
        ``watch_posts``): a pause then ends as soon as a message is posted."""
        watch = getattr(self._store, "watch_posts", None)
        if self._posted is not None or watch is None:
            return
        loop = asyncio.get_running_loop()
        posted = self._posted = asyncio.Event()
        try:
            self._stop_watching = watch(self._run_id, lambda: loop.call_soon_threadsafe(posted.set))
        except Exception:  # polling still takes every post in
            self._stop_watching = None

    def close(self) -> None:
        """Stop listening for announced posts."""
        if self._stop_watching is not None:
            self._stop_watching()
            self._stop_watching = None

    async def take(self, key: Key[Any], after: int, limit: int) -> list[tuple[int, Any]]:
        """Posted messages after ``after``, decoded, in sequence order."""
        inbox = require_inbox(self._store, f"take in inbox {key.name!r}")
        self._watch()
        messages = await asyncio.to_thread(
            inbox.read_messages, self._run_id, key.name, after, limit
        )
        if messages:
            self._pause = MIN_POLL
        return [
            (m.sequence, decode_message(self._codecs, key, m.payload, m.sequence)) for m in messages
        ]

    async def drop(self, key: Key[Any], through: int) -> None:
        """Forget the messages up to ``through``."""
        await asyncio.to_thread(self._store.drop_messages, self._run_id, key.name, through)

    async def pause(self, rc: RunContext) -> None:
        """Wait before the next look, a little longer each time nothing came."""
        pause = self._pause
        self._pause = min(MAX_POLL, pause * 2)
        posted = self._posted
        if posted is None:
            await rc._idle(asyncio.sleep(pause))
            return
        posted.clear()
        try:
            await rc._idle(asyncio.wait_for(posted.wait(), pause))
        except TimeoutError:
            pass
        else:
            self._pause = MIN_POLL


def pending_posts(store: Any, run_id: str, cursors: dict[str, int], keys: Iterable[str]) -> bool:
    """Whether any of inboxes ``keys`` of the run holds a post after its cursor."""
    inbox = require_inbox(store)
    return any(inbox.last_sequence(run_id, key) > cursors.get(key, 0) for key in keys)
