"""The dedicated ``pulse_durable`` schema: creation and strict checking (B-PG-1, B-PG-3).

Version 6 of the schema holds eight tables::

    pulse_durable.runs            one row per run: a complete record as JSON in BYTEA, and
                                  when the run was created and last saved
    pulse_durable.deltas          the deltas saved since each run's complete record
    pulse_durable.history         each run's history (RunHistory): one row per entry, by
                                  run_key and seq, with the run's root scope
    pulse_durable.inbox           messages posted to runs (RunInbox): one row per message, by
                                  run_key, inbox key and seq
    pulse_durable.inbox_last      each inbox's last sequence posted and last one dropped
    pulse_durable.waiting         the waiting notes of runs that ended their process to wait
    pulse_durable.schema_version  one row: the schema version (6)

``runs.run_id`` is the run id's UTF-8 bytes (BYTEA, so that any Unicode run id fits, NUL
included, at any length); read it with ``convert_from(run_id, 'UTF8')``. ``runs.run_key`` is
``sha256(run_id)``, kept so by a CHECK, and is the primary key: a btree entry must fit in a
third of a page, so the id itself (which may be megabytes long) is not indexed.
``runs.revision`` is NUMERIC(20,0) with a CHECK keeping it within 1 … 2⁶⁴-1 (uint64).
``runs.format`` repeats the record's format for inspection in SQL. ``runs.created_at`` and
``runs.saved_at`` (``timestamptz``, NULL when unknown) are set by the server's clock (``now()``,
the start of the saving statement's transaction) in the statements that save: ``created_at`` by
the first save, ``saved_at`` by every save, including a delta save (whose ``UPDATE`` of the
revision sets it).

``runs.revision`` is the run's current revision; ``deltas`` (``run_key``, ``base``: the revision
a delta applies to, ``delta``) leads from the revision inside ``runs.record`` to it.

Version 1 (an earlier Durable) had no ``run_key``: its primary key was the run id itself, which
refused ids longer than about 2.7 KB; version 2 had no ``deltas``; version 3 had no times;
version 4 had no ``history``; version 5 had no inbox tables. A schema that is exactly version 1 to
5 is upgraded in place to 6, in one transaction, the first time a store opens it
(:data:`_UPGRADE_1_TO_2`, :data:`_UPGRADE_2_TO_3`, :data:`_UPGRADE_3_TO_4`,
:data:`_UPGRADE_4_TO_5`, :data:`_UPGRADE_5_TO_6`); rows saved
before the upgrade get ``created_at`` NULL (unknown) and
``saved_at`` the upgrade's time (no earlier than their real last save, so that ``durable prune
--older-than`` never takes them for older than they are). A Durable that knows only an older
version then refuses the schema ("made by a newer Durable") instead of writing rows it cannot
keep.

:func:`ensure_schema` creates the schema when it is absent (or present and empty) and then
checks that the schema holds exactly these objects: any other table, column, index, view,
sequence, function, type, trigger, rule, policy, constraint or inheritance link in or on it is
refused with :class:`~durable_core.errors.SchemaError` naming it. Creation and upgrade run
under a transaction-level advisory lock, so several processes may construct stores at once.
"""

from __future__ import annotations

import re

import psycopg

from durable_core._words import a
from durable_core.errors import SchemaError
from durable_postgresstore.keys import SCHEMA_INIT_KEY

__all__ = ["SCHEMA", "SCHEMA_VERSION", "ensure_schema"]

SCHEMA = "pulse_durable"
"""The name of the dedicated schema."""

SCHEMA_VERSION = 6
"""The version of the tables this store creates and accepts (older ones are upgraded)."""

_MAX_REVISION = 2**64 - 1

_RUNS_V1 = f"""
    CREATE TABLE {SCHEMA}.runs (
        run_id BYTEA NOT NULL,
        revision NUMERIC(20, 0) NOT NULL,
        format INTEGER NOT NULL,
        record BYTEA NOT NULL,
        CONSTRAINT runs_pkey PRIMARY KEY (run_id),
        CONSTRAINT runs_run_id_check CHECK (octet_length(run_id) > 0),
        CONSTRAINT runs_revision_check
            CHECK (revision >= 1 AND revision <= {_MAX_REVISION})
    )
    """

