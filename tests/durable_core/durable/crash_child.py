"""Run or resume one scenario of ``scenarios`` in this (child) process.

Usage::

    python -m tests.durable_core.durable.crash_child \
        MODE SCENARIO STORE_KIND STORE_LOCATION CALL_LOG RUN_ID [EVENT]

``MODE`` is ``run`` or ``resume``. Prints one JSON line: the status, the root graph's ready
values, the error (type and message), the number of restored nodes and saves. ``EVENT``
(``kind:index``, e.g. ``attempt_failed:2``) ends the process with ``os._exit`` right after the
runtime reports that recovery event: after the save it describes.
"""

from __future__ import annotations

import json
import os
import sys

from durable_core import Runtime
from tests.durable_core.durable.scenarios import CRASH_EXIT, SCENARIOS, SEED, CallLog, open_store


def main() -> None:
    mode, scenario, kind, location, log_path, run_id = sys.argv[1:7]
    crash_event = sys.argv[7] if len(sys.argv) > 7 else ""
    graph = SCENARIOS[scenario](CallLog(log_path))
    store = open_store(kind, location)

    def observer(event: object) -> None:
        if crash_event:
            kind_name, _, index = crash_event.partition(":")
            if event.kind == kind_name and event.attempt_index == int(index):  # type: ignore[attr-defined]
                os._exit(CRASH_EXIT)

    runtime = Runtime(store, observers=[observer])
    call = runtime.run if mode == "run" else runtime.resume
    result = call(graph, run_id=run_id, version="v1", inputs={SEED: 4})
    error = result.error
    print(
        json.dumps(
            {
                "status": result.status,
                "values": result.result.values,
                "error": "" if error is None else f"{type(error).__name__}: {error}",
                "error_path": getattr(error, "path", ""),
                "restored": result.restored,
                "saves": result.saves,
            }
        )
    )
    store.close()


if __name__ == "__main__":
    main()
