"""The store's optional capabilities: what a store may do beyond the contract, and how it says so.

Every store keeps the contract of :mod:`durable_core.store.protocol` (exclusive ownership,
compare-and-swap saves; SPEC R-STORE-1…5): that is not optional and is not a capability. What a
store *may* do besides is a :class:`Capability`, and this module is the one place that names
them, holds the protocol each one promises and detects them (:func:`capabilities`).

A class declares its capabilities in the ClassVar ``capabilities`` (a frozenset of
:class:`Capability`); nothing is probed from a class that declares. Each capability is declared
in one place, the one :attr:`Capability.declared_on` names:

- on the **store** class: what the store and its sessions can do for an operator (list, peek,
  times, cancel requests, histories; and the sessions' delete, restore, restore of times, which
  the CLI must know before it takes a session);
- on the **session** class: how the runtime may call ``save`` (``ENCODED_SAVES``,
  ``QUICK_SAVES``, ``IDLE_SAVES``), which the ledger asks of the session it holds.

A class that declares nothing (a store written against the bare protocols) is read as before
declarations existed: by the methods it has (``isinstance`` of the runtime-checkable protocols
below) and whether its ``save`` takes ``encoded``. The class attributes ``quick_saves = True`` /
``idle_saves = True``, the flags' spelling before declarations, are still read for one release.
A class that declares is taken at its word, and the conformance kit
(:mod:`durable_core.testing.conformance`) holds it to it: it checks that each declared capability
is implemented and runs that capability's clauses.

Adding a capability (the inbox a run is posted to, what launchers need, …) takes five steps,
written out in docs/architecture.md ("Where a new store capability goes"): a member here with
its row in :data:`CAPABILITY_SPECS`, its protocol here, the declaration on the backends that have
it, its clauses in :mod:`durable_core.testing.conformance.capabilities` (the kit refuses a
member without clauses), and its use through :func:`capabilities`.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import attrs

from durable_core.store.inbox import RunInbox

if TYPE_CHECKING:
    from collections.abc import Iterable

    from durable_core.records import RunRecord
    from durable_core.store.protocol import RunSummary

__all__ = [
    "CAPABILITY_SPECS",
    "CancelRequests",
    "Capability",
    "CapabilitySpec",
    "CreateTimes",
    "EncodedSaves",
    "RecordPeeker",
    "RecordRestorer",
    "RunDeleter",
    "RunHistory",
    "RunInbox",
    "RunLister",
    "SaveTimes",
    "TimesRestorer",
    "capabilities",
    "declared",
]


class Capability(enum.Enum):
    """One optional capability of a store or of its sessions (see :data:`CAPABILITY_SPECS`)."""

    LIST_RUNS = "list_runs"
    """The store enumerates its runs (:class:`RunLister`): ``durable list``, ``prune``."""
    PEEK = "peek"
    """The store reads a run's last committed record without its session (:class:`RecordPeeker`)."""
    SAVE_TIMES = "save_times"
    """The store knows when each run was last saved (:class:`SaveTimes`)."""
    CREATE_TIMES = "create_times"
    """The store knows when each run's first record was written (:class:`CreateTimes`)."""
    CANCEL_REQUESTS = "cancel_requests"
    """A run's owner can be asked, through the store, to stop (:class:`CancelRequests`)."""
    RUN_HISTORY = "run_history"
    """The store keeps each run's history beside its record (:class:`RunHistory`, X-HIST)."""
    DELETE = "delete"
    """The store's sessions remove their run (:class:`RunDeleter`)."""
    RESTORE = "restore"
    """The store's sessions write a copied record at its own revision (:class:`RecordRestorer`)."""
    RESTORE_TIMES = "restore_times"
    """The store's sessions set a copied run's times (:class:`TimesRestorer`)."""
    ENCODED_SAVES = "encoded_saves"
    """The session's ``save`` takes the caller's ``encoded`` bytes (:class:`EncodedSaves`)."""
    QUICK_SAVES = "quick_saves"
    """The session's saves touch no medium and never block: the runtime saves on its loop."""
    IDLE_SAVES = "idle_saves"
    """The session's saves never use an event loop: the runtime may save on its loop while no
    body runs."""

    INBOX = "inbox"
    """Messages can be posted to the store's runs, which may wait for them without a process
    (:class:`~durable_core.store.inbox.RunInbox`, X-INBOX-1, X-WAIT)."""

    # The next capabilities go here (what launchers need of a store),
    # each with its row in CAPABILITY_SPECS below and its clauses in
    # durable_core.testing.conformance.capabilities: docs/architecture.md has the steps.


@attrs.frozen
class CapabilitySpec:
    """What one :class:`Capability` is.

    Attributes:
        declared_on: the class that declares it, ``"store"`` or ``"session"``.
        held_by: the object whose methods implement it, ``"store"`` or ``"session"``.
        protocol: the runtime-checkable protocol it promises; ``None`` for a flag, which
            changes how the runtime calls the contract's methods and adds none.
        legacy: for a flag, the class attribute that said it before declarations (``True``).
        needs: what an operator is told the store lacks when it is missing ("delete runs").
    """

    declared_on: Literal["store", "session"]
    held_by: Literal["store", "session"]
    protocol: type | None
    needs: str
    legacy: str | None = None


