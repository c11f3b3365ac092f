"""``durable list`` and ``durable inspect`` show when a run was created and last saved, and its
duration, from the store's own times, on real file, SQLite and PostgreSQL stores."""

from __future__ import annotations

import datetime
import time

import pytest

from tests.durable_core.cli.commands.test_delete_prune import set_times


def stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def test_inspect_and_list_show_the_stores_times(ops):
    before = time.time()
    assert ops.invoke("run", ops.config).exit_code == 0
    times = ops.json("inspect", ops.config)["times"]
    saved = datetime.datetime.fromisoformat(times["saved"]).timestamp()
    assert before - 60 < saved < time.time() + 60
    if ops.store_kind == "file":
        assert "created" not in times  # the file store keeps no creation time
    else:
        created = datetime.datetime.fromisoformat(times["created"]).timestamp()
        assert before - 60 < created <= saved
    # a run created two days ago and last saved one day ago
    created, saved = time.time() - 2 * 86400, time.time() - 86400
    set_times(ops, "ops-1", created=created, saved=saved)
    times = ops.json("inspect", ops.config)["times"]
    assert datetime.datetime.fromisoformat(times["saved"]).timestamp() == pytest.approx(
        saved, abs=1e-3
    )
    listed = ops.json("list", ops.config)
    assert listed[0]["times"] == times
    inspected = ops.invoke("inspect", ops.config)
    table = ops.invoke("list", ops.config).stdout.splitlines()
    assert table[0].split()[-3:] == ["CREATED", "SAVED", "DURATION"]
    assert f"saved {stamp(saved)}" in inspected.stdout
    assert stamp(saved) in table[1]
    if ops.store_kind == "file":
        return
    assert datetime.datetime.fromisoformat(times["created"]).timestamp() == pytest.approx(
        created, abs=1e-3
    )
    assert times["duration_seconds"] == pytest.approx(86400, abs=0.01)
    assert f"created {stamp(created)}, saved {stamp(saved)}, duration 1d00h" in inspected.stdout
    assert table[1].split()[-3:] == [stamp(created), stamp(saved), "1d00h"]


def test_list_shows_the_save_time_of_a_running_run(ops):
    assert ops.invoke("run", ops.config).exit_code == 0
    from durable_core.config import parse_store_url

    store = parse_store_url(ops.store_url).open()
    try:
        with store.acquire("ops-1"):
            (row,) = ops.json("list", ops.config)
    finally:
        store.close()
    assert row["status"] == "running"
    assert "saved" in row["times"]  # read without the run's session
