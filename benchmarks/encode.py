"""What encoding one confirmed node costs, measured alone: its output value and its save's delta.

Builds the changes a chain of trivial nodes makes, one confirmed node at a time, on one growing
record, without an engine, a store or an event loop (so that other phases and the machine's
thread hand-offs do not blur the two encoding phases):

- ``encode value``: ``encode_value_record`` of the node's ``int`` output (the codecs: codec id,
  version, canonical bytes, SHA-256 digest, the ``ValueRecord``);
- ``encode delta``: ``RecordEncoder.encode_change`` of the save that confirms the node (its
  ``Nodes`` entry with the output value, its ``Attempts`` entry and ``Revision``).

Each is the median over the nodes, in µs, of the CPU time of the calling thread (so a busy
machine's waits for a core are left out; its cache misses are not). The last save's complete
bytes are checked against ``record_to_json``.

Run it with::

    uv run python benchmarks/encode.py                 # 2,000 nodes, best of 3 rounds
    uv run python benchmarks/encode.py --nodes 10000 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import time

from _support import median

from durable_core import Codecs, Key, NodeReason, RunRecord, ScopeRecord, record_to_json
from durable_core.durable import ledger as L
from durable_core.durable.checkpointer import encode_value_record
from durable_core.durable.proposal import Proposal, adopt
from durable_core.records.encoder import RecordEncoder


def one_round(nodes: int) -> tuple[float, float, int]:
    """Median µs of encoding a value and a delta per node, and the last delta's bytes."""
    codecs = Codecs.default()
    root = L.new_id()
    record = RunRecord(
        run_id="encode",
        revision=1,
        version="1",
        definition="d" * 64,
        inputs="i" * 64,
        root_scope=root,
        scopes={root: ScopeRecord(graph="chain", inputs="f" * 64)},
    )
    encoder = RecordEncoder()
    encoder.encode(record)
    clock = time.thread_time
    values: list[float] = []
    deltas: list[float] = []
    delta: bytes | None = b""
    data = None
    for i in range(nodes):
        key = Key(f"k{i + 1}", int)
        started = clock()
        value = encode_value_record(codecs, key, True, i + 1)
        values.append(clock() - started)
        attempt_id = L.new_id()
        proposal = Proposal(record)
        L.begin_attempt(proposal, attempt_id, parent=root, node_id=f"n{i}")
        L.confirm_node(
            proposal,
            root,
            node_id=f"n{i}",
            attempt_id=attempt_id,
            reason=NodeReason.COMPLETED,
            outputs=[value],
        )
        base = record.revision
        proposal.record.revision = base + 1
        change, _ = adopt(proposal, record)
        started = clock()
        delta, data = encoder.encode_change(record, change, base)
        deltas.append(clock() - started)
    assert data is not None and data() == record_to_json(record)
    return median(values) * 1e6, median(deltas) * 1e6, len(delta or b"")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000, help="confirmed nodes per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (the best is printed)")
    args = parser.parse_args()
    rounds = [one_round(args.nodes) for _ in range(args.rounds)]
    value = min(r[0] for r in rounds)
    delta = min(r[1] for r in rounds)
    print(
        f"{args.nodes} confirmed nodes, best of {args.rounds} rounds; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"encode value (µs per node, CPU): {value:6.2f}")
    print(f"encode delta (µs per node, CPU): {delta:6.2f}  ({rounds[-1][2]} bytes)")


if __name__ == "__main__":
    main()
