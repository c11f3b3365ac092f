"""Every hook is documented, exercised, and called through the manager's facade (STYLE
"Plugins": a meta-test per hook)."""

from pathlib import Path

import pytest

from durable_core import hookspecs
from durable_core.plugins import manager
from tests import ROOT

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


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_called_by_a_typed_method_of_the_manager(hook):
    source = Path(manager.__file__).read_text()
    assert f'"{hook}"' in source or f".hook.{hook}(" in source, f"no manager method calls {hook}"


def test_hooks_sit_in_banner_sections_of_the_spec_module():
    source = Path(hookspecs.__file__).read_text()
    banners = [line for line in source.splitlines() if line.startswith("# ") and "hooks" in line]
    assert len(banners) >= 3, banners
