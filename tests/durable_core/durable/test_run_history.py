"""A run's history in its store: written off the save path, never failing a run (X-HIST)."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading

import psycopg
import pytest

from durable_core import Graph, Key, Runtime
from durable_core.durable import EventKind
from durable_core.history import flush, root_scope_of
from durable_core.plugins import make_plugin_manager
from durable_core.runlog import read_log
from durable_filestore import FileStore
from durable_sqlitestore import SQLiteStore

N, TWICE = Key("n", int), Key("twice", int)


def graph() -> Graph:
    g = Graph("double", inputs=[N])

    @g.node("double", requires=[N], provides=[TWICE])
    def double(rc):
        rc.set(TWICE, rc.get(N) * 2)

    return g


def run(store, run_id="r", observers=()):
    runtime = Runtime(store, plugins=make_plugin_manager(), observers=list(observers))
    return runtime.run(graph(), run_id=run_id, version="1", inputs={N: 21})


class GatedFileStore(FileStore):
    """A real file store whose history appends wait for a gate (a history writer that hangs)."""

    gate = threading.Event()
    entered = threading.Event()

    def append_history(self, run_id, root_scope, entries):
        self.entered.set()
        self.gate.wait(60)
        super().append_history(run_id, root_scope, entries)


def test_saves_never_wait_for_the_history_writer(tmp_path):
    # covers: X-HIST
    store = GatedFileStore(tmp_path / "runs")
    finished = threading.Event()
    saved: list[int] = []

    def observe(event):
        if event.kind == EventKind.RUN_FINISHED:
            saved.append(event.revision)
            finished.set()

    thread = threading.Thread(target=run, args=(store,), kwargs={"observers": [observe]})
    thread.start()
    try:
        # every save of the run is made while the history writer is held at its first append
        assert finished.wait(60)
        assert GatedFileStore.entered.wait(60)
        assert store.peek("r").revision == saved[0] >= 2
        assert read_log(store, "r") == []  # nothing written yet
    finally:
        GatedFileStore.gate.set()
        thread.join(60)
    assert flush()
    assert [e["event"] for e in read_log(store, "r")][-1] == "run_finished"


def test_a_history_that_cannot_be_written_in_a_file_store_fails_nothing(tmp_path, caplog):
    # covers: X-HIST
    store = FileStore(tmp_path / "runs")
    os.mkdir(store.history_path("r"))  # the history file cannot be opened for writing
    with caplog.at_level(logging.WARNING, logger="durable_core.history"):
        result = run(store)
        assert flush()
    assert result.status == "completed" and result[TWICE] == 42
    assert "could not write the history of run 'r'" in caplog.text
    assert caplog.text.count("could not write the history") == 1  # once per store


def test_a_dropped_history_table_in_sqlite_fails_nothing(tmp_path, caplog):
    # covers: X-HIST
    path = tmp_path / "db" / "runs.sqlite"
    store = SQLiteStore(path)
    try:
        raw = sqlite3.connect(path)
        raw.execute("DROP TABLE durable_history")  # after the store checked its schema
        raw.commit()
        raw.close()
        with caplog.at_level(logging.WARNING, logger="durable_core.history"):
            result = run(store)
            assert flush()
        assert result.status == "completed" and result[TWICE] == 42
        assert "could not write the history of run 'r'" in caplog.text
    finally:
        store.close()


@pytest.mark.postgres
def test_hosts_sharing_postgres_see_the_same_history(postgres_dsn, caplog):
    # covers: X-HIST
    from durable_postgresstore import PostgresStore

    here, there = PostgresStore(postgres_dsn), PostgresStore(postgres_dsn)
    try:
        assert run(here).status == "completed"
        assert flush()
        seen_there = read_log(there, "r")
        assert [e["event"] for e in seen_there] == [e["event"] for e in read_log(here, "r")]
        assert seen_there[0]["event"] == "run_started"
        assert seen_there[-1]["status"] == "completed"
        # and a table dropped under a running store fails no run
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute("DROP TABLE pulse_durable.history")
        with caplog.at_level(logging.WARNING, logger="durable_core.history"):
            assert run(here, "r2").status == "completed"
            assert flush()
        assert "could not write the history of run 'r2'" in caplog.text
        assert root_scope_of(there, "r2") == here.peek("r2").root_scope
    finally:
        here.close()
        there.close()


def _dict_store_class():
    """The smallest store of docs/storage.md (no RunHistory)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "storage.md").read_text("utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
    (block,) = [b for b in blocks if "class DictStore" in b]
    namespace: dict = {}
    exec(block, namespace)
    return namespace["DictStore"]


def test_a_store_without_the_capability_keeps_histories_in_local_files_per_store_and_run(
    tmp_path, monkeypatch
):
    # covers: X-HIST
    from durable_core.history import LocalHistory, store_identity
    from durable_core.maintenance import RunHistory

    monkeypatch.setenv("DURABLE_LOG_DIR", str(tmp_path / "logs"))
    dict_store = _dict_store_class()
    one, two = dict_store(), dict_store()
    assert not isinstance(one, RunHistory)
    assert run(one).status == "completed"
    assert run(two).status == "completed"  # the same run id in a second store
    assert flush()
    for store in (one, two):
        events = [e["event"] for e in read_log(store, "r")]
        assert events.count("run_started") == 1 and events[-1] == "run_finished"
    paths = {
        LocalHistory(store_identity(store)).path("r", root_scope_of(store, "r"))
        for store in (one, two)
    }
    assert len(paths) == 2  # one file per run: the root scopes differ
    assert all(path.parent == tmp_path / "logs" and path.exists() for path in paths)
