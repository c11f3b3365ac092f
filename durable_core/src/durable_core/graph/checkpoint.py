"""The checkpoint seam between the engine and the durable layer (G-12).

The engine knows nothing of storage. It tells a :class:`Checkpointer` what happens to scopes,
attempts and outputs, at fixed points, and it accepts outputs restored from a checkpoint. The
base class :class:`Checkpointer` does nothing (a plain in-memory engine); the durable layer
subclasses it and overrides the methods. Every method is a coroutine run on the event loop's
thread, and the engine awaits it before going on.

Handles
-------
:class:`Scope` is one execution of a graph: the root graph, or a child graph of a Sub node run
under one attempt of that node. :class:`Attempt` is a node's root attempt (``boundary == ""``,
``index == limit == 1``) or one Retry try (``boundary`` = the Retry aspect's fixed position,
``"graph:<i>"``/``"node:<i>"``). The checkpointer creates both (its methods return them) and puts
its own identities in ``id`` (R-REC-3: 16 random bytes in hex, or an adopted id from the
record) and anything else it needs in ``data``; the engine only passes them back.

Calls, in the order the engine makes them
------------------------------------------
1. ``open_scope(graph, path, parent, inputs)`` when a graph run starts: once for the root graph
   (``path=""``, ``parent=None``, ``inputs`` = the root inputs), and once each time a Sub node
   runs its child graph (``path`` = the Sub node's path, ``parent`` = the Sub node's deepest
   current attempt, whose id is the child scope's id by R-SCOPE-2; ``inputs`` = the values the
   child's inputs received, skipped ones listed as skipped). It happens after the Sub node's
   inputs have arrived, inside all of its aspects; a Retry on the Sub runs the child again under
   a new try, hence in a new scope. The child's reading groups of a stream in ``inputs`` have
   just been opened anew, from the stream's first element (``Stream.reopen``); a checkpointer
   that adopts the scope of a try begun before a restart gives them their saved tails again
   (``Stream.resume_groups``).
2. ``begin_node(scope, node)`` for every node of the scope, as soon as the scope is open and
   before the node waits for its inputs: it begins the node's root attempt. When the returned
   attempt has ``restored`` set (the node was confirmed earlier: R-NODE-1), the engine publishes
   those outputs, does not run the aspects or the body, and makes no further call for the node.
   When it has ``staged`` set (S-10), those values count as already set by the body.
3. ``begin_try(parent, boundary, index, limit)`` before each try of a Retry aspect, where
   ``parent`` is the node's deepest current attempt (the root attempt, or the try of an outer
   Retry). ``index`` is the try the engine means to run (1, then the previous returned index +
   1) and ``limit`` the Retry's ``attempts``. The returned attempt's ``index`` is authoritative:
   return a higher index to say that tries were already spent before a restart (adopting an
   active try keeps its index; failed ones count as spent), and ``index > limit`` to say the
   budget is spent: the engine then fails that Retry level with ``RetryExhaustedError`` without
   running anything (R-ATT-4: a restart never refills a budget).
4. ``open_stream(attempt, key, stream)`` when a body opens a stream it provides (first
   ``send``, ``open()``, or when the body returns for a writer that sent nothing), with the
   node's root attempt; before any reader can see the stream.
5. ``fail_attempt(attempt, error)`` when an attempt really failed: a Retry try whose inner
   chain raised (before the next ``begin_try`` at that boundary), and the root attempt when
   the node fails (after the tries). ``error`` is the exception (the body's own exception, a
   ``TimeoutError``, ``RetryExhaustedError``, or for a Sub node the child's
   ``NodeFailedError``). Skips and cancellations are never failures and are never reported.
   When the root attempt fails, the streams it opened are already in state ``"failed"``.
6. ``commit_node(attempt, outputs)`` when the node finished with its root attempt (completed,
   or skipped: by the body, or by the cascade when every input was skipped). The engine
   publishes the outputs downstream only after this returns, so a confirmation is always
   saved before anything depends on it. Streams the node produced are still open during the
   call and end right after it returns, so readers see a stream's end only after its producer
   is confirmed. A Retry try that succeeded gets no call of its own (R-ATT-2).
7. ``close_scope(scope, status)`` when every node of the scope has ended (``"completed"``,
   ``"failed"`` or ``"canceled"``).

``restore_node(scope, node)`` (synchronous) is asked first for every node as its scope starts
(through ``restore_nodes(scope, nodes)``, which asks it for each node in turn unless a
checkpointer answers them all in one pass): a root attempt with ``restored`` set there counts as
``begin_node``'s answer, and the engine publishes those outputs at once, without waiting (a
resume of many confirmed nodes needs no task per node). The default answers None: ask
``begin_node``.

``node_running(attempt)`` (synchronous) is told, with the node's root attempt, when the node's
body starts (a Sub node: when its child graph starts), once its inputs have arrived: once per
node per scope run, at its first try (a later Retry try finds its inputs there already). What
lies between ``begin_node`` and it is the time the node waited for its inputs (and a slot). The
default does nothing.

``share(scope, attempt, ready)`` (synchronous) decides how ready values reach their readers: it
is called with the root inputs when the root scope opens (``attempt=None``), and with a node's
ready outputs right after ``commit_node`` returned (or after ``begin_node`` returned them
restored), before they are published. The default returns ``ready``: every reader gets the same
objects. A checkpointer may return, for some names, a :class:`CopyOnRead`: the engine keeps it
in the slot and every read of the slot (``rc.get``, the run's result) gets its own copy, so a
body that mutates a value it received changes nothing any other reader sees.

Concurrency and errors
----------------------
Calls for different nodes may be in flight at the same time: several nodes finishing together
await their ``commit_node`` concurrently, so an implementation may confirm them in one save
(group commit) and resolve all of them when it succeeds. Calls for one node are sequential.
The engine never cancels a checkpointer call in progress: when the run is canceled, it waits
for the call to return. When a checkpointer method raises, the run stops with that exception
as the run's error (``status == "failed"``; the durable layer raises ``CheckpointError``, R-RT-2):
the engine cancels every body, reports nothing as failed, and makes no further checkpointer
call. A canceled attempt gets no call: it stays active and may be adopted by a later run. A method
that returns the wrong handle type stops the run with ``TypeError``; restored outputs that do
not cover exactly the node's provides, or hold a value of the wrong type, stop it with
``CorruptRecordError`` (staged values likewise). Restored outputs marked
``NodeOutputs.checked`` (their values were decoded with a check of each key's declared type)
skip the second type check; their cover of the provides is checked all the same.

``begin_node`` runs for every node at scope start and ``begin_try`` before a try waits for its
inputs; an implementation may keep such new attempts in memory and save them with the first
change that needs them (a failure, a commit, a child scope's commit), since an active attempt is
adopted again after a restart anyway.

Streams (SPEC S) add calls with a no-op default, so existing checkpointers keep working:

- ``send_element(attempt, key, stream, sequence, element)`` for each element a producer sends,
  before any reader can see it. It may return an awaitable: the element is then handed to
  readers only once that awaitable has succeeded (a save in flight; several elements may share
  one save), and the producer goes on meanwhile, up to the key's capacity.
- ``ack_elements(attempt, key, stream, group, generation, sequences)`` when a reader
  acknowledges deliveries (``delivery.ack()``). It may return an awaitable that succeeds once
  the ack is saved; ``await delivery.ack()`` waits for it.
- ``queue_element`` and ``queue_ack`` (synchronous, same arguments) are the same calls made
  without a coroutine, for a checkpointer whose calls only queue a save: the engine makes them
  first, on the event loop, and awaits ``send_element`` / ``ack_elements`` only when they return
  ``NotImplemented`` (the default). ``queue_ack`` returns None or an asyncio future, and reads
  that future's failure itself (the engine adds no callback to it).

A root attempt may carry ``streams``: the saved :class:`~durable_core.graph.StreamState` of the
streams an adopted producer had opened, so ``writer.position`` answers before the stream is open
again; ``open_stream`` then continues the stream from that state (``Stream.load``).

Processor nodes (message transactions, S-7, S-8) add four calls, made by the processor's body
on the event loop, in this order for each run of the body (see
:mod:`durable_core.graph.processor`):

8. ``open_processor(attempt, processor, input)`` once, before the first message: return a
   :class:`~durable_core.graph.Managed` with the committed state to continue from, or None to
   start from ``processor.initial``.
9. ``begin_message(attempt, message)`` before each try of each message (``message`` is the
   proposed :class:`~durable_core.graph.MessageAttempt`): the returned try's ``index`` is
   authoritative, as in ``begin_try``; ``index > limit`` fails the node without running. The
   first tries of the messages a plain handler runs in one hop are begun together, with
   ``begin_messages(attempt, key, deliveries, limit)`` (by default one ``begin_message`` each).
10. ``fail_message(message, error)`` when a try failed; its staged work is discarded.
11. ``commit_messages(attempt, commit)`` when a message (or a batch) succeeded, and once more
    with ``commit.final`` after ``finish``: the input's ack, the new state, the values and the
    sends of :class:`~durable_core.graph.MessageCommit` are one transaction. It may return an
    awaitable (the save still in flight): the sends reach readers once it succeeded, otherwise
    once the call returned. Meanwhile the engine runs the next messages, and it waits for that
    awaitable before its next ``commit_messages`` call: at most one commit of a node is in
    flight, and a failed one stops the run before the next is made. An output stream is
    opened (``open_stream``) before the first commit that sends to it.

Later extensions add methods with a no-op default to this class, so existing checkpointers
keep working.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from durable_core.records import NodeReason

if TYPE_CHECKING:
    from durable_core.graph.definition import Graph, Node
    from durable_core.graph.keys import Key
    from durable_core.graph.processor import Managed, MessageAttempt, MessageCommit, Processor
    from durable_core.graph.streams import Stream, StreamState

__all__ = [
    "AckFuture",
    "Attempt",
    "Checkpointer",
    "CopyOnRead",
    "NodeOutputs",
    "Scope",
    "Values",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_NONE: Any = object()


class AckFuture(asyncio.Future):  # type: ignore[type-arg]
    """The future a checkpointer's ``queue_ack`` may return: it succeeds once the ack is saved.

    Awaited by the ``async def`` body that acked (``await d.ack()``, in the body's own task and
    the same try), it gives the body's ``max_running`` slot back until it is answered, as a wait
    on a stream does: the body does no work meanwhile, and a run whose bodies all wait so has
    nothing to do but the save (a durable run then saves on the event loop, which spares two
    thread hops per save; S-2). Awaited anywhere else (a task the body started, which may wait
    while the body works), or through ``asyncio.wait``, ``gather`` or ``shield``, or once done,
    it is a plain future. The engine names the body and its try in ``body`` and ``holder``
    when it hands the future to the reader.
    """

    body: Any = None
    """The engine's running body that acked (with ``may_idle`` and ``idle``), or None."""
    holder: Any = None
    """The try that acked (the body's run context)."""

    def __await__(self) -> Generator[Any, None, Any]:
        body = self.body
        if body is None or self.done() or not body.may_idle(self.holder):
            return asyncio.Future.__await__(self)
        self.body = None  # a second await waits as a plain future
        return body.idle(_Answered(self)).__await__()  # type: ignore[no-any-return]


