"""Records for store tests: small ones, and one that uses every field of the data model."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from durable_core import records as r
from durable_core.records.delta import encode_delta
from durable_core.records.jsonio import record_to_json

__all__ = ["record_delta", "sample_record"]


def _hex_id(seed: str) -> str:
    """A stable 16-byte hex id (the shape of R-REC-3 ids), derived from ``seed``."""
    return hashlib.sha256(seed.encode("utf-8")).hexdigest()[:32]


def _ready(name: str, data: bytes, type_id: str = "json:str") -> r.ValueRecord:
    return r.ValueRecord(
        name=name,
        type_id=type_id,
        version="1",
        state=r.ValueState.READY,
        digest=hashlib.sha256(data).hexdigest(),
        data=data,
    )


def sample_record(
    run_id: str, revision: int, *, marker: str = "", rich: bool = True
) -> r.RunRecord:
    """A run record for store tests.

    Args:
        run_id: the record's run id.
        revision: the record's revision.
        marker: any text stored in ``version``, so that two records of the same run and
            revision can be told apart.
        rich: fill every kind of field (scopes, attempts in every state, ready/skipped/empty
            values, every byte value in ``data``, non-ASCII and astral-plane text, streams,
            messages, managed state); ``False`` gives a nearly empty record.

    Returns:
        A new :class:`~durable_core.records.RunRecord`; equal arguments give equal records.
    """
    record = r.RunRecord(
        run_id=run_id,
        revision=revision,
        version=f"v1{marker}",
        definition=hashlib.sha256(b"definition").hexdigest(),
        inputs=hashlib.sha256(b"inputs").hexdigest(),
        root_scope=_hex_id(run_id + "/root"),
    )
    if not rich:
        return record
    root = record.root_scope
    extract = _hex_id(run_id + "/extract")
    report = _hex_id(run_id + "/report")
    retry1 = _hex_id(run_id + "/report/retry1")
    retry2 = _hex_id(run_id + "/report/retry2")
    process = _hex_id(run_id + "/process")
    every_byte = bytes(range(256))
    text = 'Grüße, 世界 🚀 e\u0301 \u2028 \\ " / \x00 end'.encode()
    record.scopes = {
        root: r.ScopeRecord(
            graph="main",
            path="",
            inputs=record.inputs,
            bindings=False,
            nodes={
                "extract": r.NodeRecord(
                    node_id="extract",
                    attempt=extract,
                    reason=r.NodeReason.COMPLETED,
                    outputs=[
                        _ready("rows", every_byte, "bytes"),
                        _ready("title", text),
                        _ready("empty", b"", "custom:zero"),
                        r.ValueRecord(name="maybe", state=r.ValueState.SKIPPED),
                        r.ValueRecord(
                            name="events",
                            type_id="json:dict",
                            version="1",
                            stream=r.StreamDescriptorRecord(
                                source_id="src-events",
                                scope=root,
                                node_id="extract",
                                key="events",
                                attempt=extract,
                                capacity=16,
                                terminal=r.StreamTerminal.COMPLETED,
                            ),
                        ),
                    ],
                ),
                "skipper": r.NodeRecord(
                    node_id="skipper",
                    attempt=_hex_id(run_id + "/skipper"),
                    reason=r.NodeReason.SKIPPED,
                    outputs=[r.ValueRecord(name="never", state=r.ValueState.SKIPPED)],
                ),
            },
        ),
        report: r.ScopeRecord(
            graph="report/子图",
            path="report",
            inputs=hashlib.sha256(b"report inputs").hexdigest(),
            bindings=True,
        ),
    }
    record.attempts = {
        extract: r.AttemptRecord(parent=root, node_id="extract", state=r.AttemptState.CONFIRMED),
        _hex_id(run_id + "/skipper"): r.AttemptRecord(
            parent=root, node_id="skipper", state=r.AttemptState.CONFIRMED
        ),
        report: r.AttemptRecord(parent=root, node_id="report", state=r.AttemptState.ACTIVE),
        retry1: r.AttemptRecord(
            parent=report,
            node_id="report",
            boundary="aspect:0",
            index=1,
            limit=3,
            state=r.AttemptState.FAILED,
        ),
        retry2: r.AttemptRecord(
            parent=report, node_id="report", boundary="aspect:0", index=2, limit=3
        ),
        process: r.AttemptRecord(parent=root, node_id="process"),
    }
    record.streams = {
        "events/readers": r.StreamRecord(
            scope=root,
            node_id="extract",
            key="events",
            group="readers",
            generation=3,
            source_id="src-events",
            resumable=True,
            last_sequence=5,
            acked_through=2,
            pending=[
                r.PendingMessageRecord(sequence=4, data=b"\xff\x00", digest="0" * 64),
                r.PendingMessageRecord(sequence=5, data=b"", digest="1" * 64),
            ],
            cursor=b"\x00cursor\xfe",
        )
    }
    record.messages = {
        "m1": r.MessageAttemptRecord(
            stream="events/readers",
            group="readers",
            sequence=3,
            parent=process,
            node_id="process",
            index=1,
            limit=2,
            state=r.AttemptState.CONFIRMED,
        )
    }
    record.managed = {
        "process": r.ManagedRecord(
            scope=root,
            parent=process,
            node_id="process",
            state=_ready("state", b'{"count":3}', "json:dict"),
            values=[_ready("total", b"42", "json:int")],
        )
    }
    return record


def _diff(
    old: dict[str, Any],
    new: dict[str, Any],
    path: tuple[str, ...],
    sets: list[tuple[tuple[str, ...], Any]],
    unsets: list[tuple[str, ...]],
) -> None:
    for key in sorted(new):
        if key not in old:
            sets.append(((*path, key), new[key]))
        elif old[key] != new[key]:
            if isinstance(old[key], dict) and isinstance(new[key], dict) and len(path) < 4:
                _diff(old[key], new[key], (*path, key), sets, unsets)
            else:
                sets.append(((*path, key), new[key]))
    unsets.extend((*path, key) for key in sorted(old) if key not in new)


def record_delta(old: r.RunRecord, new: r.RunRecord) -> bytes:
    """The delta from ``old`` to ``new`` (``new.revision == old.revision + 1``), as the bytes
    of :mod:`durable_core.records.delta`: what a caller may pass as ``EncodedRecord.delta``.

    Made by comparing the two records' JSON trees, object by object down to four levels.
    """
    before = json.loads(record_to_json(old))
    after = json.loads(record_to_json(new))
    sets: list[tuple[tuple[str, ...], Any]] = []
    unsets: list[tuple[str, ...]] = []
    _diff(before, after, (), sets, unsets)
    return encode_delta(old.revision, new.revision, sets, unsets)
