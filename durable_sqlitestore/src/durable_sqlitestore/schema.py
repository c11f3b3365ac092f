"""The SQLite store's schema: its DDL and the steps that upgrade an older database (B-SQL-1).

Schema v5 (``PRAGMA user_version = 5``) is ``durable_runs`` (:data:`RUNS_V3`), ``durable_deltas``
(:data:`DELTAS_V3`), ``durable_history`` with its index (:data:`HISTORY_V4`,
:data:`HISTORY_INDEX_V4`) and the inbox tables (:data:`INBOX_V5`, :data:`INBOX_INDEX_V5`,
:data:`INBOX_LAST_V5`, :data:`WAITING_V5`). A new database is made at v5 at once (:data:`CREATE`).
An older one is brought to v5 in place by :data:`MIGRATIONS`, an ordered list whose index is the
version an entry upgrades to: ``MIGRATIONS[n]`` brings version ``n - 1`` to ``n``. Versions 0 and 1
have no entry: no database is ever upgraded to them (v1 was the first one written). :func:`upgrade`
runs what a database needs, and the version stamp, in one transaction; :func:`check_existing`
refuses a foreign database before anything touches it. Every object in ``sqlite_master`` must be
exactly the statement of its version (:data:`OBJECTS`): the database is dedicated to Durable.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass

from durable_core.errors import SchemaError

__all__ = [
    "CREATE",
    "DELTAS_TABLE",
    "DELTAS_V2",
    "DELTAS_V3",
    "HISTORY_INDEX_V4",
    "HISTORY_TABLE",
    "HISTORY_V4",
    "INBOX_INDEX_V5",
    "INBOX_LAST_V5",
    "INBOX_V5",
    "MIGRATIONS",
    "OBJECTS",
    "RUNS_TABLE",
    "RUNS_V3",
    "SCHEMA_V1",
    "SCHEMA_VERSION",
    "WAITING_V5",
    "Migration",
    "check_existing",
    "upgrade",
]

RUNS_TABLE = "durable_runs"
DELTAS_TABLE = "durable_deltas"
HISTORY_TABLE = "durable_history"

INBOX_TABLE = "durable_inbox"
INBOX_LAST_TABLE = "durable_inbox_last"
WAITING_TABLE = "durable_waiting"
SCHEMA_VERSION = 5
"""``PRAGMA user_version`` of a Durable database with schema v5 (v1 to v4 are upgraded on
open)."""

SCHEMA_V1 = (
    "CREATE TABLE durable_runs ("
    "run_id TEXT NOT NULL PRIMARY KEY CHECK (typeof(run_id) = 'text' AND run_id <> ''), "
    "revision TEXT NOT NULL CHECK (typeof(revision) = 'text' AND length(revision) <= 20 "
    "AND revision GLOB '[1-9]*' AND revision NOT GLOB '*[^0-9]*'), "
    "record BLOB NOT NULL CHECK (typeof(record) = 'blob')"
    ") WITHOUT ROWID"
)
"""The v1 DDL: the run id, the complete record as JSON bytes (BLOB), the revision as decimal
TEXT (uint64-safe, no leading zeros). ``sqlite_master`` must hold exactly this statement."""

DELTAS_V2 = (
    "CREATE TABLE durable_deltas ("
    "run_id TEXT NOT NULL CHECK (typeof(run_id) = 'text' AND run_id <> ''), "
    "base TEXT NOT NULL CHECK (typeof(base) = 'text' AND length(base) <= 20 "
    "AND base GLOB '[1-9]*' AND base NOT GLOB '*[^0-9]*'), "
    "delta BLOB NOT NULL CHECK (typeof(delta) = 'blob'), "
    "PRIMARY KEY (run_id, base)"
    ") WITHOUT ROWID"
)
"""The table added by v2: one row per delta saved since the run's complete record; ``base`` is
the revision the delta applies to (decimal TEXT), so that ``(run_id, base)`` being unique is what
makes two saves from one revision impossible. ``sqlite_master`` must hold exactly this
statement."""

_CREATED_AT = "created_at REAL CHECK (created_at IS NULL OR typeof(created_at) = 'real')"
_SAVED_AT = "saved_at REAL CHECK (saved_at IS NULL OR typeof(saved_at) = 'real')"

RUNS_V3 = SCHEMA_V1.removesuffix(") WITHOUT ROWID") + f", {_CREATED_AT}, {_SAVED_AT}) WITHOUT ROWID"
"""``durable_runs`` in v3: :data:`SCHEMA_V1` with ``created_at`` and ``saved_at`` (REAL seconds
since the epoch, NULL when unknown) appended, exactly as ``ALTER TABLE … ADD COLUMN`` leaves the
v2 table. ``sqlite_master`` must hold exactly this statement."""

DELTAS_V3 = DELTAS_V2.replace(
    ", PRIMARY KEY (run_id, base)", f", {_SAVED_AT}, PRIMARY KEY (run_id, base)"
)
"""``durable_deltas`` in v3: :data:`DELTAS_V2` with each delta's ``saved_at``, exactly as
``ALTER TABLE … ADD COLUMN`` leaves the v2 table. ``sqlite_master`` must hold exactly this
statement."""

HISTORY_V4 = (
    "CREATE TABLE durable_history ("
    "id INTEGER PRIMARY KEY, "
    "run_id TEXT NOT NULL CHECK (typeof(run_id) = 'text' AND run_id <> ''), "
    "root_scope TEXT NOT NULL CHECK (typeof(root_scope) = 'text' AND root_scope <> ''), "
    "entry TEXT NOT NULL CHECK (typeof(entry) = 'text'), "
    "written_at REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0))"
)
"""The table added by v4: each run's history (RunHistory), one row per entry; ``id`` (the
rowid, always past every row there) orders them. ``sqlite_master`` must hold exactly this
statement."""

HISTORY_INDEX_V4 = "CREATE INDEX durable_history_run ON durable_history (run_id, root_scope, id)"
"""How a run's history is found. ``sqlite_master`` must hold exactly this statement."""

