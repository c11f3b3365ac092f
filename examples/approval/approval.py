"""Draft a report, wait for a human's approval (or a timer), then publish or discard it.

The graph (4 nodes and the built-in intake of the inbox):

- ``draft`` audits a Python source tree with the nodes' code of ``examples/stdlib_audit``
  (by default the first ``max_files`` files of the running interpreter's standard library) and
  drafts the report as Markdown;
- ``expires`` is a durable timer: it arms the deadline *now + wait_seconds* once (one hour by
  default); after a restart the run waits only the time left;
- ``decide`` reads the inbox ``decisions`` until a message ``"approve"`` or ``"reject"``
  arrives, or the deadline passes, whichever comes first; any other message is kept as a
  comment. It reads without acknowledging, so after a restart it reads every message taken in
  again, from the record, and comes to the same decision;
- ``publish`` writes the report to ``out_dir/published/report.md`` when it was approved, or
  ``out_dir/discarded/report.md`` otherwise (a file written atomically: doing it twice after a
  crash writes the same file).

Post a decision with ``durable send approval.toml RUN_ID decisions '"approve"'``; see
``README.md`` in this folder.
"""

from __future__ import annotations

import pathlib
import sys

import attrs

from durable_core import hookimpl
from durable_core.graph import Graph, Key
from durable_core.graph.waits import receive_before

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "stdlib_audit"))
import audit  # (the audit example's functions, reused as they are)

VERDICTS = {"approve": "approved", "reject": "rejected"}


@attrs.frozen
class Comment:
    """A message that was neither ``approve`` nor ``reject``, with its inbox sequence."""

    sequence: int
    text: str


@attrs.frozen
class Decision:
    """What ``decide`` concluded.

    Attributes:
        verdict: ``"approved"``, ``"rejected"`` or ``"expired"`` (the deadline passed first).
        comments: every other message, in order.
        decided_by: the inbox sequence of the deciding message (0 when it expired).
    """

    verdict: str
    comments: list[Comment]
    decided_by: int


SOURCE = Key("source", str)
"""``"stdlib"`` or a directory to audit."""
MAX_FILES = Key("max_files", int)
WAIT_SECONDS = Key("wait_seconds", float)
"""How long to wait for a decision (seconds)."""
OUT_DIR = Key("out_dir", str)

REPORT = Key("report", str)
DEADLINE = Key("deadline", float)
DECISIONS = Key("decisions", str, stream=True, inbox=True)
"""The inbox: ``"approve"``, ``"reject"``, or a comment."""
DECISION = Key("decision", Decision)
PUBLISHED = Key("published", str)


def build_graph() -> Graph:
    """The approval graph (see the module documentation)."""
    graph = Graph("approval", inputs=[SOURCE, MAX_FILES, WAIT_SECONDS, OUT_DIR])

    @graph.node("draft", requires=[SOURCE, MAX_FILES], provides=[REPORT])
    def draft(rc):
        root = audit.resolve_source(rc.get(SOURCE))
        files = audit.list_python_files(root, rc.get(MAX_FILES))
        rc.set(REPORT, audit.render_markdown(audit.audit_files(root, files), str(root)))

    graph.timer("expires", seconds_from=WAIT_SECONDS, provides=DEADLINE)

    @graph.node("decide", requires=[REPORT, DEADLINE, DECISIONS], provides=[DECISION])
    async def decide(rc):
        reader = rc.reader(DECISIONS)
        comments: list[Comment] = []
        while True:
            try:
                delivery = await receive_before(rc, reader, rc.get(DEADLINE))
            except StopAsyncIteration:
                delivery = None
            if delivery is None:  # the deadline passed first
                rc.set(DECISION, Decision("expired", comments, 0))
                return
            text = delivery.value.strip().lower()
            if text in VERDICTS:
                rc.set(DECISION, Decision(VERDICTS[text], comments, delivery.sequence))
                return
            comments.append(Comment(delivery.sequence, delivery.value))

    @graph.node("publish", requires=[REPORT, DECISION, OUT_DIR], provides=[PUBLISHED])
    def publish(rc):
        decision = rc.get(DECISION)
        folder = "published" if decision.verdict == "approved" else "discarded"
        path = pathlib.Path(rc.get(OUT_DIR)) / folder / "report.md"
        comments = "".join(f"- {c.text} (message {c.sequence})\n" for c in decision.comments)
        footer = f"\n## Review\n\n{decision.verdict}\n\n{comments}"
        audit.write_atomically(path, rc.get(REPORT) + footer)
        rc.set(PUBLISHED, str(path))

    return graph


graph = build_graph()


@hookimpl
def durable_register_codecs(codecs):
    """The codecs of :class:`Comment` and :class:`Decision` (the graph's module is loaded as a
    plugin)."""
    codecs.register_json(Comment)
    codecs.register_json(Decision)
