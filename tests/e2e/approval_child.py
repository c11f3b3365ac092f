"""A child process of the approval kill tests: it owns the run and posts to it, and SIGKILLs
itself at a chosen point.

    python approval_child.py KIND WHERE RUN_ID OUT_DIR POSTS KILL_SAVE KILL_POST

``KIND``/``WHERE``: ``file DIR``, ``sqlite PATH`` or ``postgres DSN``. The process runs (or
resumes) the approval example's run ``RUN_ID`` while a thread posts ``POSTS`` comments
(``"comment <n>"``, idempotency key ``c-<n>``) and then ``"approve"`` (key ``verdict``). It
kills itself with SIGKILL at its ``KILL_SAVE``-th save of the record (odd: just before the
save, even: just after it), or inside its ``KILL_POST``-th post (file store, odd: before the
message is written, even: between the message's two names; SQLite and PostgreSQL: inside the
post's transaction); 0 means never. Without a kill it prints the decision as JSON.
"""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import signal
import sys
import threading
import time

from durable_core import Codecs, NotFoundError, Runtime
from durable_core.config import load_config

ROOT = pathlib.Path(__file__).resolve().parents[2]
load_config(ROOT / "examples" / "approval" / "approval.toml").load_graph()  # puts it on the path
approval = importlib.import_module("approval")


def make_store(kind: str, where: str):
    if kind == "file":
        from durable_filestore import FileStore

        return FileStore(where)
    if kind == "sqlite":
        from durable_sqlitestore import SQLiteStore

        return SQLiteStore(where)
    from durable_postgresstore import PostgresStore

    return PostgresStore(where)


def codecs() -> Codecs:
    registry = Codecs.default()
    approval.durable_register_codecs(registry)
    return registry


def inputs(out_dir: str) -> dict:
    return {
        approval.SOURCE: "stdlib",
        approval.MAX_FILES: 3,
        approval.WAIT_SECONDS: 600.0,
        approval.OUT_DIR: out_dir,
    }


def posts(count: int) -> list[tuple[str, str]]:
    """The messages of a test run, in order: (value, idempotency key)."""
    return [(f"comment {n}", f"c-{n}") for n in range(count)] + [("approve", "verdict")]


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_inside_posts(kind: str, target: int) -> None:
    calls = [0]
    if kind == "file" and target % 2 == 0:
        import durable_filestore.inbox as module

        real_link = os.link

        def link(src, dst, *args, **kwargs):  # the second name comes second
            real_link(src, dst, *args, **kwargs)
            if os.path.basename(dst).startswith("idem-"):
                calls[0] += 1
                if calls[0] == target:
                    _die()

        module.os.link = link  # type: ignore[assignment]
        return
    if kind == "file":
        import durable_filestore.inbox as module
    elif kind == "sqlite":
        import durable_sqlitestore.inbox as module
    else:
        import durable_postgresstore.inbox as module

    class _Clock:
        def __getattr__(self, name):
            return getattr(time, name)

        def time(self):
            calls[0] += 1
            if calls[0] == target:
                _die()
            return time.time()

    module.time = _Clock()  # type: ignore[assignment]


def _kill_at_save(store, target: int) -> None:
    saves = [0]
    acquire = store.acquire

    def acquiring(run_id, timeout=None):
        session = acquire(run_id, timeout)
        save = session.save

        def saving(record, expected, encoded=None):
            saves[0] += 1
            if saves[0] == target and target % 2 == 1:
                _die()
            save(record, expected, encoded)
            if saves[0] == target:
                _die()

        session.save = saving
        return session

    store.acquire = acquiring


def main() -> None:
    kind, where, run_id, out_dir, count, kill_save, kill_post = sys.argv[1:8]
    store = make_store(kind, where)
    if int(kill_save):
        _kill_at_save(store, int(kill_save))
    if int(kill_post):
        _kill_inside_posts(kind, int(kill_post))

    def poster() -> None:
        for value, key in posts(int(count)) if int(count) >= 0 else ():
            while True:
                try:
                    Runtime.send(store, run_id, approval.DECISIONS, value, key)
                    break
                except NotFoundError:  # the run's first record is not saved yet
                    time.sleep(0.01)
            time.sleep(0.002)

    thread = threading.Thread(target=poster, daemon=True)
    thread.start()
    result = Runtime(store, codecs()).run_or_resume(
        approval.graph, run_id=run_id, version="1", inputs=inputs(out_dir)
    )
    decision = result.get(approval.DECISION)
    print(json.dumps({"status": result.status, "verdict": getattr(decision, "verdict", None)}))
    store.close()


if __name__ == "__main__":
    main()
