"""The ground floor: ``outcomes.py`` imports nothing of Durable, and ``SkipNode`` is one class
on every documented path; a body that raises it in a worker process skips its node."""

from __future__ import annotations

import json
import subprocess
import sys

import durable_core
from durable_core.executors import ProcessExecutor
from durable_core.graph import Graph, Key, SkipNode, execute
from durable_core.graph.context import SkipNode as context_skip
from durable_core.outcomes import SkipNode as ground_skip
from tests import executor_bodies as eb

N = Key("n", int)
OUT = Key("out", int)


def test_outcomes_loads_no_other_module_of_durable():
    code = (
        "import json, sys; import durable_core.outcomes; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('durable_core'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == ["durable_core", "durable_core.outcomes"]


def test_skip_node_is_one_class_on_every_documented_path():  # covers: G-4
    assert durable_core.SkipNode is SkipNode is context_skip is ground_skip
    assert issubclass(SkipNode, BaseException) and not issubclass(SkipNode, Exception)


def test_a_skip_raised_in_a_worker_process_skips_the_node():  # covers: G-4
    graph = Graph("skips", inputs=[N])
    graph.node("work", requires=[N], provides=[OUT], executor="default")(eb.skip_when_positive)
    with ProcessExecutor(max_workers=1) as pool:
        skipped = execute(graph, {N: 3}, executor=pool)
        ran = execute(graph, {N: 0}, executor=pool)
    assert str(skipped.status) == "completed" and skipped.skipped(OUT)
    assert ran[OUT] == 0