_RUNS = f"""
    CREATE TABLE {SCHEMA}.runs (
        run_id BYTEA NOT NULL,
        revision NUMERIC(20, 0) NOT NULL,
        format INTEGER NOT NULL,
        record BYTEA NOT NULL,
        run_key BYTEA NOT NULL,
        CONSTRAINT runs_pkey PRIMARY KEY (run_key),
        CONSTRAINT runs_run_id_check CHECK (octet_length(run_id) > 0),
        CONSTRAINT runs_revision_check
            CHECK (revision >= 1 AND revision <= {_MAX_REVISION}),
        CONSTRAINT runs_run_key_check CHECK (run_key = sha256(run_id))
    )
    """

_RUNS_V4 = f"""
    CREATE TABLE {SCHEMA}.runs (
        run_id BYTEA NOT NULL,
        revision NUMERIC(20, 0) NOT NULL,
        format INTEGER NOT NULL,
        record BYTEA NOT NULL,
        run_key BYTEA NOT NULL,
        created_at TIMESTAMPTZ,
        saved_at TIMESTAMPTZ,
        CONSTRAINT runs_pkey PRIMARY KEY (run_key),
        CONSTRAINT runs_run_id_check CHECK (octet_length(run_id) > 0),
        CONSTRAINT runs_revision_check
            CHECK (revision >= 1 AND revision <= {_MAX_REVISION}),
        CONSTRAINT runs_run_key_check CHECK (run_key = sha256(run_id))
    )
    """

_DELTAS = f"""
    CREATE TABLE {SCHEMA}.deltas (
        run_key BYTEA NOT NULL,
        base NUMERIC(20, 0) NOT NULL,
        delta BYTEA NOT NULL,
        CONSTRAINT deltas_pkey PRIMARY KEY (run_key, base),
        CONSTRAINT deltas_base_check CHECK (base >= 1 AND base <= {_MAX_REVISION})
    )
    """

_HISTORY = f"""
    CREATE TABLE {SCHEMA}.history (
        run_key BYTEA NOT NULL,
        seq BIGINT NOT NULL,
        root_scope TEXT NOT NULL,
        entry TEXT NOT NULL,
        CONSTRAINT history_pkey PRIMARY KEY (run_key, seq)
    )
    """

_INBOX = f"""
    CREATE TABLE {SCHEMA}.inbox (
        run_key BYTEA NOT NULL,
        inbox TEXT NOT NULL,
        seq BIGINT NOT NULL,
        idempotency_key TEXT,
        payload BYTEA NOT NULL,
        posted_at DOUBLE PRECISION NOT NULL,
        CONSTRAINT inbox_pkey PRIMARY KEY (run_key, inbox, seq)
    )
    """

_INBOX_IDEMPOTENCY = (
    f"CREATE UNIQUE INDEX inbox_idempotency ON {SCHEMA}.inbox "
    "USING btree (run_key, inbox, idempotency_key)"
)

_INBOX_LAST = f"""
    CREATE TABLE {SCHEMA}.inbox_last (
        run_key BYTEA NOT NULL,
        inbox TEXT NOT NULL,
        last BIGINT NOT NULL,
        dropped BIGINT NOT NULL,
        CONSTRAINT inbox_last_pkey PRIMARY KEY (run_key, inbox)
    )
    """

_WAITING = f"""
    CREATE TABLE {SCHEMA}.waiting (
        run_key BYTEA NOT NULL,
        run_id BYTEA NOT NULL,
        note TEXT NOT NULL,
        CONSTRAINT waiting_pkey PRIMARY KEY (run_key)
    )
    """

_INBOX_DDL = (_INBOX, _INBOX_IDEMPOTENCY, _INBOX_LAST, _WAITING)

_VERSION_TABLE = f"""
    CREATE TABLE {SCHEMA}.schema_version (
        version INTEGER NOT NULL,
        CONSTRAINT schema_version_pkey PRIMARY KEY (version)
    )
    """


def _ddl(version: int) -> tuple[str, ...]:
    runs = _RUNS_V1 if version == 1 else _RUNS if version < 4 else _RUNS_V4
    return (
        runs,
        *((_DELTAS,) if version >= 3 else ()),
        *((_HISTORY,) if version >= 5 else ()),
        *(_INBOX_DDL if version >= 6 else ()),
        _VERSION_TABLE,
        f"INSERT INTO {SCHEMA}.schema_version (version) VALUES ({version})",
    )


