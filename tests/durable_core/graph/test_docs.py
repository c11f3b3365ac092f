"""docs/graphs.md: every Python block runs, in order, in one namespace (the docs stay true)."""

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "graphs.md"


def blocks():
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.S | re.M)


# covers: G-1, G-4, G-8, G-9, G-10, G-11, G-12
def test_every_python_block_of_the_graphs_guide_runs(capsys):
    found = blocks()
    assert len(found) >= 10
    namespace = {"__name__": "docs_graphs"}
    for number, code in enumerate(found, start=1):
        try:
            exec(compile(code, f"{DOC.name} block {number}", "exec"), namespace)
        except Exception as error:  # pragma: no cover - shows which block broke
            pytest.fail(f"block {number} of {DOC} failed: {error!r}\n{code}")
    printed = capsys.readouterr().out
    assert "required key 'words' has no source" in printed
    assert "graph-wide: double at graph:0" in printed and "own: double at node:0" in printed