@runtime_checkable
class RunLister(Protocol):
    """Optional capability of stores that can enumerate their runs."""

    def list_runs(self) -> Iterable[RunSummary]:
        """Return a summary of every stored run, sorted by run id, without taking ownership.

        Records that cannot be read are included with ``error`` set (sorted by ``location``
        after the readable ones); only a failure to enumerate at all raises.
        """
        ...


@runtime_checkable
class EncodedSaves(Protocol):
    """A session whose ``save`` takes the caller's encoding (``encoded``, an
    :class:`~durable_core.store.EncodedRecord`); every session of the store kit does."""

    def save(self, record: RunRecord, expected_revision: int, encoded: Any = None) -> None:
        """Save as :meth:`durable_core.store.Session.save` does."""
        ...


@runtime_checkable
class RunDeleter(Protocol):
    """A session that can remove its run (optional capability of a store's sessions)."""

    def delete(self) -> None:
        """Remove the run's record, and the run's own lock entry, while holding the session;
        then close the session.

        Raises:
            NotFoundError: the run has no record (nothing removed).
            SessionClosedError: the session was closed.
            DurableError / OSError: the medium failed; the message says what is left.
        """
        ...


@runtime_checkable
class RecordRestorer(Protocol):
    """A session that can write a copied record at its own revision (optional capability)."""

    def restore(self, record: RunRecord) -> None:
        """Write ``record`` as the run's first record, keeping ``record.revision``.

        Raises:
            ConflictError: the run already has a record (nothing written).
            CorruptRecordError: ``record`` is not a valid record of this run.
            SessionClosedError: the session was closed.
        """
        ...


@runtime_checkable
class RecordPeeker(Protocol):
    """A store that can read a run's last committed record without owning the run (optional
    capability): the file store reads the atomically replaced file, SQL stores a plain SELECT.
    It never writes and never locks; a running run's owner may save a newer revision at once."""

    def peek(self, run_id: str) -> RunRecord:
        """The last committed record of ``run_id``.

        Raises:
            NotFoundError: no record.
            CorruptRecordError: the stored bytes are not a record of this run.
        """
        ...


@runtime_checkable
class CancelRequests(Protocol):
    """A store through which a run's owner can be asked to stop (optional capability).

    The request is not part of the record (nobody but the owner writes the record): the file
    and SQLite stores leave a marker file beside the run's lock file, the PostgreSQL store sends
    a notification that the owner listens for, from any host.
    """

    def request_cancel(self, run_id: str) -> None:
        """Ask the owner of ``run_id`` to stop cleanly. Does not wait."""
        ...

    def watch_cancel(self, run_id: str, on_request: Callable[[], None]) -> Callable[[], None]:
        """Call ``on_request`` (from another thread) when a stop of ``run_id`` is asked for,
        until the returned function is called. A request left from before is dropped first."""
        ...


@runtime_checkable
class SaveTimes(Protocol):
    """A store that knows when each run was last saved (optional capability)."""

    def saved_at(self, run_id: str) -> float | None:
        """When ``run_id``'s record was last written (seconds since the epoch), or ``None``
        when it has no record or the time is not known. Never takes the run's session."""
        ...


@runtime_checkable
class CreateTimes(Protocol):
    """A store that knows when each run's first record was written (optional capability)."""

    def created_at(self, run_id: str) -> float | None:
        """When ``run_id``'s first record was written (seconds since the epoch), or ``None``
        when it has no record or the time is not known (a run saved before the store kept
        it). Never takes the run's session."""
        ...


@runtime_checkable
class TimesRestorer(Protocol):
    """A session that can set its run's stored times (optional capability), so that a
    migrated run keeps when it was created and last saved."""

    def restore_times(self, created_at: float | None, saved_at: float | None) -> None:
        """Set when the run was created and last saved (seconds since the epoch), as the
        source store knew them; ``None`` means unknown there. Called right after
        ``restore``, in the same session.

        Raises:
            NotFoundError: the run has no record.
            SessionClosedError: the session was closed.
        """
        ...


@runtime_checkable
class RunHistory(Protocol):
    """A store that keeps each run's history beside its record (optional capability, X-HIST).

    A history is an ordered list of entries, each one JSON object's text on one line (no
    ``"\\n"``, valid Unicode), appended by a background writer (never on the save path, never
    under the run's session) and read back in the order appended. It is keyed by the run id
    **and** the run's root scope (``RunRecord.root_scope``, random per run): a run deleted and
    started again under the same id, or a fork, has a history of its own. Deleting a run
    (:class:`RunDeleter`) removes its history with it. Appending never changes the record, its
    revision or its stored bytes. Appenders in several processes (or hosts) may append to one
    run's history at once: each call's entries stay whole and in order (they may interleave
    with another call's as whole entries).
    """

    def append_history(self, run_id: str, root_scope: str, entries: Sequence[str]) -> None:
        """Append ``entries`` to the history of ``run_id``'s run ``root_scope``.

        Raises:
            ValueError: an entry holds a line break, or ``root_scope`` is empty or holds a
                tab or a line break (nothing appended).
            DurableError / OSError: the medium failed; some entries may be missing.
        """
        ...

    def read_history(self, run_id: str, root_scope: str) -> list[str]:
        """The entries of ``run_id``'s run ``root_scope``, oldest first (empty when none).

        An entry torn by a crash while it was appended is left out. Never takes the run's
        session.
        """
        ...


