"""docs/durable.md: every Python block runs, in order, in one namespace (the docs stay true)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "durable.md"


def blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.S | re.M)


def test_every_python_block_of_the_durable_guide_runs(capsys: pytest.CaptureFixture[str]) -> None:
    # covers: R-RT-3, R-NODE-1, G-6, G-11
    found = blocks()
    assert len(found) >= 2
    namespace = {"__name__": "docs_durable"}
    for number, code in enumerate(found, start=1):
        try:
            exec(compile(code, f"{DOC.name} block {number}", "exec"), namespace)
        except Exception as error:  # pragma: no cover - shows which block broke
            pytest.fail(f"block {number} of {DOC} failed: {error!r}\n{code}")
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "completed durable"
    assert printed[1] == "completed durable 2"
    assert printed[2] == "completed"  # the CancelToken example, nobody pressed Ctrl-C
    assert printed[3] == "['split confirmed at revision 3', 'longest confirmed at revision 4']"
    assert printed[4] == (
        "['running split', 'split completed', 'running longest', 'longest completed']"
    )
    assert len(printed) == 5
