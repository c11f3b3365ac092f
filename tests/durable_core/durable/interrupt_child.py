"""Run a graph durably in this (child) process until the parent sends SIGINT.

Usage::

    python -m tests.durable_core.durable.interrupt_child MODE STORE_KIND STORE_LOCATION CALL_LOG

``MODE`` is ``plain`` (no cancel token: Ctrl-C raises ``KeyboardInterrupt``), ``token`` (a
SIGINT handler cancels a ``CancelToken``), or ``worker-plain`` / ``worker-token``: the same, but
the SIGINT is not sent by the parent: the plain body sends it to its own worker thread once both
slow bodies run (``signal.pthread_kill``), as Linux may do with a Ctrl-C, while the main thread
waits in the event loop for a timer a minute away. Prints one JSON line describing how the call
ended.

SIGINT starts with Python's default handler whatever the parent left (a shell starts a
background job with SIGINT ignored, and a child inherits that).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import threading
import time
from typing import Any

from durable_core import CancelToken, Graph, Key, Runtime
from tests.durable_core.durable.scenarios import CallLog, open_store

SEED, A, B, C = Key("seed", int), Key("a", int), Key("b", int), Key("c", int)

# seconds the slow bodies last at most when no interrupt reaches them (the test then fails)
BOUND = 60.0


def graph(log: CallLog, seconds: float, *, self_interrupt: bool = False) -> Graph:
    """seed -> first -> (plain: a plain body busy until the run was interrupted, waits: an
    async body asleep for ``seconds``).

    The plain body does not look at ``rc.canceled``: it stays busy until ``waits`` logged that
    it was canceled (so the interrupt has reached the run, however slow the machine), or for at
    most ``seconds``. With ``self_interrupt``, the plain body sends SIGINT to its own (worker)
    thread once ``waits`` has started.
    """
    g = Graph("interrupt", inputs=[SEED])

    @g.node("first", requires=[SEED], provides=[A])
    def first(rc: Any) -> None:
        log.write("first")
        rc.set(A, 1)

    @g.node("plain", requires=[A], provides=[B])
    def plain(rc: Any) -> None:
        log.write("plain")
        deadline = time.monotonic() + seconds
        if self_interrupt:
            while "waits" not in log.calls() and time.monotonic() < deadline:
                time.sleep(0.01)
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        while time.monotonic() < deadline:  # busy, and not looking at rc.canceled
            if "waits-canceled" in log.calls():
                break
            time.sleep(0.01)
        log.write("plain-returned")
        rc.set(B, 2)

    @g.node("waits", requires=[A], provides=[C])
    async def waits(rc: Any) -> None:
        log.write("waits")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            log.write("waits-canceled")
            raise
        rc.set(C, 3)

    return g


def main() -> None:
    mode, kind, location, log_path = sys.argv[1:5]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    self_interrupt = mode.startswith("worker-")
    mode = mode.removeprefix("worker-")
    log = CallLog(log_path)
    store = open_store(kind, location)
    runtime = Runtime(store)
    options: dict[str, Any] = {"run_id": "r1", "version": "v1", "inputs": {SEED: 1}}
    if mode == "token":
        token = CancelToken()
        signal.signal(signal.SIGINT, lambda signum, frame: token.cancel())
        options["cancel"] = token
    try:
        result = runtime.run(graph(log, BOUND, self_interrupt=self_interrupt), **options)
    except KeyboardInterrupt:
        outcome = {"raised": "KeyboardInterrupt", "plain_returned": "plain-returned" in log.calls()}
    else:
        outcome = {
            "status": str(result.status),
            "error": None if result.error is None else repr(result.error),
            "plain_returned": "plain-returned" in log.calls(),
        }
    store.close()
    print(json.dumps(outcome))


if __name__ == "__main__":
    main()
