"""The child side of :class:`durable_core.testing.StoreProcess` (run as ``python -c``).

Protocol: JSON lines. The first line from the parent carries ``sys_path`` and the pickled store
factory (base64). Then each request line ``{"op": ..., ...}`` gets one reply line
``{"ok": bool, "elapsed": seconds, ...}``; a failed operation replies with the exception's class
names (its MRO) and message. The protocol uses a private copy of stdout; anything the store
prints goes to stderr.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import sys
import time
from typing import Any


def main() -> None:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def reply(message: dict[str, Any]) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    init = json.loads(sys.stdin.readline())
    for entry in reversed(init["sys_path"]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    factory = pickle.loads(base64.b64decode(init["factory"]))

    from durable_core.records.jsonio import record_from_json, record_to_json
    from durable_core.store import EncodedRecord

    stores: list[Any] = []
    sessions: dict[str, Any] = {}

    def store() -> Any:
        if not stores:
            stores.append(factory())
        return stores[0]

    reply({"ok": True, "pid": os.getpid()})
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        result: dict[str, Any] = {"ok": True}
        started = time.monotonic()
        try:
            if op == "acquire":
                sessions[request["run_id"]] = store().acquire(request["run_id"])
            elif op == "load":
                record = sessions[request["run_id"]].load()
                result["record"] = base64.b64encode(record_to_json(record)).decode("ascii")
            elif op == "save":
                data = base64.b64decode(request["record"])
                record = record_from_json(data)
                encoded = None
                if request.get("delta") is not None:
                    encoded = EncodedRecord(data, base64.b64decode(request["delta"]))
                sessions[request["run_id"]].save(record, request["expected_revision"], encoded)
            elif op == "chain":
                # Save one record after another; after each confirmed save append its revision
                # to the progress file, so that a parent that kills this process mid-chain knows
                # which saves were confirmed.
                session = sessions[request["run_id"]]
                expected = request["expected_revision"]
                with open(request["progress"], "a", encoding="ascii") as progress:
                    for item, delta in zip(request["records"], request["deltas"], strict=True):
                        data = base64.b64decode(item)
                        record = record_from_json(data)
                        encoded = EncodedRecord(
                            data, None if delta is None else base64.b64decode(delta)
                        )
                        session.save(record, expected, encoded)
                        expected = record.revision
                        progress.write(f"{expected}\n")
                        progress.flush()
            elif op == "close":
                sessions.pop(request["run_id"]).close()
            elif op == "exit":
                for session in sessions.values():
                    session.close()
                for opened in stores:
                    opened.close()
                reply(result | {"elapsed": time.monotonic() - started})
                return
            else:
                raise ValueError(f"unknown operation {op!r}")
        except BaseException as exc:
            result = {
                "ok": False,
                "error": type(exc).__name__,
                "errors": [cls.__name__ for cls in type(exc).__mro__],
                "message": str(exc),
            }
        result["elapsed"] = time.monotonic() - started
        reply(result)


if __name__ == "__main__":
    main()
