"""docs/data-model.md: the example record is what the runtime writes for the graph shown beside
it, and it decodes (``record_from_json``) and validates (``validate_record``)."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from durable_core import (
    Codecs,
    MemoryStore,
    RunRecord,
    record_from_json,
    record_to_json,
    validate_record,
)
from tests import ROOT

DOC = ROOT / "docs" / "data-model.md"


def example_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("### Example")
    return text[start : text.index("\n## ", start)]


def example_blocks() -> tuple[str, bytes]:
    section = example_section()
    python = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    records = re.findall(r"^```json\n(.*?)^```", section, re.S | re.M)
    assert len(python) == 1 and len(records) == 1
    return python[0], records[0].encode("utf-8")


def shape(record: RunRecord) -> dict[str, Any]:
    """The record without its random ids: attempts by (node, boundary, index) with their
    parent's kind, scopes by path, every other field as is."""
    names = {record.root_scope: "root scope"}
    for attempt_id, attempt in record.attempts.items():
        names[attempt_id] = f"{attempt.node_id}@{attempt.boundary or 'root'}#{attempt.index}"
    attempts = sorted(
        (names[a], names.get(att.parent, "?"), att.limit, str(att.state))
        for a, att in record.attempts.items()
    )
    scopes = {
        scope.path: {
            "graph": scope.graph,
            "inputs": scope.inputs,
            "bindings": scope.bindings,
            "nodes": {
                node_id: (
                    names[node.attempt],
                    str(node.reason),
                    [
                        (v.name, v.type_id, v.version, str(v.state), v.digest, v.data)
                        for v in node.outputs
                    ],
                )
                for node_id, node in scope.nodes.items()
            },
        }
        for scope in record.scopes.values()
    }
    return {
        "format": record.format,
        "run_id": record.run_id,
        "revision": record.revision,
        "version": record.version,
        "definition": record.definition,
        "inputs": record.inputs,
        "attempts": attempts,
        "scopes": scopes,
        "streams": record.streams,
        "messages": record.messages,
        "managed": record.managed,
    }


def test_the_example_record_is_the_one_the_runtime_writes_for_the_example_graph() -> None:
    # covers: R-REC-2, R-REC-4, R-ATT-1, R-ATT-2, R-ATT-3, R-NODE-1, R-VAL-1, R-VAL-2
    code, document = example_blocks()
    documented = record_from_json(document)
    # run the example graph, keeping the store it writes to
    store = MemoryStore()
    namespace: dict[str, Any] = {"__name__": "docs_data_model", "store": store}
    exec(compile(code.replace("MemoryStore()", "store"), DOC.name, "exec"), namespace)
    with store.acquire("order-42") as session:
        written = session.load()
    assert shape(documented) == shape(written)

    graph = namespace["g"]  # the graph the block defined
    validate_record(documented, definition=graph.describe_provides())
    assert documented.definition == graph.fingerprint()
    # the example is indented JSON of the canonical form: same record, same canonical bytes
    assert json.loads(document) == json.loads(record_to_json(documented))
    lines = documented.scopes[documented.root_scope].nodes["split"].outputs[0]
    codecs = Codecs.default()
    assert codecs.decode_value(
        list[str], lines.type_id, lines.version, lines.data, lines.digest
    ) == [
        "pen",
        "ink",
    ]
    assert base64.b64encode(lines.data) == b"WyJwZW4iLCJpbmsiXQ=="
