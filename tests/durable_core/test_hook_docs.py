"""Every hook is documented and exercised (STYLE "Plugins": a meta-test per hook)."""

from pathlib import Path

import pytest

from durable_core import hookspecs

ROOT = Path(__file__).resolve().parents[2]
HOOKS = sorted(name for name in dir(hookspecs) if name.startswith("durable_"))


def test_there_are_hooks():
    assert len(HOOKS) >= 4


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_a_docstring_and_a_docs_entry_and_a_test(hook):
    assert (getattr(hookspecs, hook).__doc__ or "").strip(), f"{hook} has no docstring"
    assert f"`{hook}(" in (ROOT / "docs" / "plugins.md").read_text(), f"{hook} not in docs"
    tests = "".join(
        p.read_text() for p in (ROOT / "tests").rglob("test_*.py") if p.name != "test_hook_docs.py"
    )
    assert hook in tests, f"no test mentions {hook}"