class _Answered:
    """``future`` awaited as a plain future (not through :meth:`AckFuture.__await__`)."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[Any]) -> None:
        self.future = future

    def __await__(self) -> Generator[Any, None, Any]:
        return asyncio.Future.__await__(self.future)


class CopyOnRead:
    """A ready value of which every reader gets its own copy (see ``Checkpointer.share``).

    Args:
        copy: returns a new copy of the value each time it is called (from any thread).
        first: an object no one else holds (a value freshly decoded for this purpose): the first
            reader gets it instead of a new copy. Omit it when there is none.
        source: anything the checkpointer that made this wants to find again (for example the
            encoded value, so that a Sub node's output passed through ``Out`` is not encoded
            twice); the engine never looks at it.
    """

    __slots__ = ("_copy", "_first", "source")

    def __init__(self, copy: Callable[[], Any], first: Any = _NONE, source: Any = None) -> None:
        self._copy = copy
        self._first = [] if first is _NONE else [first]
        self.source = source

    def read(self) -> Any:
        """A copy of the value no other reader holds."""
        try:
            return self._first.pop()  # atomic: two threads never get the same object
        except IndexError:
            return self._copy()

    def __repr__(self) -> str:
        return f"<CopyOnRead {self.source!r}>"


def read_slot(value: Any) -> Any:
    """What a reader of a slot holding ``value`` gets: a copy when it is a CopyOnRead."""
    return value.read() if type(value) is CopyOnRead else value


@attrs.frozen
class Values:
    """Slot values by key name: ready values and skipped keys (pending keys are absent).

    Attributes:
        ready: ready values by key name (a ready value may be ``None``, empty, zero).
        skipped: names of skipped keys; never also in ``ready``.
    """

    ready: Mapping[str, Any] = _EMPTY
    skipped: frozenset[str] = frozenset()


@attrs.frozen
class NodeOutputs:
    """A node's complete outputs: committed, or restored from a checkpoint (R-NODE-1).

    Every provided key is in exactly one of ``ready`` and ``skipped``.

    Attributes:
        reason: ``NodeReason.COMPLETED``, or ``NodeReason.SKIPPED`` when the whole node was
            skipped (then ``ready`` is empty).
        ready: ready values by key name; a stream key's value is its
            :class:`~durable_core.graph.Stream`.
        skipped: names of skipped keys.
        checked: restored outputs only: True when the checkpointer has already checked that
            every ready value is an instance of its key's declared type (it decoded each one
            with that check, and none is a stream); the engine then does not check their types
            again. It still checks that the outputs cover exactly the node's provides. Not
            compared.
        as_is: restored outputs only: True when the checkpointer's ``share`` would hand
            ``ready`` on as it is (every value is immutable); the engine then publishes them
            without calling ``share``. Not compared.
    """

    reason: NodeReason
    ready: Mapping[str, Any] = _EMPTY
    skipped: frozenset[str] = frozenset()
    checked: bool = attrs.field(default=False, eq=False)
    as_is: bool = attrs.field(default=False, eq=False)


@attrs.frozen(eq=False)
class Scope:
    """One execution of a graph (R-SCOPE-1, R-SCOPE-2); created by
    :meth:`Checkpointer.open_scope`.

    Attributes:
        id: the scope's identity (the run's root scope id; for a child scope, the id of the
            Sub node's deepest attempt). ``""`` with the no-op checkpointer.
        graph: the graph run in this scope.
        path: the static mount position: ``""`` for the root, ``"report"``,
            ``"report/inner"`` for Sub levels. Describes position only, never identity.
        parent: the Sub node's attempt the scope runs under; None for the root scope.
        data: free for the checkpointer's own bookkeeping; the engine never reads it.
    """

    id: str
    graph: Graph
    path: str = ""
    parent: Attempt | None = None
    data: Any = None


@attrs.frozen(eq=False)
class Attempt:
    """A node's root attempt or one Retry try (R-ATT-1); created by
    :meth:`Checkpointer.begin_node` and :meth:`Checkpointer.begin_try`.

    Attributes:
        id: the attempt's identity (16 random bytes in hex, or adopted from the record); ``""``
            with the no-op checkpointer.
        scope: the scope of the node.
        node: the node.
        parent: the outer attempt of a Retry try; None for a root attempt.
        boundary: ``""`` for a root attempt; the Retry aspect's position otherwise.
        index: 1-based try index under (parent, node, boundary); 1 for a root attempt.
        limit: the budget under (parent, node, boundary); 1 for a root attempt.
        restored: root attempts only: the node's confirmed outputs; when set, the body does
            not run and these outputs are published.
        staged: root attempts only: outputs adopted before the node completed (S-10); they
            count as already set by the body and are committed with the node.
        streams: root attempts only: the saved state of the streams an adopted producer had
            opened, by key name (S-3).
        data: free for the checkpointer's own bookkeeping; the engine never reads it.
    """

    id: str
    scope: Scope
    node: Node
    parent: Attempt | None = None
    boundary: str = ""
    index: int = 1
    limit: int = 1
    restored: NodeOutputs | None = None
    staged: Values | None = None
    streams: Mapping[str, StreamState] | None = None
    data: Any = None

    @property
    def node_id(self) -> str:
        """The node's id."""
        return self.node.id

    @property
    def path(self) -> str:
        """The node's path from the root graph (``"report/count"``)."""
        return f"{self.scope.path}/{self.node.id}" if self.scope.path else self.node.id

    @property
    def root(self) -> Attempt:
        """The node's root attempt (this attempt for a root attempt)."""
        attempt = self
        while attempt.parent is not None:
            attempt = attempt.parent
        return attempt


