"""The SQL of :class:`~durable_postgresstore.store.PostgresStore`, as named constants (B-PG-1…3).

Every statement a store or session sends besides the schema's own (which
:mod:`durable_postgresstore.schema` holds): loads, saves (the revision and row-version
compare-and-swap in one statement), deletes, the deltas and their fold, the runs' times and
histories, the advisory locks, the TCP keepalives and the stop requests. Parameters are
psycopg placeholders (``%s``, and ``%b`` for bytes). The three statements of a save are also
kept as :class:`Prepared` statements (``$n`` placeholders), which a session's connection
prepares once and then runs with its parameters alone (see
:meth:`~durable_postgresstore._connections.Link.run`).
"""

from __future__ import annotations

import re

from durable_postgresstore.schema import SCHEMA

__all__ = [
    "ALL_DELTAS",
    "APPEND",
    "CANCEL_CHANNEL",
    "DELETE",
    "DELTAS",
    "FOLD",
    "HAS_DELTAS",
    "HISTORY_APPEND",
    "HISTORY_LOCK",
    "HISTORY_READ",
    "INSERT",
    "KEEPALIVES",
    "LIST",
    "LISTEN",
    "LOCK",
    "NOTIFY",
    "OWNER",
    "REVISION",
    "ROW_VERSION",
    "SAVE_APPEND",
    "SAVE_INSERT",
    "SAVE_UPDATE",
    "SELECT",
    "SET_TIMES",
    "TIMES",
    "TOAST_COMPRESSION",
    "UNLOCK",
    "UPDATE",
    "Prepared",
]