INBOX_V5 = (
    "CREATE TABLE durable_inbox ("
    "run_id TEXT NOT NULL CHECK (typeof(run_id) = 'text' AND run_id <> ''), "
    "key TEXT NOT NULL CHECK (typeof(key) = 'text' AND key <> ''), "
    "sequence INTEGER NOT NULL CHECK (typeof(sequence) = 'integer' AND sequence > 0), "
    "idempotency_key TEXT CHECK (idempotency_key IS NULL OR typeof(idempotency_key) = 'text'), "
    "payload BLOB NOT NULL CHECK (typeof(payload) = 'blob'), "
    "posted_at REAL NOT NULL, "
    "PRIMARY KEY (run_id, key, sequence)"
    ") WITHOUT ROWID"
)
"""The table added by v5: messages posted to runs' inboxes (RunInbox), one row per message.
``sqlite_master`` must hold exactly this statement."""

INBOX_INDEX_V5 = (
    "CREATE UNIQUE INDEX durable_inbox_idempotency ON durable_inbox "
    "(run_id, key, idempotency_key) WHERE idempotency_key IS NOT NULL"
)
"""A repeated idempotency key is one row at most. ``sqlite_master`` must hold exactly this
statement."""

INBOX_LAST_V5 = (
    "CREATE TABLE durable_inbox_last ("
    "run_id TEXT NOT NULL, key TEXT NOT NULL, "
    "last INTEGER NOT NULL CHECK (typeof(last) = 'integer' AND last > 0), "
    "dropped INTEGER NOT NULL DEFAULT 0, "
    "PRIMARY KEY (run_id, key)"
    ") WITHOUT ROWID"
)
"""The last sequence posted to each inbox, so that dropping taken-in messages never lets a
sequence be used again, and the last one dropped: a dropped message that carried an
idempotency key keeps its row (with an empty payload), so that a repeated key is still known.
``sqlite_master`` must hold exactly this statement."""

