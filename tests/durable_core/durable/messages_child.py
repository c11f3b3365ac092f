"""Run or resume a small processor graph in this (child) process; the handler may crash it.

Usage::

    python -m tests.durable_core.durable.messages_child MODE STORE_DIR LOG [KIND]

``MODE`` is ``run`` or ``resume``; the store is a file store in ``STORE_DIR``. A resumable
producer sends 1…10; the processor ``sum`` (``Retry(3)`` per message; a plain handler, or an
async one when ``KIND`` is ``async``) writes ``m<n> <try>`` to ``LOG`` for every call.
Message 7 behaves by how often it was called before (counted in ``LOG``): the 1st call raises,
the 2nd ends the process with ``os._exit(17)`` (a crash in the middle of a try), the 3rd
raises, the 4th succeeds.
"""

from __future__ import annotations

import os
import sys

from durable_core import Graph, Key, Retry, Runtime
from durable_filestore import FileStore

COUNT = Key("count", int)
NUMBERS = Key("numbers", int, stream=True)
TOTAL = Key("total", int)
CRASH_EXIT = 17


def build(log: str, kind: str = "def") -> Graph:
    g = Graph("crashing", inputs=[COUNT])

    @g.node("numbers", requires=[COUNT], provides=[NUMBERS])
    async def numbers(rc):
        writer = rc.writer(NUMBERS)
        for n in range((writer.position or 0) + 1, rc.get(COUNT) + 1):
            await writer.send_at(n, n)

    def add(rc, state: int, n: int) -> int:
        calls = 0
        if os.path.exists(log):
            with open(log, encoding="utf-8") as f:
                calls = sum(1 for line in f if line.split()[0] == f"m{n}")
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, f"m{n} {rc.message.index}\n".encode())
        os.close(fd)
        if n == 7 and calls in (0, 2):
            raise ValueError("message 7 failed on purpose")
        if n == 7 and calls == 1:
            os._exit(CRASH_EXIT)
        return state + n

    async def add_async(rc, state: int, n: int) -> int:
        return add(rc, state, n)

    handler = add_async if kind == "async" else add
    processor = g.processor(
        "sum", input=NUMBERS, state=int, initial=0, provides=[TOTAL], retry=Retry(3)
    )(handler)

    @processor.finish
    def finish(rc, state: int):
        rc.set(TOTAL, state)

    return g


def main() -> None:
    mode, store_dir, log = sys.argv[1:4]
    kind = sys.argv[4] if len(sys.argv) > 4 else "def"
    runtime = Runtime(FileStore(store_dir))
    call = runtime.run if mode == "run" else runtime.resume
    result = call(build(log, kind), run_id="c", version="1", inputs={COUNT: 10})
    print(result.status, result.get(TOTAL))


if __name__ == "__main__":
    main()
