"""Test helpers for the engine: a checkpointer that records every call and remembers, across
runs, what a durable layer would keep in its record (confirmed nodes, attempts and their states).

``MemoryCheckpointer`` follows the rules the durable layer must follow (R-ATT-*, R-SCOPE-2,
R-NODE-1): a root attempt is adopted while active, a Retry try is adopted while active and
failed tries count as spent, a child scope's id is the Sub node's deepest attempt id, and a
node's confirmed outputs are restored instead of running its body.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import attrs

from durable_core.graph import Attempt, Checkpointer, NodeOutputs, Scope, Values


@attrs.define
class AttemptState:
    id: str
    parent: str  # scope id for root attempts, attempt id for tries
    node_id: str
    boundary: str
    index: int
    limit: int
    state: str = "active"  # active | failed | confirmed


@attrs.define
class Memory:
    """What survives between runs (the durable layer's record, in memory)."""

    attempts: dict[str, AttemptState] = attrs.Factory(dict)
    confirmed: dict[tuple[str, str], NodeOutputs] = attrs.Factory(dict)  # (scope, node)
    staged: dict[tuple[str, str], Values] = attrs.Factory(dict)
    ids: Any = attrs.Factory(lambda: itertools.count(1))

    def new_id(self) -> str:
        return f"a{next(self.ids)}"

    def tries(self, parent: str, node_id: str, boundary: str) -> list[AttemptState]:
        return sorted(
            (
                a
                for a in self.attempts.values()
                if a.parent == parent and a.node_id == node_id and a.boundary == boundary
            ),
            key=lambda a: a.index,
        )


class MemoryCheckpointer(Checkpointer):
    """Records calls as tuples in ``calls``; keeps confirmations and attempts in ``memory``."""

    def __init__(
        self,
        memory: Memory | None = None,
        *,
        commit_delay: float = 0.0,
        fail_commit_of: str | None = None,
        root_scope: str = "root",
    ) -> None:
        self.memory = memory if memory is not None else Memory()
        self.calls: list[tuple[Any, ...]] = []
        self.commit_delay = commit_delay
        self.fail_commit_of = fail_commit_of
        self.root_scope = root_scope
        self.events: list[str] = []  # shared timeline with bodies, for ordering checks

    async def open_scope(self, graph, path, parent, inputs):
        scope_id = self.root_scope if parent is None else parent.id
        self.calls.append(("open_scope", path, scope_id, dict(inputs.ready), inputs.skipped))
        return Scope(id=scope_id, graph=graph, path=path, parent=parent)

    async def begin_node(self, scope, node):
        memory = self.memory
        confirmed = memory.confirmed.get((scope.id, node.id))
        if confirmed is not None:
            self.calls.append(("restore", _path(scope, node.id)))
            return Attempt(id="restored", scope=scope, node=node, restored=confirmed)
        active = [a for a in memory.tries(scope.id, node.id, "") if a.state == "active"]
        if active:
            attempt_id = active[0].id
        else:
            attempt_id = memory.new_id()
            memory.attempts[attempt_id] = AttemptState(attempt_id, scope.id, node.id, "", 1, 1)
        self.calls.append(("begin_node", _path(scope, node.id), attempt_id))
        return Attempt(
            id=attempt_id,
            scope=scope,
            node=node,
            staged=memory.staged.get((scope.id, node.id)),
        )

    async def begin_try(self, parent, boundary, index, limit):
        memory = self.memory
        tries = memory.tries(parent.id, parent.node_id, boundary)
        active = [a for a in tries if a.state == "active"]
        if active:
            state = active[0]
        else:
            spent = sum(1 for a in tries if a.state == "failed")
            new_index = max(index, spent + 1)
            state = AttemptState(
                memory.new_id(), parent.id, parent.node_id, boundary, new_index, limit
            )
            if new_index <= limit:
                memory.attempts[state.id] = state
        self.calls.append(("begin_try", parent.path, boundary, index, state.index, state.id))
        return Attempt(
            id=state.id,
            scope=parent.scope,
            node=parent.node,
            parent=parent,
            boundary=boundary,
            index=state.index,
            limit=limit,
        )

    async def fail_attempt(self, attempt, error):
        self.memory.attempts[attempt.id].state = "failed"
        self.calls.append(("fail_attempt", attempt.path, attempt.boundary, attempt.index, error))

    async def commit_node(self, attempt, outputs):
        self.events.append(f"commit-start:{attempt.path}")
        if self.commit_delay:
            await asyncio.sleep(self.commit_delay)
        if self.fail_commit_of == attempt.path:
            self.calls.append(("commit_failed", attempt.path))
            raise OSError(f"disk full while confirming {attempt.path}")
        self.memory.attempts[attempt.id].state = "confirmed"
        self.memory.confirmed[(attempt.scope.id, attempt.node_id)] = outputs
        self.calls.append(("commit_node", attempt.path, outputs))
        self.events.append(f"commit-end:{attempt.path}")

    async def open_stream(self, attempt, key, stream):
        self.calls.append(("open_stream", attempt.path, key.name))
        self.events.append(f"open_stream:{attempt.path}")

    async def close_scope(self, scope, status):
        self.calls.append(("close_scope", scope.path, scope.id, status))

    def names(self) -> list[str]:
        return [call[0] for call in self.calls]

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [call for call in self.calls if call[0] == kind]


def _path(scope: Scope, node_id: str) -> str:
    return f"{scope.path}/{node_id}" if scope.path else node_id


def sample_definition():
    """A graph exercising every part of the fingerprint; built the same way in any process."""
    from durable_core.graph import Graph, In, Key, Out, Retry, Timeout

    tags = Key("tags", frozenset[str])
    table = Key("table", dict[str, list[int]])
    lines = Key("lines", str, stream=True, capacity=8)
    total = Key("total", int | None)
    child_tags = Key("child_tags", frozenset[str])
    child_count = Key("child_count", int)

    child = Graph("child", inputs=[child_tags])
    child.add_node(
        "count",
        lambda rc: None,
        requires=[child_tags],
        provides=[child_count],
        aspects=[Timeout(5)],
    )
    g = Graph("sample", inputs=[tags], aspects=[Retry(2, delay=0.5)])
    g.add_node("table", lambda rc: None, requires=[tags], provides=[table, lines])
    g.add_node(
        "total",
        lambda rc: None,
        requires=[table, lines],
        provides=[total],
        aspects=[Retry(3), Timeout(1.5)],
    )
    g.sub(
        "child",
        child,
        bindings=[In(tags, child_tags), Out(child_count, Key("count", int))],
        aspects=[Retry(4)],
    )
    return g
