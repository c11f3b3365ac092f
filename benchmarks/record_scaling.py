"""How decoding and validating a run record scale with its size (R-REC-4, R-ATT-5).

Builds valid format-2 records of 100, 1,000 and 10,000 nodes shaped like real runs (every node
confirmed with one or two outputs; every 10th node retried once; every 50th node a Sub whose child
scope holds 4 nodes; a stream with a managed reader per 100 nodes) and times, best of N runs:

- ``json.loads``: the standard library's parse alone, for reference;
- ``decode``: ``record_from_json`` (parse + strict shape checks + record objects);
- ``validate``: ``validate_record`` with the definition (every structural rule, digests included);
- ``encode``: ``record_to_json``;
- ``copy``: ``copy_record``.

It prints microseconds per node and, per step, the ratio of the per-node time of the largest
record to the smallest: a flat ratio (about 1) means linear time.

Usage: ``uv run python benchmarks/record_scaling.py [--sizes 100 1000 10000] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from durable_core import (
    AttemptRecord,
    AttemptState,
    ManagedRecord,
    MessageAttemptRecord,
    NodeRecord,
    PendingMessageRecord,
    RunRecord,
    ScopeRecord,
    StreamDescriptorRecord,
    StreamRecord,
    StreamTerminal,
    ValueRecord,
    ValueState,
    copy_record,
    record_from_json,
    record_to_json,
    validate_record,
)


class _Ids:
    def __init__(self) -> None:
        self.next = 0

    def __call__(self) -> str:
        self.next += 1
        return f"{self.next:032x}"


def _ready(name: str, payload: bytes) -> ValueRecord:
    return ValueRecord(
        name=name,
        type_id="builtins.dict",
        version="1",
        state=ValueState.READY,
        digest=hashlib.sha256(payload).hexdigest(),
        data=payload,
    )


def build(nodes: int) -> tuple[RunRecord, dict[str, dict[str, list[str]]]]:
    """A valid record with ``nodes`` node records, and its definition's shapes."""
    new_id = _Ids()
    inputs = hashlib.sha256(b"inputs").hexdigest()
    root = new_id()
    record = RunRecord(
        run_id=f"bench-{nodes}",
        revision=nodes,
        version="1",
        definition=hashlib.sha256(b"definition").hexdigest(),
        inputs=inputs,
        root_scope=root,
    )
    record.scopes[root] = ScopeRecord(graph="main", path="", inputs=inputs, bindings=False)
    shapes: dict[str, dict[str, list[str]]] = {"main": {}, "child": {}}
    for child in range(4):
        shapes["child"][f"c{child}"] = ["out"]
    made = 0
    index = 0
    while made < nodes:
        node_id = f"n{index}"
        index += 1
        root_attempt = new_id()
        record.attempts[root_attempt] = AttemptRecord(parent=root, node_id=node_id)
        payload = json.dumps({"node": node_id, "rows": list(range(20))}).encode()
        outputs = [_ready("result", payload)]
        provides = ["result"]
        if index % 3 == 0:
            outputs.append(
                ValueRecord(
                    name="extra", type_id="builtins.str", version="1", state=ValueState.SKIPPED
                )
            )
            provides.append("extra")
        if index % 10 == 0:  # retried once: a failed try, then the confirmed root
            failed, last = new_id(), new_id()
            record.attempts[failed] = AttemptRecord(
                parent=root_attempt,
                node_id=node_id,
                boundary="0",
                index=1,
                limit=3,
                state=AttemptState.FAILED,
            )
            record.attempts[last] = AttemptRecord(
                parent=root_attempt, node_id=node_id, boundary="0", index=2, limit=3
            )
        if index % 50 == 0 and made + 5 <= nodes:  # a Sub: its child scope holds 4 nodes
            scope = root_attempt
            record.scopes[scope] = ScopeRecord(
                graph="child",
                path=node_id,
                inputs=hashlib.sha256(node_id.encode()).hexdigest(),
                bindings=True,
            )
            for child in range(4):
                attempt = new_id()
                record.attempts[attempt] = AttemptRecord(
                    parent=scope, node_id=f"c{child}", state=AttemptState.CONFIRMED
                )
                record.scopes[scope].nodes[f"c{child}"] = NodeRecord(
                    node_id=f"c{child}", attempt=attempt, outputs=[_ready("out", payload)]
                )
                made += 1
        if index % 100 == 0 and made + 2 <= nodes:  # a stream producer and a managed reader
            outputs = [
                ValueRecord(
                    name="result",
                    type_id="builtins.int",
                    version="1",
                    stream=StreamDescriptorRecord(
                        source_id=f"{node_id}/{root_attempt}",
                        scope=root,
                        node_id=node_id,
                        key="result",
                        attempt=root_attempt,
                        capacity=64,
                        terminal=StreamTerminal.COMPLETED,
                    ),
                )
            ]
            provides = ["result"]
            reader, reader_attempt = f"r{index}", new_id()
            shapes["main"][reader] = ["total"]
            record.attempts[reader_attempt] = AttemptRecord(parent=root, node_id=reader)
            stream_key = f"{node_id}:{reader}"
            record.streams[stream_key] = StreamRecord(
                scope=root,
                node_id=reader,
                key="result",
                group=reader,
                generation=1,
                source_id=f"{node_id}/{root_attempt}",
                resumable=True,
                last_sequence=10,
                acked_through=8,
                pending=[
                    PendingMessageRecord(s, b"%d" % s, hashlib.sha256(b"%d" % s).hexdigest())
                    for s in (9, 10)
                ],
                cursor=b"10",
            )
            for sequence in range(1, 9):
                record.messages[new_id()] = MessageAttemptRecord(
                    stream=stream_key,
                    group=reader,
                    sequence=sequence,
                    parent=reader_attempt,
                    node_id=reader,
                    state=AttemptState.CONFIRMED,
                )
            record.managed[f"{reader}/{reader_attempt}"] = ManagedRecord(
                scope=root,
                parent=reader_attempt,
                node_id=reader,
                state=_ready("state", b'{"total": 36}'),
                values=[_ready("total", b"36")],
            )
            made += 1
        record.attempts[root_attempt].state = AttemptState.CONFIRMED
        record.scopes[root].nodes[node_id] = NodeRecord(
            node_id=node_id, attempt=root_attempt, outputs=outputs
        )
        shapes["main"][node_id] = provides
        made += 1
    return record, shapes


