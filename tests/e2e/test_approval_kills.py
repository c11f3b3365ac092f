"""The approval example killed with SIGKILL around posting: every message taken in once.

Each round starts a real child process (``approval_child.py``) that owns the run and, from a
thread, posts comments and then ``"approve"`` to it. The child kills itself with SIGKILL at a
point picked deterministically from the round number: at one of its record saves (before or
after it: most of them take posted messages in; a round makes 7 to 13, as the posts and the run
interleave, so the save picked is one every round reaches), or inside one of its posts (before
the message is written, between its two names, inside the store's transaction); every third round
it posts nothing and is killed from here while it waits. Then, as a poster that does not know
whether its posts arrived, this process posts every message again with the same idempotency
keys, and resumes the run to the end.

Checked after every round: the run completed once with the verdict ``approved``, decided by
the last message; the comments it took in are exactly the posted ones, each once, in order,
with sequences 1…N (none lost, none twice); the repeated posts changed nothing; the published
report is there.

Counts: 15 rounds on the file store and 15 on SQLite, 5 on PostgreSQL.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
import uuid

import pytest

from durable_core import Runtime
from tests.e2e import approval_child as child

HERE = pathlib.Path(__file__).resolve().parent

ROUNDS = 15
POSTS = 6


def _spawn(
    kind: str, where: str, run_id: str, out_dir: str, posts: int, kill_save: int, kill_post: int
) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            str(HERE / "approval_child.py"),
            kind,
            where,
            run_id,
            out_dir,
            str(posts),
            str(kill_save),
            str(kill_post),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_until_waiting(store, run_id: str, process: subprocess.Popen) -> None:
    """Until the run's intake stream is open (the run waits for messages), then a little."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        try:
            record = store.peek(run_id)
        except Exception:
            record = None
        if record is not None and any(
            e.node_id == "inbox:decisions" for e in record.streams.values()
        ):
            time.sleep(0.2)
            return
        time.sleep(0.02)
    raise AssertionError("the run never started waiting")


def _round(kind: str, where: str, make_store, number: int, tmp_path: pathlib.Path) -> bool:
    """One round; returns whether the child was killed (rather than finishing first)."""
    run_id = f"approval-{kind}-{number}-{uuid.uuid4().hex[:6]}"
    out_dir = str(tmp_path / f"out-{number}")
    store = make_store()
    try:
        if number % 3 == 2:  # killed while it waits
            process = _spawn(kind, where, run_id, out_dir, -1, 0, 0)
            _wait_until_waiting(store, run_id, process)
            process.send_signal(signal.SIGKILL)
        elif number % 3 == 0:  # killed at a save: 3 … 6 of the 7 to 13 a round makes
            process = _spawn(kind, where, run_id, out_dir, POSTS, 3 + (number // 3) % 4, 0)
        else:  # killed inside a post: 1 … POSTS + 1
            process = _spawn(kind, where, run_id, out_dir, POSTS, 0, 1 + number % (POSTS + 1))
        _, err = process.communicate(timeout=60)
        assert process.returncode in (-signal.SIGKILL, 0), err
        # the poster does not know which posts arrived: it posts them all again
        sequences = [
            Runtime.send(store, run_id, child.approval.DECISIONS, value, key)
            for value, key in child.posts(POSTS)
        ]
        assert sequences == list(range(1, POSTS + 2))
        result = Runtime(store, child.codecs()).run_or_resume(
            child.approval.graph, run_id=run_id, version="1", inputs=child.inputs(out_dir)
        )
        assert result.status == "completed", result.error
        decision = result[child.approval.DECISION]
        assert decision.verdict == "approved"
        assert decision.decided_by == POSTS + 1
        assert [(c.sequence, c.text) for c in decision.comments] == [
            (n + 1, f"comment {n}") for n in range(POSTS)
        ]
        assert store.last_sequence(run_id, "decisions") == POSTS + 1  # nothing posted twice
        published = pathlib.Path(result[child.approval.PUBLISHED])
        assert published.parent.name == "published" and "approved" in published.read_text()
        again = [
            Runtime.send(store, run_id, child.approval.DECISIONS, value, key)
            for value, key in child.posts(POSTS)
        ]
        assert again == sequences  # idempotent after the intake dropped them, too
        return process.returncode == -signal.SIGKILL
    finally:
        store.close()


def test_the_approval_survives_kills_on_the_file_store(tmp_path):
    # covers: X-INBOX-1, X-INBOX-2, X-WAIT
    from durable_filestore import FileStore

    where = str(tmp_path / "runs")
    kills = [_round("file", where, lambda: FileStore(where), n, tmp_path) for n in range(ROUNDS)]
    assert all(kills), kills


def test_the_approval_survives_kills_on_the_sqlite_store(tmp_path):
    # covers: X-INBOX-1, X-INBOX-2, X-WAIT
    from durable_sqlitestore import SQLiteStore

    where = str(tmp_path / "runs.sqlite")
    kills = [
        _round("sqlite", where, lambda: SQLiteStore(where), n, tmp_path) for n in range(ROUNDS)
    ]
    assert all(kills), kills


@pytest.mark.postgres
def test_the_approval_survives_kills_on_the_postgres_store(tmp_path, postgres_dsn):
    # covers: X-INBOX-1, X-INBOX-2
    from durable_postgresstore import PostgresStore

    kills = [
        _round("postgres", postgres_dsn, lambda: PostgresStore(postgres_dsn), n, tmp_path)
        for n in range(5)
    ]
    assert all(kills), kills


if os.name == "nt":  # pragma: no cover - SIGKILL is POSIX
    pytestmark = pytest.mark.skip("SIGKILL is POSIX")