# Rows are found by run_key = sha256(run_id), which the table's CHECK keeps true. Bytes go as
# binary parameters (%b): a record of megabytes is sent as it is, not as hex text.
#
# The row version: every statement that writes a row gives it a new ``xmin`` (the id of the
# writing transaction), whoever wrote it and whatever column changed. A session remembers the
# ``xmin`` of its last load or save, as text, and its saves match it besides the revision
# (``coalesce``: ``NULL`` when the session knows none), so a row rewritten by anyone else since
# (an ``UPDATE`` of the record that keeps the revision) is never overwritten. VACUUM's freezing
# keeps ``xmin`` as it was; a row lock (``SELECT … FOR UPDATE``) does not change it.
SELECT = f"SELECT revision, record, xmin::text FROM {SCHEMA}.runs WHERE run_key = %s"
INSERT = (
    f"INSERT INTO {SCHEMA}.runs (run_id, revision, format, record, run_key, created_at, saved_at) "
    "VALUES (%b, %s::numeric, %s, %b, %b, now(), now()) ON CONFLICT (run_key) DO NOTHING "
    "RETURNING xmin::text"
)
# A whole save: the complete record, and the deltas it makes obsolete gone, in one statement;
# the new row version back (no row: not written).
UPDATE = (
    f"WITH cas AS (UPDATE {SCHEMA}.runs SET revision = %s::numeric, format = %s, record = %b, "
    "saved_at = now() WHERE run_key = %b AND revision = %s::numeric "
    "AND xmin = coalesce(%s::text::xid, xmin) RETURNING run_key, xmin::text AS version), "
    f"gone AS (DELETE FROM {SCHEMA}.deltas WHERE run_key IN (SELECT run_key FROM cas)) "
    "SELECT version FROM cas"
)
# A delta save: the revision moves (the record's TOASTed bytes are not rewritten) and the
# delta is added, in one statement; the new row version back (no row: not written).
APPEND = (
    f"WITH cas AS (UPDATE {SCHEMA}.runs SET revision = %s::numeric, saved_at = now() "
    "WHERE run_key = %b AND revision = %s::numeric AND xmin = coalesce(%s::text::xid, xmin) "
    "RETURNING run_key, xmin::text AS version), "
    f"added AS (INSERT INTO {SCHEMA}.deltas (run_key, base, delta) "
    "SELECT run_key, %s::numeric, %b FROM cas) "
    "SELECT version FROM cas"
)
# Why a save found no row to write: the stored revision and row version.
ROW_VERSION = f"SELECT revision, xmin::text FROM {SCHEMA}.runs WHERE run_key = %s"
# Deleting a run: its row, its deltas, its history and its inbox, in one statement.
DELETE = (
    f"WITH gone AS (DELETE FROM {SCHEMA}.runs WHERE run_key = %s RETURNING run_key), "
    f"deltas AS (DELETE FROM {SCHEMA}.deltas WHERE run_key IN (SELECT run_key FROM gone)), "
    f"history AS (DELETE FROM {SCHEMA}.history WHERE run_key IN (SELECT run_key FROM gone)), "
    f"inbox AS (DELETE FROM {SCHEMA}.inbox WHERE run_key IN (SELECT run_key FROM gone)), "
    f"inbox_last AS (DELETE FROM {SCHEMA}.inbox_last WHERE run_key IN "
    "(SELECT run_key FROM gone)), "
    f"waiting AS (DELETE FROM {SCHEMA}.waiting WHERE run_key IN (SELECT run_key FROM gone)) "
    "SELECT count(*) FROM gone"
)
# A run's history: entries numbered after the run's last one (under history_key's lock).
HISTORY_LOCK = "SELECT pg_catalog.pg_advisory_xact_lock(%s::bigint)"
HISTORY_APPEND = (
    f"INSERT INTO {SCHEMA}.history (run_key, seq, root_scope, entry) "
    f"SELECT %b, coalesce((SELECT max(seq) FROM {SCHEMA}.history WHERE run_key = %b), 0) + t.n, "
    "%s, t.e FROM unnest(%s::text[]) WITH ORDINALITY AS t(e, n)"
)
HISTORY_READ = (
    f"SELECT entry FROM {SCHEMA}.history WHERE run_key = %b AND root_scope = %s ORDER BY seq"
)
# Stop requests: a notification to the owner's listening connection.
CANCEL_CHANNEL = "durable_cancel"
NOTIFY = "SELECT pg_catalog.pg_notify(%s, %s)"
LISTEN = f"LISTEN {CANCEL_CHANNEL}"
DELTAS = f"SELECT base, delta FROM {SCHEMA}.deltas WHERE run_key = %s ORDER BY base"
HAS_DELTAS = f"SELECT count(*) FROM {SCHEMA}.deltas WHERE run_key = %s"
ALL_DELTAS = f"SELECT run_key, base, delta FROM {SCHEMA}.deltas ORDER BY run_key, base"
# Fold on close: the complete record at the head revision, while the row still has the version
# this session's last save left (NULL: no version known, the revision alone decides); the
# deltas gone.
FOLD = (
    f"WITH upd AS (UPDATE {SCHEMA}.runs SET record = %b WHERE run_key = %b "
    "AND revision = %s::numeric AND xmin = coalesce(%s::text::xid, xmin) RETURNING run_key), "
    f"gone AS (DELETE FROM {SCHEMA}.deltas WHERE run_key IN (SELECT run_key FROM upd)) "
    "SELECT count(*) FROM upd"
)
REVISION = f"SELECT revision FROM {SCHEMA}.runs WHERE run_key = %s"
TIMES = f"SELECT created_at, saved_at FROM {SCHEMA}.runs WHERE run_key = %s"
SET_TIMES = (
    f"UPDATE {SCHEMA}.runs SET created_at = %s, saved_at = coalesce(%s, saved_at) "
    "WHERE run_key = %s RETURNING xmin::text"
)
LIST = f"SELECT run_id, revision, record, run_key FROM {SCHEMA}.runs"
# The lock and, only when it was granted, the owner's name in application_name: one round trip.
# (A subquery with a volatile function is evaluated once, before the outer CASE.)
LOCK = (
    "SELECT l.got, CASE WHEN l.got THEN pg_catalog.set_config('application_name', %s, false) "
    "END FROM (SELECT pg_catalog.pg_try_advisory_lock(%s::bigint) AS got) AS l"
)
# The unlock, and the connection's own application_name back.
UNLOCK = (
    "SELECT pg_catalog.pg_advisory_unlock(%s::bigint), "
    "pg_catalog.set_config('application_name', (SELECT reset_val FROM pg_catalog.pg_settings "
    "WHERE name = 'application_name'), false)"
)
# Server-side TCP keepalives of this connection (seconds; tcp_user_timeout in milliseconds):
# the server drops the session of a client that vanished from the network, and its advisory
# locks with it. Ignored on unix sockets.
KEEPALIVES = (
    "SELECT pg_catalog.set_config('tcp_keepalives_idle', %s, false), "
    "pg_catalog.set_config('tcp_keepalives_interval', %s, false), "
    "pg_catalog.set_config('tcp_keepalives_count', %s, false), "
    "pg_catalog.set_config('tcp_user_timeout', %s, false)"
)
# The server session holding a run's advisory lock, in this database (see keys.py).
OWNER = (
    "SELECT a.pid, a.application_name, pg_catalog.host(a.client_addr), a.client_hostname "
    "FROM pg_catalog.pg_locks AS l JOIN pg_catalog.pg_stat_activity AS a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
    "AND l.database = (SELECT oid FROM pg_catalog.pg_database "
    "WHERE datname = pg_catalog.current_database()) "
    "AND ((l.classid::bigint << 32) | l.objid::bigint) = %s::bigint"
)
# TOAST compression of this connection's writes (a record of more than about 2 kB is
# compressed as the server stores it): lz4, several times faster than the default pglz on both
# compressing and reading back, when the server was built with it and the setting is still the
# built-in default (an administrator's or the DSN's choice is kept). Values already stored keep
# their method; every reader decompresses either.
TOAST_COMPRESSION = (
    "SELECT pg_catalog.set_config('default_toast_compression', 'lz4', false) "
    "FROM pg_catalog.pg_settings WHERE name = 'default_toast_compression' "
    "AND source = 'default' AND 'lz4' = ANY (enumvals)"
)


class Prepared:
    """A statement prepared on a connection under its own name, then run with its parameters
    only: the server neither parses nor plans it again, and the client sends no SQL text.

    Made from a psycopg query: each ``%s`` becomes a text parameter whose type the server
    infers from the statement (every one here is cast or compared with a column), each ``%b``
    a binary ``bytea`` parameter.
    """

    __slots__ = ("formats", "name", "text", "types")

    def __init__(self, name: str, query: str) -> None:
        kinds = re.findall(r"%[sb]", query)
        numbers = iter(range(1, len(kinds) + 1))
        self.name = name.encode("ascii")
        self.text = re.sub(r"%[sb]", lambda _: f"${next(numbers)}", query).encode("utf-8")
        self.types = [_BYTEA if kind == "%b" else 0 for kind in kinds]
        self.formats = [1 if kind == "%b" else 0 for kind in kinds]

    def __repr__(self) -> str:
        return f"<Prepared {self.name.decode()}>"


_BYTEA = 17  # pg_type oid

SAVE_INSERT = Prepared("durable_save_insert", INSERT)
SAVE_APPEND = Prepared("durable_save_append", APPEND)
SAVE_UPDATE = Prepared("durable_save_update", UPDATE)