_UPGRADE_1_TO_2 = (
    # The run id was the primary key: a btree on the whole id, which refuses ids longer than
    # about 2.7 KB. Version 2 keys rows by the id's SHA-256 and keeps the id itself exact.
    f"ALTER TABLE {SCHEMA}.runs ADD COLUMN run_key BYTEA",
    f"UPDATE {SCHEMA}.runs SET run_key = sha256(run_id)",
    f"ALTER TABLE {SCHEMA}.runs ALTER COLUMN run_key SET NOT NULL",
    f"ALTER TABLE {SCHEMA}.runs DROP CONSTRAINT runs_pkey",
    f"ALTER TABLE {SCHEMA}.runs ADD CONSTRAINT runs_pkey PRIMARY KEY (run_key)",
    f"ALTER TABLE {SCHEMA}.runs ADD CONSTRAINT runs_run_key_check CHECK (run_key = sha256(run_id))",
    f"UPDATE {SCHEMA}.schema_version SET version = 2",
)

_UPGRADE_2_TO_3 = (
    # Version 3 adds the table of deltas saved since each run's complete record.
    _DELTAS,
    f"UPDATE {SCHEMA}.schema_version SET version = 3",
)

_UPGRADE_3_TO_4 = (
    # Version 4 adds when each run was created and last saved. Earlier rows: created unknown,
    # saved no later than now (an upper bound, so that an age is never overstated).
    f"ALTER TABLE {SCHEMA}.runs ADD COLUMN created_at TIMESTAMPTZ, ADD COLUMN saved_at TIMESTAMPTZ",
    f"UPDATE {SCHEMA}.runs SET saved_at = now()",
    f"UPDATE {SCHEMA}.schema_version SET version = 4",
)

_UPGRADE_4_TO_5 = (
    # Version 5 adds the runs' histories.
    _HISTORY,
    f"UPDATE {SCHEMA}.schema_version SET version = 5",
)

_UPGRADE_5_TO_6 = (
    # Version 6 adds the runs' inboxes and waiting notes.
    *_INBOX_DDL,
    f"UPDATE {SCHEMA}.schema_version SET version = 6",
)

# The expected shape of each version, as PostgreSQL's catalog functions print it.
_VERSION_COLUMNS = (("version", "integer"),)
_RUNS_COLUMNS_V1 = (
    ("run_id", "bytea"),
    ("revision", "numeric(20,0)"),
    ("format", "integer"),
    ("record", "bytea"),
)
_COMMON_CONSTRAINTS: dict[tuple[str, str], str] = {
    ("runs", "runs_run_id_check"): "CHECK ((octet_length(run_id) > 0))",
    ("runs", "runs_revision_check"): (
        f"CHECK (((revision >= (1)::numeric) AND (revision <= '{_MAX_REVISION}'::numeric)))"
    ),
    ("schema_version", "schema_version_pkey"): "PRIMARY KEY (version)",
}
_VERSION_INDEX = (
    f"CREATE UNIQUE INDEX schema_version_pkey ON {SCHEMA}.schema_version USING btree (version)"
)