class Checkpointer:
    """The checkpoint interface the engine calls (G-12); this base class does nothing.

    Subclass it and override what you need; see the module documentation for when each
    method is called. Every method runs on the event loop thread.
    """

    async def open_scope(
        self, graph: Graph, path: str, parent: Attempt | None, inputs: Values
    ) -> Scope:
        """Open the scope of a graph run (the root graph, or a Sub node's child graph).

        Args:
            graph: the graph about to run.
            path: its mount position (``""`` for the root, else the Sub node's path).
            parent: None for the root; the Sub node's deepest current attempt otherwise.
            inputs: the values the graph's inputs receive (by child key name).

        Returns:
            The scope; the engine passes it to ``begin_node`` for each node of the graph.
        """
        return Scope(id="", graph=graph, path=path, parent=parent)

    async def begin_node(self, scope: Scope, node: Node) -> Attempt:
        """Begin a node's root attempt, or say it is already confirmed.

        Args:
            scope: the node's scope.
            node: the node.

        Returns:
            The root attempt (``boundary=""``, ``index=limit=1``); with ``restored`` set when
            the node's outputs are confirmed already (the body then does not run), with
            ``staged`` set to adopt outputs (S-10).
        """
        return Attempt(id="", scope=scope, node=node)

    async def begin_try(self, parent: Attempt, boundary: str, index: int, limit: int) -> Attempt:
        """Begin one try of a Retry aspect.

        Args:
            parent: the node's deepest current attempt (root attempt or outer try).
            boundary: the Retry aspect's fixed position (``"graph:0"``, ``"node:1"``).
            index: the try the engine means to run (1-based).
            limit: the Retry's budget (its ``attempts``).

        Returns:
            The try. Its ``index`` is authoritative (>= ``index``); ``index > limit`` means the
            budget is spent and the engine fails this Retry level without running anything.
        """
        return Attempt(
            id="",
            scope=parent.scope,
            node=parent.node,
            parent=parent,
            boundary=boundary,
            index=index,
            limit=limit,
        )

    async def fail_attempt(self, attempt: Attempt, error: BaseException) -> None:
        """An attempt (a try, then the root attempt) really failed with ``error``."""

    async def commit_node(self, attempt: Attempt, outputs: NodeOutputs) -> None:
        """Confirm a node's complete outputs; the engine publishes them after this returns.

        Args:
            attempt: the node's root attempt.
            outputs: every provided key, ready or skipped; ``reason`` says whether the node
                completed or was skipped as a whole.
        """

    async def open_stream(self, attempt: Attempt, key: Key[Any], stream: Stream) -> None:
        """A body opened the stream ``key`` it provides; readers see it after this returns.

        Args:
            attempt: the producing node's root attempt (streams belong to root attempts).
            key: the stream key.
            stream: the stream object (its ``sequence`` grows as elements are sent).
        """

    async def send_element(
        self, attempt: Attempt, key: Key[Any], stream: Stream, sequence: int, element: Any
    ) -> Any:
        """A producer sends element ``sequence`` of ``stream`` (its position already set on
        the stream when given with ``send_at``).

        Args:
            attempt: the producing node's root attempt.
            key: the stream key.
            stream: the stream (``position``, ``positioned`` and ``resumable`` are current).
            sequence: the element's sequence number (1, 2, …).
            element: the element.

        Returns:
            None to hand the element to readers now, or an awaitable that succeeds once the
            element is saved (readers get it only then).
        """
        return None

    async def ack_elements(
        self,
        attempt: Attempt,
        key: Key[Any],
        stream: Stream,
        group: str,
        generation: int,
        sequences: tuple[int, ...],
    ) -> Any:
        """A reader acknowledges delivered elements of ``stream`` for its ``group``.

        Args:
            attempt: the reading node's root attempt.
            key: the key the reader reads the stream by.
            stream: the stream.
            group: the reading group (the reading node's path).
            generation: the generation the elements were delivered with.
            sequences: their sequence numbers.

        Returns:
            None (done), or an awaitable that succeeds once the ack is saved.
        """
        return None

    def queue_element(
        self, attempt: Attempt, key: Key[Any], stream: Stream, sequence: int, element: Any
    ) -> Any:
        """:meth:`send_element` without a coroutine (synchronous; see the module
        documentation).

        Returns:
            ``NotImplemented`` (the default): the engine awaits :meth:`send_element` instead;
            otherwise what :meth:`send_element` would return.
        """
        return NotImplemented

    def queue_ack(
        self,
        attempt: Attempt,
        key: Key[Any],
        stream: Stream,
        group: str,
        generation: int,
        sequences: tuple[int, ...],
    ) -> Any:
        """:meth:`ack_elements` without a coroutine (synchronous; see the module
        documentation).

        Returns:
            ``NotImplemented`` (the default): the engine awaits :meth:`ack_elements` instead;
            None (done); or an asyncio future that succeeds once the ack is saved, whose
            failure the checkpointer reads itself. When it is an :class:`AckFuture`, an async
            body awaiting it gives its ``max_running`` slot back meanwhile.
        """
        return NotImplemented

    async def close_scope(self, scope: Scope, status: str) -> None:
        """Every node of ``scope`` ended; ``status`` is completed, failed or canceled."""

    def node_running(self, attempt: Attempt) -> None:
        """The body of ``attempt``'s node starts (synchronous; see the module documentation).

        Args:
            attempt: the node's root attempt (as ``begin_node`` returned it).
        """

    def restore_node(self, scope: Scope, node: Node) -> Attempt | None:
        """A node's root attempt with ``restored`` outputs, when known without waiting.

        Synchronous; called for every node of a scope as the scope starts, before
        ``begin_node``. An attempt with ``restored`` set is taken as ``begin_node``'s answer:
        the engine publishes those outputs at once, without a task for the node, and makes no
        further call for it. ``None`` (the default) means: ask ``begin_node``.

        Args:
            scope: the node's scope.
            node: the node.

        Returns:
            The restored root attempt, or None.
        """
        return None

    def restore_nodes(self, scope: Scope, nodes: Sequence[Node]) -> Sequence[Attempt | None]:
        """:meth:`restore_node` for every node of a scope at once, as the scope starts.

        The engine calls this, not :meth:`restore_node`; the default asks
        :meth:`restore_node` for each node in turn. A checkpointer that restores many nodes
        may answer them in one pass.

        Args:
            scope: the scope that starts.
            nodes: its nodes, in the order of the scope's plan.

        Returns:
            One answer per node, in the same order: its restored root attempt, or None.
        """
        return [self.restore_node(scope, node) for node in nodes]

    # -- processor nodes (message transactions) --------------------------------------------

    async def open_processor(
        self, attempt: Attempt, processor: Processor[Any], input: Stream | None
    ) -> Managed | None:
        """A processor node's body starts (S-7).

        Args:
            attempt: the node's root attempt.
            processor: the processor (its ``state`` type, ``initial`` state, ``retry``).
            input: the input stream it reads as its group ``attempt.path``; None when the
                input was skipped.

        Returns:
            The committed state to continue from, or None to start from ``initial``.
        """
        return None

    async def begin_message(self, attempt: Attempt, message: MessageAttempt) -> MessageAttempt:
        """Begin one try of one input message (S-7).

        Args:
            attempt: the node's root attempt.
            message: the try the engine means to run (its ``sequence``, ``index``, ``limit``).

        Returns:
            The try; its ``index`` is authoritative (>= ``message.index``): a higher one says
            tries were spent before a restart, ``index > limit`` that the budget is spent.
        """
        return message

    async def begin_messages(
        self,
        attempt: Attempt,
        key: Key[Any],
        deliveries: tuple[tuple[int, int], ...],
        limit: int,
    ) -> list[MessageAttempt]:
        """Begin the first try of several messages, in sequence order (S-7): what
        :meth:`begin_message` answers for each of them, in one call.

        The default calls :meth:`begin_message` for each, so a checkpointer that overrides only
        that one keeps its answers; override this one to spare a call per message.

        Args:
            attempt: the node's root attempt.
            key: the input stream key.
            deliveries: ``(sequence, generation)`` of each message, in order.
            limit: each message's budget.

        Returns:
            One try per delivery, in order, as :meth:`begin_message` returns them.
        """
        from durable_core.graph.messages import MessageAttempt

        return [
            await self.begin_message(
                attempt,
                MessageAttempt.first(attempt, key, sequence, generation, limit),
            )
            for sequence, generation in deliveries
        ]

    async def fail_message(self, message: MessageAttempt, error: BaseException) -> None:
        """A try of a message failed with ``error``; what it staged is discarded."""

    async def commit_messages(self, attempt: Attempt, commit: MessageCommit) -> Any:
        """Commit one message transaction (or a batch of them) as one (S-8).

        Args:
            attempt: the node's root attempt.
            commit: the messages' successful tries (acked by this commit), the new state,
                every value set so far, the elements sent, and whether reading ended
                (``stopped``) or this is the final transaction after ``finish`` (``final``).

        Returns:
            None when the commit is saved; or an awaitable that succeeds once it is saved
            (the sends reach readers only then, and the next commit of the node waits for
            it; its failure stops the run).
        """
        return None

    def watch_bodies(self, running: Callable[[], int]) -> None:
        """Called once (synchronous), before the root scope opens, with a function that says
        how many bodies hold a ``max_running`` slot when it is called: async bodies from their
        start to their return (not while they wait without a slot, for a stream or a Retry's
        delay), plain bodies in worker threads, function-form bodies on an executor.

        A checkpointer may use it to choose where its saves run: while it returns 0, nothing
        else could use the event loop, so a save made on it holds up nobody. The default
        ignores it.
        """

    def watch_turns(self, alone: Callable[[], bool]) -> None:
        """Called once (synchronous), before the root scope opens, with a function that says,
        when called on the event loop, whether nothing else is ready to run before the loop's
        next turn but what cannot commit: the engine's bookkeeping of ended node tasks and the
        first steps of node tasks whose inputs are not all there yet. No other node's body and
        no checkpointer call can go on before then.

        A checkpointer that gathers the commits made in one turn into one save may use it to
        start a save at once when no other commit could join it. The default ignores it.
        """

    def share(
        self, scope: Scope, attempt: Attempt | None, ready: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """How ready values reach their readers (synchronous; see the module documentation).

        Args:
            scope: the scope the values are published in.
            attempt: the node's root attempt (its outputs were just committed or restored);
                None for the root graph's inputs.
            ready: the ready values by key name (a stream key's value is its Stream).

        Returns:
            A mapping with the same names: each value itself (shared by every reader), or a
            :class:`CopyOnRead` that gives every reader its own copy. The default returns
            ``ready`` unchanged.
        """
        return ready