WAITING_V5 = (
    "CREATE TABLE durable_waiting ("
    "run_id TEXT NOT NULL PRIMARY KEY CHECK (typeof(run_id) = 'text' AND run_id <> ''), "
    "note TEXT NOT NULL CHECK (typeof(note) = 'text')"
    ") WITHOUT ROWID"
)
"""Runs that ended their process to wait, with their waiting note. ``sqlite_master`` must hold
exactly this statement."""

_INBOX_V5 = (INBOX_V5, INBOX_INDEX_V5, INBOX_LAST_V5, WAITING_V5)

CREATE = (RUNS_V3, DELTAS_V3, HISTORY_V4, HISTORY_INDEX_V4, *_INBOX_V5)
"""What a new (empty) database is given, in this order, before its version is set to
:data:`SCHEMA_VERSION`."""


@dataclass(frozen=True)
class Migration:
    """One upgrade step: from the version before its index in :data:`MIGRATIONS` to that one.

    Attributes:
        statements: run first, in order, without parameters.
        backfill: run next, in order, each with one parameter: when the database file was last
            written before the upgrade (seconds since the epoch), for values the older version
            did not keep.
    """

    statements: tuple[str, ...]
    backfill: tuple[str, ...] = ()


MIGRATIONS: tuple[Migration | None, ...] = (
    None,  # v0: an empty database, made at SCHEMA_VERSION by CREATE
    None,  # v1: the first version written
    # v2: the deltas saved since each run's complete record.
    Migration((DELTAS_V2,)),
    # v3: when each run was created and saved. Rows saved before the upgrade get, as their
    # save time, the last time the file was written: no earlier than when they were saved.
    Migration(
        (
            f"ALTER TABLE {RUNS_TABLE} ADD COLUMN {_CREATED_AT}",
            f"ALTER TABLE {RUNS_TABLE} ADD COLUMN {_SAVED_AT}",
            f"ALTER TABLE {DELTAS_TABLE} ADD COLUMN {_SAVED_AT}",
        ),
        backfill=(
            f"UPDATE {RUNS_TABLE} SET saved_at = ?",
            f"UPDATE {DELTAS_TABLE} SET saved_at = ?",
        ),
    ),
    # v4: the runs' histories.
    Migration((HISTORY_V4, HISTORY_INDEX_V4)),
    # v5: the runs' inboxes and waiting notes.
    Migration(_INBOX_V5),
)
"""The upgrade steps, indexed by the version each one upgrades to (see :class:`Migration`)."""

assert len(MIGRATIONS) == SCHEMA_VERSION + 1

_V1_OBJECTS = {("table", RUNS_TABLE): SCHEMA_V1}
_V2_OBJECTS = {("table", RUNS_TABLE): SCHEMA_V1, ("table", DELTAS_TABLE): DELTAS_V2}
_V3_OBJECTS = {("table", RUNS_TABLE): RUNS_V3, ("table", DELTAS_TABLE): DELTAS_V3}
_V4_OBJECTS = {
    **_V3_OBJECTS,
    ("table", HISTORY_TABLE): HISTORY_V4,
    ("index", "durable_history_run"): HISTORY_INDEX_V4,
}
_V5_OBJECTS = {
    **_V4_OBJECTS,
    ("table", INBOX_TABLE): INBOX_V5,
    ("index", "durable_inbox_idempotency"): INBOX_INDEX_V5,
    ("table", INBOX_LAST_TABLE): INBOX_LAST_V5,
    ("table", WAITING_TABLE): WAITING_V5,
}
OBJECTS = {1: _V1_OBJECTS, 2: _V2_OBJECTS, 3: _V3_OBJECTS, 4: _V4_OBJECTS, 5: _V5_OBJECTS}
"""Per version, exactly what ``sqlite_master`` holds: ``(type, name)`` to its SQL."""

