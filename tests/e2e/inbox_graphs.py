"""Graphs and child processes of the inbox and timer tests.

python inbox_graphs.py post KIND WHERE RUN_ID FIRST COUNT REPEAT
    posts the integers FIRST … FIRST+COUNT-1 to inbox ``events`` (idempotency key
    ``e-<n>``), then posts the first REPEAT of them again (no-ops)
python inbox_graphs.py timer KIND WHERE RUN_ID SECONDS
    runs (or resumes) the timer graph and prints when it ended
"""

from __future__ import annotations

import json
import sys
import time

import attrs

from durable_core import Codecs, Graph, Key, Runtime
from durable_core.graph.waits import sleep_until

EVENTS = Key("events", int, stream=True, inbox=True, capacity=256)
EXPECTED = Key("expected", int)
TALLY = Key("tally", dict[str, int])


@attrs.frozen
class Tally:
    count: int = 0
    total: int = 0
    squares: int = 0


counting = Graph("counting", inputs=[EXPECTED])


@counting.processor(
    "count",
    input=EVENTS,
    state=Tally,
    initial=Tally(),
    requires=[EXPECTED],
    provides=[TALLY],
    commit_every=64,
)
def count(rc, state: Tally, n: int) -> Tally:
    state = Tally(state.count + 1, state.total + n, state.squares + n * n)
    if state.count == rc.get(EXPECTED):
        rc.stop()
    return state


@count.finish
def finish(rc, state: Tally) -> None:
    rc.set(TALLY, attrs.asdict(state))


WAIT = Key("wait", float)
DEADLINE = Key("deadline", float)
ENDED = Key("ended", float)

timing = Graph("timing", inputs=[WAIT])
timing.timer("armed", seconds_from=WAIT, provides=DEADLINE)


@timing.node("sleep", requires=[DEADLINE], provides=[ENDED])
async def sleep(rc) -> None:
    await sleep_until(rc, rc.get(DEADLINE))
    rc.set(ENDED, time.time())


def codecs() -> Codecs:
    registry = Codecs.default()
    registry.register_json(Tally)
    return registry


def make_store(kind: str, where: str):
    if kind == "file":
        from durable_filestore import FileStore

        return FileStore(where)
    if kind == "sqlite":
        from durable_sqlitestore import SQLiteStore

        return SQLiteStore(where)
    from durable_postgresstore import PostgresStore

    return PostgresStore(where)


def main() -> None:
    mode, kind, where, run_id, *rest = sys.argv[1:]
    store = make_store(kind, where)
    try:
        if mode == "post":
            first, count_, repeat = map(int, rest)
            numbers = list(range(first, first + count_))
            for n in numbers + numbers[:repeat]:
                Runtime.send(store, run_id, EVENTS, n, f"e-{n}")
        else:
            (seconds,) = map(float, rest)
            result = Runtime(store, codecs()).run_or_resume(
                timing, run_id=run_id, version="1", inputs={WAIT: seconds}
            )
            print(json.dumps({"status": result.status, "ended": result.get(ENDED)}))
    finally:
        store.close()


if __name__ == "__main__":
    main()
