"""``durable list`` and ``durable inspect`` run the integrity checks ``resume`` makes: a record
that resume would refuse as corrupt is shown as corrupt, with the reason, never as incomplete.

Records are saved through real file and SQLite stores, then damaged on disk the way a bad disk
or a careless edit would (a stored value's bytes no longer match their Digest).
"""

from __future__ import annotations

import json
import pathlib
import re
import sqlite3

import pytest
from click.testing import CliRunner

from durable_core.cli import ExitCode, cli
from durable_core.records import AttemptState
from tests.durable_core.cli.test_stores import make_record, save


def _damage(data: bytes) -> bytes:
    """Change one stored value's bytes (keep its Digest): the JSON stays valid."""
    damaged, count = re.subn(rb'"Data":"([A-Za-z0-9+/])', rb'"Data":"Z', data, count=1)
    if damaged == data:  # the value already started with Z
        damaged, count = re.subn(rb'"Data":"Z', rb'"Data":"Y', data, count=1)
    assert count == 1
    return damaged


def _damage_stored_record(url: str, tmp_path: pathlib.Path, run_id: str) -> None:
    if url.startswith("file://"):
        (record_file,) = (tmp_path / "runs").glob("*.json")
        record_file.write_bytes(_damage(record_file.read_bytes()))
        return
    with sqlite3.connect(tmp_path / "db" / "runs.sqlite") as db:
        query = "SELECT record FROM durable_runs WHERE run_id = ?"
        (data,) = db.execute(query, (run_id,)).fetchone()
        db.execute(
            "UPDATE durable_runs SET record = ? WHERE run_id = ?", (_damage(bytes(data)), run_id)
        )


@pytest.fixture(params=["file", "sqlite"])
def store_url(request, tmp_path):
    if request.param == "file":
        return f"file://{tmp_path / 'runs'}"
    return f"sqlite://{tmp_path / 'db' / 'runs.sqlite'}"


# covers: E-2, R-VAL-3
def test_a_digest_mismatch_is_corrupt_in_list_and_inspect(store_url, tmp_path):
    runner = CliRunner()
    save(store_url, make_record("r-damaged", shard_state=AttemptState.ACTIVE, merge_done=False))
    _damage_stored_record(store_url, tmp_path, "r-damaged")

    listed = runner.invoke(cli, ["list", "--store", store_url, "--json"])
    assert listed.exit_code == ExitCode.CORRUPT, listed.output  # a script learns of it
    (row,) = json.loads(listed.stdout)
    assert row["run_id"] == "r-damaged"
    assert row["status"] == "corrupt"
    assert "Digest does not match" in row["error"]

    table = runner.invoke(cli, ["list", "--store", store_url])
    assert table.stdout.splitlines()[1].split()[:2] == ["r-damaged", "corrupt"]
    assert "r-damaged: corrupt: " in table.stderr and "Digest" in table.stderr

    inspected = runner.invoke(cli, ["inspect", "--store", store_url, "r-damaged"])
    assert inspected.exit_code == ExitCode.CORRUPT, inspected.output
    assert "error (CorruptRecordError): run 'r-damaged'" in inspected.stderr
    assert "is corrupt" in inspected.stderr and "Digest does not match" in inspected.stderr
    assert "incomplete" not in inspected.output


def test_a_record_naming_another_run_is_corrupt(tmp_path):
    """The file store keys files by run id; a record moved under another run's name is caught
    as resume catches it."""
    runner = CliRunner()
    url = f"file://{tmp_path / 'runs'}"
    save(url, make_record("r-a", shard_state=None, merge_done=True))
    (a_file,) = (tmp_path / "runs").glob("*.json")
    save(url, make_record("r-b", shard_state=None, merge_done=True))
    (b_file,) = set((tmp_path / "runs").glob("*.json")) - {a_file}
    b_file.write_bytes(a_file.read_bytes())
    inspected = runner.invoke(cli, ["inspect", "--store", url, "r-b"])
    assert inspected.exit_code == ExitCode.CORRUPT, inspected.output


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda data: data[: len(data) // 2], "the text is not one JSON value"),
        (lambda data: re.sub(rb'"Revision":(\d+)', rb'"Revision":"\1"', data), "$.Revision"),
    ],
    ids=["truncated", "revision-as-string"],
)
def test_an_unreadable_record_is_reported_once_in_plain_sentences(
    store_url, tmp_path, damage, reason
):
    """A hand-edited record that no longer parses: the reason and what to do, said once, with
    the stored bytes untouched."""
    runner = CliRunner()
    save(store_url, make_record("r-edited", shard_state=AttemptState.ACTIVE, merge_done=False))
    if store_url.startswith("file://"):
        (record_file,) = (tmp_path / "runs").glob("*.json")
        record_file.write_bytes(damage(record_file.read_bytes()))
        stored = record_file.read_bytes
    else:
        db_path = tmp_path / "db" / "runs.sqlite"
        with sqlite3.connect(db_path) as db:
            (data,) = db.execute("SELECT record FROM durable_runs").fetchone()
            db.execute("UPDATE durable_runs SET record = ?", (damage(bytes(data)),))

        def stored() -> bytes:
            with sqlite3.connect(db_path) as db:
                return bytes(db.execute("SELECT record FROM durable_runs").fetchone()[0])

    before = stored()
    inspected = runner.invoke(cli, ["inspect", "--store", store_url, "r-edited"])
    assert inspected.exit_code == ExitCode.CORRUPT, inspected.output
    message = inspected.stderr
    assert "is not a valid run record" in message and reason in message
    assert ".." not in message  # one sentence ends once
    assert message.count("evidence") == 1  # the advice is given once
    assert stored() == before


@pytest.mark.parametrize("ops", ["file", "sqlite"], indirect=True)  # damaged on disk
def test_resume_of_a_damaged_record_names_the_run_and_its_store(ops):
    (ops.folder / "broken").touch()
    assert ops.invoke("run", ops.config).exit_code == ExitCode.RUN_FAILED
    url = f"file://{ops.folder / 'runs'}" if ops.store_kind == "file" else ops.store_url
    _damage_stored_record(url, ops.folder, "ops-1")
    refused = ops.invoke("resume", ops.config)
    assert refused.exit_code == ExitCode.CORRUPT, refused.output
    assert f"error (CorruptRecordError): run 'ops-1' in the {ops.store_kind} store at " in (
        refused.stderr
    )
    assert "Digest does not match" in refused.stderr
    assert "docs/operations.md, 'A corrupt record'" in refused.stderr
    assert ops.calls() == ["double", "price", "total"]  # nothing ran