_UPGRADABLE = tuple(range(1, SCHEMA_VERSION))


def check_existing(connection: sqlite3.Connection, path: str) -> None:
    """Refuse a database that is not empty and not Durable's schema (v5, or an exact v1 to
    v4), changing nothing.

    Raises:
        SchemaError: the file is not an SQLite database, or holds anything else.
    """
    try:
        objects = connection.execute(
            "SELECT type, name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.OperationalError:
        raise
    except sqlite3.DatabaseError as exc:
        raise SchemaError(
            f"{path} is not an SQLite database ({exc}); the SQLite store needs a database file "
            "of its own. Point it at a new file"
        ) from exc
    if objects or version != 0:
        _check_schema(objects, version, path, upgradable=True)


def upgrade(connection: sqlite3.Connection, path: str, last_write: float) -> None:
    """Create schema v5 in an empty database, upgrade an exact v1 to v4, or check that v5
    is exactly there (B-SQL-1), in one ``BEGIN IMMEDIATE`` transaction. ``last_write`` (seconds
    since the epoch) becomes the ``saved_at`` of rows saved before an upgrade from v1 or v2.

    Raises:
        SchemaError: the database holds anything but one of Durable's schemas.
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        objects = connection.execute(
            "SELECT type, name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
        if not objects and version == 0:
            for statement in CREATE:
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        else:
            _check_schema(objects, version, path, upgradable=True)
            if version in _UPGRADABLE:
                for step in MIGRATIONS[version + 1 :]:
                    assert step is not None
                    for statement in step.statements:
                        connection.execute(statement)
                    for statement in step.backfill:
                        connection.execute(statement, (last_write,))
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise


def _check_schema(
    objects: list[tuple[str, str, str | None]], version: int, path: str, *, upgradable: bool
) -> None:
    """Refuse anything but exactly schema v5 (or exactly v1 to v4, when ``upgradable``)."""
    advice = (
        "The SQLite store needs a database of its own: point it at a new file, or remove what "
        "was added"
    )
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"{path} has schema version (PRAGMA user_version) {version}; this Durable reads "
            f"versions 1 to {SCHEMA_VERSION}. Use the Durable release that wrote it (or a newer "
            "one)"
        )
    expected = (
        OBJECTS[version] if (version in _UPGRADABLE and upgradable) else OBJECTS[SCHEMA_VERSION]
    )
    found = {(kind, name): sql for kind, name, sql in objects}
    for (kind, name), sql in sorted(found.items()):
        want = expected.get((kind, name))
        if want is None:
            raise SchemaError(f"unexpected {kind} {name!r} in {path}: {sql or ''}. {advice}")
        if sql != want:
            raise SchemaError(
                f"{kind} {name!r} in {path} does not match Durable's schema v{version}: found "
                f"{sql!r}, expected {want!r}. Durable never alters a schema it did not make; "
                "restore the table or use a new database"
            )
    if (("table", RUNS_TABLE)) not in found:
        raise SchemaError(
            f"{path} has user_version {version} but no table {RUNS_TABLE!r}; it is not a Durable "
            f"database. {advice}"
        )
    missing = sorted(name for kind, name in expected if (kind, name) not in found)
    if missing:
        raise SchemaError(
            f"{path} (schema version {version}) lacks the table(s) {', '.join(missing)} of "
            f"Durable's schema v{version}; it was changed outside Durable. {advice}"
        )
    if version not in (*_UPGRADABLE, SCHEMA_VERSION) or (version in _UPGRADABLE and not upgradable):
        raise SchemaError(
            f"{path} has schema version (PRAGMA user_version) {version}; this Durable reads "
            f"version {SCHEMA_VERSION} (and upgrades versions 1 to {SCHEMA_VERSION - 1}). Use "
            "the Durable release that wrote it"
        )
