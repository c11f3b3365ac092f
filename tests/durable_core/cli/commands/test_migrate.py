"""``durable migrate`` between every pair of file, SQLite and PostgreSQL stores: revisions kept,
integrity checked first, nothing overwritten; a round trip gives byte-identical records."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from click.testing import CliRunner

from durable_core.cli import ExitCode, cli
from durable_core.config import parse_store_url
from durable_core.records import AttemptState
from durable_core.store.locks import run_key
from tests.durable_core.cli.stores_support import postgres_url

KINDS = ["file", "sqlite", "postgres"]

pytestmark = pytest.mark.postgres


@pytest.fixture
def urls(tmp_path, postgres_dsn):
    return {
        "file": f"file://{tmp_path / 'runs'}",
        "file2": f"file://{tmp_path / 'runs2'}",
        "sqlite": f"sqlite://{tmp_path / 'db' / 'runs.sqlite'}",
        "postgres": postgres_url(postgres_dsn),
    }


def cli_json(*args: str, code: int = 0):
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def seed(url: str, *run_ids: str) -> None:
    from tests.durable_core.cli.test_stores import make_record, save

    for run_id in run_ids:
        record = make_record(run_id, shard_state=AttemptState.ACTIVE, merge_done=False)
        save(url, record)


def stored(url: str, run_id: str):
    store = parse_store_url(url).open()
    try:
        with store.acquire(run_id) as session:
            return session.load()
    finally:
        store.close()


@pytest.mark.parametrize(("source", "destination"), list(itertools.permutations(KINDS, 2)))
def test_migrate_between_every_pair_keeps_revisions(urls, source, destination):
    seed(urls[source], "m-1", "m-2")
    store = parse_store_url(urls[source]).open()
    try:
        with store.acquire("m-2") as session:  # a second revision
            record = session.load()
            record.revision = 2
            session.save(record, 1)
    finally:
        store.close()
    moved = cli_json("migrate", "--from", urls[source], "--to", urls[destination])
    assert [(r["run_id"], r["revision"], r["outcome"]) for r in moved["runs"]] == [
        ("m-1", 1, "copied"),
        ("m-2", 2, "copied"),
    ]
    for run_id in ("m-1", "m-2"):
        assert stored(urls[destination], run_id) == stored(urls[source], run_id)
    listed = cli_json("list", "--store", urls[destination])
    assert {r["run_id"]: r["revision"] for r in listed} == {"m-1": 1, "m-2": 2}
    # never overwrite: a second migrate is refused, per run, and changes nothing
    again = CliRunner().invoke(
        cli, ["migrate", "--from", urls[source], "--to", urls[destination], "m-1"]
    )
    assert again.exit_code == ExitCode.CONFLICT
    assert "already exists" in again.stderr and "never overwrites" in again.stderr


def test_round_trip_file_sqlite_postgres_file_is_byte_identical(urls, tmp_path):
    seed(urls["file"], "rt-1", "rt-2")
    hops = ["file", "sqlite", "postgres", "file2"]
    for a, b in itertools.pairwise(hops):
        cli_json("migrate", "--from", urls[a], "--to", urls[b])
    for run_id in ("rt-1", "rt-2"):
        name = f"{run_key(run_id)}.json"
        first = (tmp_path / "runs" / name).read_bytes()
        assert (tmp_path / "runs2" / name).read_bytes() == first


def test_migrate_checks_integrity_and_ownership_first(urls, tmp_path):
    seed(urls["file"], "ok", "damaged", "held")
    damaged = tmp_path / "runs" / f"{run_key('damaged')}.json"
    damaged.write_bytes(
        re.sub(rb'"Data":"[A-Za-z0-9+/]', b'"Data":"Z', damaged.read_bytes(), count=1)
    )
    holder = parse_store_url(urls["file"]).open()
    session = holder.acquire("held")
    try:
        result = CliRunner().invoke(
            cli, ["migrate", "--from", urls["file"], "--to", urls["sqlite"]]
        )
    finally:
        session.close()
        holder.close()
    assert result.exit_code == ExitCode.CORRUPT  # the first refusal's kind
    assert "run 'damaged' not copied: CorruptRecordError" in result.stderr
    assert "run 'held' not copied: BusyError" in result.stderr
    assert "copied run 'ok' (revision 1)" in result.stdout
    assert [r["run_id"] for r in cli_json("list", "--store", urls["sqlite"])] == ["ok"]
    same = CliRunner().invoke(cli, ["migrate", "--from", urls["file"], "--to", urls["file"]])
    assert same.exit_code == ExitCode.CONFIG


@pytest.mark.parametrize(("source", "destination"), list(itertools.permutations(KINDS, 2)))
def test_migrate_keeps_when_the_run_was_created_and_last_saved(urls, source, destination):
    from durable_core.maintenance import stored_times

    seed(urls[source], "t-1")
    store = parse_store_url(urls[source]).open()
    try:
        with store.acquire("t-1") as session:
            if source == "file":
                session.restore_times(None, 1_700_000_000.25)
            else:
                session.restore_times(1_600_000_000.5, 1_700_000_000.25)
        expected = stored_times(store, "t-1")
    finally:
        store.close()
    cli_json("migrate", "--from", urls[source], "--to", urls[destination])
    store = parse_store_url(urls[destination]).open()
    try:
        created, saved = stored_times(store, "t-1")
    finally:
        store.close()
    assert saved == pytest.approx(expected[1], abs=1e-3)  # the last save travels
    # the creation time travels where both stores keep one; unknown stays unknown
    assert created == (None if destination == "file" else expected[0])