def best(function: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()

    steps = ["json.loads", "decode", "validate", "encode", "copy"]
    per_node: dict[str, list[float]] = {step: [] for step in steps}
    print(f"{'nodes':>7} {'bytes':>10} " + " ".join(f"{s + ' µs/node':>18}" for s in steps))
    for size in options.sizes:
        record, shapes = build(size)
        validate_record(record, shapes)  # the generated record is valid
        data = record_to_json(record)
        decoded = record_from_json(data)
        assert decoded == record
        timings = {
            "json.loads": best(partial(json.loads, data), options.repeat),
            "decode": best(partial(record_from_json, data), options.repeat),
            "validate": best(partial(validate_record, decoded, shapes), options.repeat),
            "encode": best(partial(record_to_json, decoded), options.repeat),
            "copy": best(partial(copy_record, decoded), options.repeat),
        }
        for step in steps:
            per_node[step].append(timings[step] / size * 1e6)
        print(
            f"{size:>7} {len(data):>10} "
            + " ".join(f"{timings[s] / size * 1e6:>18.2f}" for s in steps)
        )
    first, last = options.sizes[0], options.sizes[-1]
    print(f"\nper-node time, {last:,} nodes vs {first:,} nodes (1.0 = perfectly linear):")
    print(f"  {'step':<11} {'ratio':>6} {'ratio / json.loads ratio':>26}")
    parse = per_node["json.loads"][-1] / per_node["json.loads"][0]
    for step in steps:
        ratio = per_node[step][-1] / per_node[step][0]
        print(f"  {step:<11} {ratio:>6.2f} {ratio / parse:>26.2f}")
    print(
        "\nThe standard parser alone slows down per node once the record outgrows the CPU caches;"
        "\nthe last column divides that out. A quadratic step would grow ~100x over 100x nodes."
    )


if __name__ == "__main__":
    main()