class _Shape:
    """What one version of the schema holds."""

    def __init__(
        self,
        columns: dict[str, tuple[tuple[str, str], ...]],
        constraints: dict[tuple[str, str], str],
        indexes: dict[str, str],
        nullable: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self.tables = tuple(columns)
        self.columns = columns
        self.constraints = constraints
        self.indexes = indexes
        self.nullable = nullable  # (table, column): may hold NULL (every other one may not)


_V2_CONSTRAINTS = {
    **_COMMON_CONSTRAINTS,
    ("runs", "runs_pkey"): "PRIMARY KEY (run_key)",
    ("runs", "runs_run_key_check"): "CHECK ((run_key = sha256(run_id)))",
}
_V2_INDEXES = {
    "runs_pkey": f"CREATE UNIQUE INDEX runs_pkey ON {SCHEMA}.runs USING btree (run_key)",
    "schema_version_pkey": _VERSION_INDEX,
}
_V2_COLUMNS = {
    "runs": (*_RUNS_COLUMNS_V1, ("run_key", "bytea")),
    "schema_version": _VERSION_COLUMNS,
}

_V3_COLUMNS = {
    "runs": _V2_COLUMNS["runs"],
    "deltas": (("run_key", "bytea"), ("base", "numeric(20,0)"), ("delta", "bytea")),
    "schema_version": _VERSION_COLUMNS,
}
_V3_CONSTRAINTS = {
    **_V2_CONSTRAINTS,
    ("deltas", "deltas_pkey"): "PRIMARY KEY (run_key, base)",
    ("deltas", "deltas_base_check"): (
        f"CHECK (((base >= (1)::numeric) AND (base <= '{_MAX_REVISION}'::numeric)))"
    ),
}
_V3_INDEXES = {
    **_V2_INDEXES,
    "deltas_pkey": (
        f"CREATE UNIQUE INDEX deltas_pkey ON {SCHEMA}.deltas USING btree (run_key, base)"
    ),
}
_TIMESTAMP = "timestamp with time zone"

_V4_COLUMNS = {
    **_V3_COLUMNS,
    "runs": (*_V3_COLUMNS["runs"], ("created_at", _TIMESTAMP), ("saved_at", _TIMESTAMP)),
}
_V4_NULLABLE = frozenset({("runs", "created_at"), ("runs", "saved_at")})

_V5_COLUMNS = {
    **_V4_COLUMNS,
    "history": (
        ("run_key", "bytea"),
        ("seq", "bigint"),
        ("root_scope", "text"),
        ("entry", "text"),
    ),
}
_V5_CONSTRAINTS = {**_V3_CONSTRAINTS, ("history", "history_pkey"): "PRIMARY KEY (run_key, seq)"}
_V5_INDEXES = {
    **_V3_INDEXES,
    "history_pkey": (
        f"CREATE UNIQUE INDEX history_pkey ON {SCHEMA}.history USING btree (run_key, seq)"
    ),
}

_SHAPES = {
    1: _Shape(
        {"runs": _RUNS_COLUMNS_V1, "schema_version": _VERSION_COLUMNS},
        {**_COMMON_CONSTRAINTS, ("runs", "runs_pkey"): "PRIMARY KEY (run_id)"},
        {
            "runs_pkey": f"CREATE UNIQUE INDEX runs_pkey ON {SCHEMA}.runs USING btree (run_id)",
            "schema_version_pkey": _VERSION_INDEX,
        },
    ),
    2: _Shape(_V2_COLUMNS, _V2_CONSTRAINTS, _V2_INDEXES),
    3: _Shape(_V3_COLUMNS, _V3_CONSTRAINTS, _V3_INDEXES),
    4: _Shape(_V4_COLUMNS, _V3_CONSTRAINTS, _V3_INDEXES, nullable=_V4_NULLABLE),
    5: _Shape(_V5_COLUMNS, _V5_CONSTRAINTS, _V5_INDEXES, nullable=_V4_NULLABLE),
    6: _Shape(
        {
            **_V5_COLUMNS,
            "inbox": (
                ("run_key", "bytea"),
                ("inbox", "text"),
                ("seq", "bigint"),
                ("idempotency_key", "text"),
                ("payload", "bytea"),
                ("posted_at", "double precision"),
            ),
            "inbox_last": (
                ("run_key", "bytea"),
                ("inbox", "text"),
                ("last", "bigint"),
                ("dropped", "bigint"),
            ),
            "waiting": (("run_key", "bytea"), ("run_id", "bytea"), ("note", "text")),
        },
        {
            **_V5_CONSTRAINTS,
            ("inbox", "inbox_pkey"): "PRIMARY KEY (run_key, inbox, seq)",
            ("inbox_last", "inbox_last_pkey"): "PRIMARY KEY (run_key, inbox)",
            ("waiting", "waiting_pkey"): "PRIMARY KEY (run_key)",
        },
        {
            **_V5_INDEXES,
            "inbox_pkey": (
                f"CREATE UNIQUE INDEX inbox_pkey ON {SCHEMA}.inbox USING btree "
                "(run_key, inbox, seq)"
            ),
            "inbox_idempotency": _INBOX_IDEMPOTENCY,
            "inbox_last_pkey": (
                f"CREATE UNIQUE INDEX inbox_last_pkey ON {SCHEMA}.inbox_last USING btree "
                "(run_key, inbox)"
            ),
            "waiting_pkey": (
                f"CREATE UNIQUE INDEX waiting_pkey ON {SCHEMA}.waiting USING btree (run_key)"
            ),
        },
        nullable=_V4_NULLABLE | {("inbox", "idempotency_key")},
    ),
}


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def ensure_schema(conn: psycopg.Connection) -> None:
    """Create the ``pulse_durable`` schema if needed, upgrade an older one, then check it strictly.

    Runs one transaction holding a transaction-level advisory lock, so concurrent constructors
    in several processes serialize: the first creates (or upgrades), the others only check.

    A schema that is exactly version 1 to 5 (made by an earlier Durable) is upgraded to
    version 6 in that same transaction: from version 1 the rows get their ``run_key`` (the
    SHA-256 of the run id), which becomes the primary key; from version 2 the ``deltas`` table is
    added; from version 3 the ``created_at`` and ``saved_at`` columns (earlier rows: created
    NULL, saved at the upgrade's time); from version 4 the ``history`` table; from version 5
    the inbox tables. Anything else that is not exactly version 6 is refused unchanged.

    Args:
        conn: an open autocommit connection, idle.

    Raises:
        SchemaError: the schema exists but is not exactly Durable's tables (version 1 to 6);
            the message names every unexpected, missing or altered object. Nothing is changed.
        psycopg.Error: the database refused or failed (e.g. no CREATE privilege).
    """
    with conn.transaction():
        conn.execute("SELECT pg_catalog.pg_advisory_xact_lock(%s::bigint)", [SCHEMA_INIT_KEY])
        row = conn.execute(
            "SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = %s", [SCHEMA]
        ).fetchone()
        if row is None:
            conn.execute(f"CREATE SCHEMA {SCHEMA}")
            for statement in _ddl(SCHEMA_VERSION):
                conn.execute(statement)
        elif not _members(conn, row[0]):
            # An empty schema prepared by an administrator (e.g. with its grants): fill it.
            for statement in _ddl(SCHEMA_VERSION):
                conn.execute(statement)
        else:
            version = _stored_version(conn)
            upgrades = {
                1: (
                    *_UPGRADE_1_TO_2,
                    *_UPGRADE_2_TO_3,
                    *_UPGRADE_3_TO_4,
                    *_UPGRADE_4_TO_5,
                    *_UPGRADE_5_TO_6,
                ),
                2: (*_UPGRADE_2_TO_3, *_UPGRADE_3_TO_4, *_UPGRADE_4_TO_5, *_UPGRADE_5_TO_6),
                3: (*_UPGRADE_3_TO_4, *_UPGRADE_4_TO_5, *_UPGRADE_5_TO_6),
                4: (*_UPGRADE_4_TO_5, *_UPGRADE_5_TO_6),
                5: _UPGRADE_5_TO_6,
            }
            if version in upgrades and not check_schema(conn, version=version):
                for statement in upgrades[version]:
                    conn.execute(statement)
        problems = check_schema(conn)
    if problems:
        raise SchemaError(
            f"the PostgreSQL schema {SCHEMA!r} is not the one Durable expects (version "
            f"{SCHEMA_VERSION}): " + "; ".join(problems) + ". Durable never alters a schema it "
            f"did not create and keeps nothing else in {SCHEMA!r}: remove the extra objects, "
            "or give Durable a database where the schema is its own"
        )


def _stored_version(conn: psycopg.Connection) -> int | None:
    """The single version in ``schema_version``, or ``None`` when it cannot be read as one."""
    exists = conn.execute(
        "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = %s AND tablename = 'schema_version'",
        [SCHEMA],
    ).fetchone()
    if exists is None:
        return None
    try:
        with conn.transaction():
            rows = conn.execute(f"SELECT version FROM {SCHEMA}.schema_version").fetchall()
    except psycopg.Error:
        return None
    return rows[0][0] if len(rows) == 1 and isinstance(rows[0][0], int) else None


def _members(conn: psycopg.Connection, namespace_oid: int) -> list[tuple[str, str, int]]:
    """Every object depending on the namespace: (catalog, description, oid)."""
    rows = conn.execute(
        """
        SELECT d.classid::regclass::text, pg_catalog.pg_describe_object(d.classid, d.objid, 0),
               d.objid::bigint
        FROM pg_catalog.pg_depend d
        WHERE d.refclassid = 'pg_catalog.pg_namespace'::regclass AND d.refobjid = %s::oid
        ORDER BY 2
        """,
        [namespace_oid],
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def check_schema(conn: psycopg.Connection, version: int = SCHEMA_VERSION) -> list[str]:
    """Compare the schema with ``version``; return the problems found (empty when exact).

    Args:
        conn: an open connection (any transaction state that allows reading the catalogs).
        version: the version to compare with (1 to 6).

    Returns:
        Human-readable problems, each naming one object.
    """
    row = conn.execute(
        "SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = %s", [SCHEMA]
    ).fetchone()
    if row is None:
        return [f"schema {SCHEMA} is missing"]
    ns = row[0]
    shape = _SHAPES[version]
    problems: list[str] = []

    # Relations in the schema: exactly the two tables and their primary-key indexes.
    relations = {
        name: (kind, persistence, oid, rowtype, toast, rls, force_rls, partition)
        for name, kind, persistence, oid, rowtype, toast, rls, force_rls, partition in (
            conn.execute(
                """
                SELECT relname, relkind::text, relpersistence::text, oid::bigint,
                       reltype::bigint, reltoastrelid::bigint, relrowsecurity,
                       relforcerowsecurity, relispartition
                FROM pg_catalog.pg_class WHERE relnamespace = %s::oid
                """,
                [ns],
            ).fetchall()
        )
    }
    expected_kinds = {**dict.fromkeys(shape.tables, "r"), **dict.fromkeys(shape.indexes, "i")}
    kind_names = {
        "r": "table",
        "p": "partitioned table",
        "i": "index",
        "I": "partitioned index",
        "S": "sequence",
        "v": "view",
        "m": "materialized view",
        "c": "composite type",
        "f": "foreign table",
        "t": "TOAST table",
    }
    for name in sorted(relations):
        kind, persistence, *_ = relations[name]
        want = expected_kinds.get(name)
        if want is None:
            problems.append(f"unexpected {kind_names.get(kind, 'relation')} {SCHEMA}.{name}")
        elif kind != want:
            problems.append(
                f"{SCHEMA}.{name} is {a(kind_names.get(kind, kind))}, "
                f"expected {a(kind_names[want])}"
            )
        elif persistence != "p":
            problems.append(
                f"{kind_names[kind]} {SCHEMA}.{name} is "
                f"{'unlogged' if persistence == 'u' else 'temporary'}, expected a logged one"
            )
    for name in sorted(expected_kinds):
        if name not in relations:
            problems.append(f"missing {kind_names[expected_kinds[name]]} {SCHEMA}.{name}")
    tables = {
        name: relations[name]
        for name in shape.tables
        if name in relations and relations[name][0] == "r"
    }
    table_oids = [t[2] for t in tables.values()]

    # Any other object in the schema (functions, types, domains, operators, statistics …).
    table_oid_set = set(table_oids) | {relations[n][2] for n in relations}
    for catalog, description, oid in _members(conn, ns):
        if catalog == "pg_class" and oid in table_oid_set:
            continue  # relations were checked above
        problems.append(f"unexpected {description}")

    # Columns, in order, with types, NOT NULL, and no defaults, identity or generation.
    exact_columns: set[str] = set()
    for name, info in tables.items():
        columns = conn.execute(
            """
            SELECT attname, pg_catalog.format_type(atttypid, atttypmod), attnotnull,
                   atthasdef, attidentity::text, attgenerated::text
            FROM pg_catalog.pg_attribute
            WHERE attrelid = %s::oid AND attnum > 0 AND NOT attisdropped ORDER BY attnum
            """,
            [info[2]],
        ).fetchall()
        expected = dict(shape.columns[name])
        found = {c[0] for c in columns}
        for col, typ, notnull, hasdef, identity, generated in columns:
            where = f"column {SCHEMA}.{name}.{col}"
            if col not in expected:
                problems.append(f"unexpected {where} ({typ})")
                continue
            if typ != expected[col]:
                problems.append(f"{where} has type {typ}, expected {expected[col]}")
            if (name, col) in shape.nullable:
                if notnull:
                    problems.append(f"{where} is NOT NULL, expected to allow NULL")
            elif not notnull:
                problems.append(f"{where} allows NULL, expected NOT NULL")
            if hasdef or identity or generated:
                problems.append(f"{where} has a default, identity or generation expression")
        for col, typ in shape.columns[name]:
            if col not in found:
                problems.append(f"missing column {SCHEMA}.{name}.{col} ({typ})")
        if [c[0] for c in columns if c[0] in expected] != [
            c for c, _ in shape.columns[name] if c in found
        ]:
            problems.append(f"the columns of {SCHEMA}.{name} are not in the expected order")
        if [(c[0], c[1]) for c in columns] == list(shape.columns[name]):
            exact_columns.add(name)
        _, _, _, _, _, rls, force_rls, partition = info
        if rls or force_rls:
            problems.append(f"table {SCHEMA}.{name} has row-level security enabled")
        if partition:
            problems.append(f"table {SCHEMA}.{name} is a partition of another table")

    if not table_oids:
        return problems

    # Constraints on the tables.
    constraints = {
        (table, name): (oid, _norm(definition))
        for table, name, oid, definition in conn.execute(
            """
            SELECT c.relname, k.conname, k.oid::bigint, pg_catalog.pg_get_constraintdef(k.oid)
            FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class c ON c.oid = k.conrelid
            WHERE k.conrelid::bigint = ANY(%s::bigint[])
            """,
            [table_oids],
        ).fetchall()
    }
    for key in sorted(constraints):
        table, name = key
        oid, definition = constraints[key]
        want = shape.constraints.get(key)
        if want is None:
            problems.append(f"unexpected constraint {name} on {SCHEMA}.{table}: {definition}")
        elif definition != _norm(want):
            problems.append(
                f"constraint {name} on {SCHEMA}.{table} is {definition!r}, expected {want!r}"
            )
    for table, name in sorted(shape.constraints):
        if table in tables and (table, name) not in constraints:
            problems.append(f"missing constraint {name} on {SCHEMA}.{table}")

    # Index definitions (extra indexes were already reported as unexpected relations).
    for name, want in shape.indexes.items():
        if name in relations and relations[name][0] == "i":
            definition = conn.execute(
                "SELECT pg_catalog.pg_get_indexdef(%s::oid)", [relations[name][2]]
            ).fetchone()
            if definition is None or _norm(definition[0]) != _norm(want):
                found_def = definition[0] if definition else "?"
                problems.append(f"index {SCHEMA}.{name} is {found_def!r}, expected {want!r}")

    # Objects hanging on the tables: triggers, rules (views elsewhere), policies, defaults,
    # sequences owned by a column, child tables … Only the row types, TOAST tables and the
    # expected constraints belong there.
    allowed = {t[3] for t in tables.values()} | {t[4] for t in tables.values()}
    allowed |= {oid for oid, _ in constraints.values()}
    allowed |= {info[2] for info in relations.values()}  # extra indexes: reported above
    for (description,) in conn.execute(
        """
        SELECT DISTINCT pg_catalog.pg_describe_object(d.classid, d.objid, 0)
        FROM pg_catalog.pg_depend d
        WHERE d.refclassid = 'pg_catalog.pg_class'::regclass
          AND d.refobjid::bigint = ANY(%s::bigint[])
          AND NOT (d.objid::bigint = ANY(%s::bigint[]))
        ORDER BY 1
        """,
        [table_oids, sorted(allowed)],
    ).fetchall():
        problems.append(f"unexpected {description} on Durable's tables")

    # Inheritance links in either direction.
    for child, parent in conn.execute(
        """
        SELECT inhrelid::regclass::text, inhparent::regclass::text FROM pg_catalog.pg_inherits
        WHERE inhrelid::bigint = ANY(%s::bigint[]) OR inhparent::bigint = ANY(%s::bigint[])
        """,
        [table_oids, table_oids],
    ).fetchall():
        problems.append(f"unexpected inheritance: {child} inherits from {parent}")

    if "schema_version" in exact_columns:
        versions = [
            r[0] for r in conn.execute(f"SELECT version FROM {SCHEMA}.schema_version").fetchall()
        ]
        if versions != [version]:
            problems.append(
                f"{SCHEMA}.schema_version holds {versions}, expected [{version}]"
                + (
                    " (made by a newer Durable: upgrade durable-postgresstore)"
                    if versions and max(versions) > SCHEMA_VERSION
                    else ""
                )
            )
    return problems
