"""The owner of a run in the host-loss test, started inside a network namespace.

It acquires the run on the PostgreSQL server reached through the namespace's link, saves
revision 1, says ``{"event": "owns"}`` on stdout, and waits for a line on stdin (the test cuts
the link meanwhile and lets another process take the run over). Then it tries to save revision 2
and reports the outcome as one JSON line. The DSN comes from ``DURABLE_HOST_LOSS_DSN`` (never on
the command line); the store's options from the JSON in ``argv[2]``.

Usage: ``python host_loss_owner.py RUN_ID OPTIONS_JSON``
"""

from __future__ import annotations

import json
import os
import sys
import time

from durable_core import RunRecord
from durable_postgresstore import PostgresStore, PostgresStoreError


def main() -> None:
    run_id, options = sys.argv[1], json.loads(sys.argv[2])
    store = PostgresStore(os.environ["DURABLE_HOST_LOSS_DSN"], **options)
    session = store.acquire(run_id)
    session.save(RunRecord(run_id=run_id, revision=1, version="old owner"), 0)
    print(json.dumps({"event": "owns"}), flush=True)
    sys.stdin.readline()
    started = time.monotonic()
    outcome: dict[str, object]
    try:
        session.save(RunRecord(run_id=run_id, revision=2, version="old owner, late"), 1)
        outcome = {"event": "saved"}
    except PostgresStoreError as exc:
        outcome = {
            "event": "refused",
            "connection_lost": exc.connection_lost,
            "uncertain": exc.uncertain,
            "message": str(exc),
        }
    except Exception as exc:  # reported to the test, which fails on it
        outcome = {"event": "error", "type": type(exc).__name__, "message": str(exc)}
    outcome["seconds"] = time.monotonic() - started
    print(json.dumps(outcome), flush=True)
    store.close()


if __name__ == "__main__":
    main()