CAPABILITY_SPECS: Mapping[Capability, CapabilitySpec] = {
    Capability.LIST_RUNS: CapabilitySpec("store", "store", RunLister, "list runs"),
    Capability.PEEK: CapabilitySpec("store", "store", RecordPeeker, "peek at records"),
    Capability.SAVE_TIMES: CapabilitySpec("store", "store", SaveTimes, "say when runs were saved"),
    Capability.CREATE_TIMES: CapabilitySpec(
        "store", "store", CreateTimes, "say when runs were created"
    ),
    Capability.CANCEL_REQUESTS: CapabilitySpec(
        "store", "store", CancelRequests, "ask a run's owner to stop"
    ),
    Capability.RUN_HISTORY: CapabilitySpec("store", "store", RunHistory, "keep runs' histories"),
    Capability.DELETE: CapabilitySpec("store", "session", RunDeleter, "delete runs"),
    Capability.RESTORE: CapabilitySpec("store", "session", RecordRestorer, "receive migrated runs"),
    Capability.RESTORE_TIMES: CapabilitySpec(
        "store", "session", TimesRestorer, "keep a copied run's times"
    ),
    Capability.ENCODED_SAVES: CapabilitySpec(
        "session", "session", EncodedSaves, "take the caller's encoding"
    ),
    Capability.QUICK_SAVES: CapabilitySpec(
        "session", "session", None, "save on the event loop", legacy="quick_saves"
    ),
    Capability.IDLE_SAVES: CapabilitySpec(
        "session", "session", None, "save on an idle event loop", legacy="idle_saves"
    ),
    Capability.INBOX: CapabilitySpec("store", "store", RunInbox, "keep runs' inboxes"),
}
"""Every capability's row: where it is declared, what implements it, the protocol it promises."""


_LEGACY = (Capability.QUICK_SAVES, Capability.IDLE_SAVES)
"""Flags a session class may still say by their attribute of before declarations (one release)."""


def declared(cls: type) -> frozenset[Capability] | None:
    """The capabilities ``cls`` declares in its ClassVar ``capabilities``, or ``None`` when it
    declares none (not even an empty set).

    Raises:
        TypeError: ``capabilities`` is not a set of :class:`Capability`.
    """
    value = getattr(cls, "capabilities", None)
    if value is None or callable(value):
        return None
    if not isinstance(value, frozenset | set) or not all(isinstance(c, Capability) for c in value):
        raise TypeError(
            f"{cls.__qualname__}.capabilities must be a frozenset of durable_core.store."
            f"Capability, found {value!r}"
        )
    return frozenset(value)


def capabilities(obj: object) -> frozenset[Capability]:
    """The optional capabilities of ``obj``, a store or a session (SPEC R-STORE-1).

    For a store: the capabilities declared on the store's class (``declared_on == "store"``,
    which include what its sessions can do for an operator). For a session: those declared on
    the session's class (``declared_on == "session"``: how the runtime may call ``save``). A
    class that declares nothing is read by what it has (see the module's docstring).

    Returns:
        The capabilities, as a frozenset (empty when there are none).

    Raises:
        TypeError: the class declares ``capabilities`` as something other than a set of
            :class:`Capability`.
    """
    cls = type(obj)
    found = declared(cls)
    if found is None:
        return _detected(obj)
    legacy = {c for c in _LEGACY if getattr(cls, CAPABILITY_SPECS[c].legacy or "", False) is True}
    return found | legacy if legacy else found


def _detected(obj: object) -> frozenset[Capability]:
    """What a class that declares nothing has: protocols by ``isinstance``, the legacy flags by
    their class attributes, ``ENCODED_SAVES`` by the signature of ``save``."""
    is_session = callable(getattr(obj, "load", None)) and callable(getattr(obj, "save", None))
    found: set[Capability] = set()
    for capability, spec in CAPABILITY_SPECS.items():
        if (spec.held_by == "session") != is_session:
            continue
        if capability is Capability.ENCODED_SAVES:
            if _accepts_encoded(obj):
                found.add(capability)
        elif spec.legacy is not None:
            if getattr(type(obj), spec.legacy, False) is True:
                found.add(capability)
        elif spec.protocol is not None and isinstance(obj, spec.protocol):
            found.add(capability)
    return frozenset(found)


def _accepts_encoded(session: object) -> bool:
    """Whether ``session.save`` takes the ``encoded`` argument (a store written before it was
    added takes only the record and the expected revision, and encodes the record itself)."""
    try:
        parameters = inspect.signature(session.save).parameters  # type: ignore[attr-defined]
    except (TypeError, ValueError, AttributeError):
        return False
    return "encoded" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )
