"""The record wing stays on the ground floor: it imports only the error family and the small
helpers beside it, its modules are short and each says its job, and the old paths re-export it."""

from __future__ import annotations

import ast
import importlib
import pathlib
from collections.abc import Iterator

import pytest

import durable_core.records

WING = pathlib.Path(durable_core.records.__file__).parent
MODULES = sorted(WING.glob("*.py"))
# What the wing may import from Durable besides itself: nothing that imports it back.
GROUND = {
    "durable_core.errors",
    "durable_core._digest",
    "durable_core._nogc",
    "durable_core._words",
}


def type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node`` except what ``if TYPE_CHECKING:`` holds (never run)."""
    for child in ast.iter_child_nodes(node):
        if not type_checking(child):
            yield child
            yield from walk(child)


def durable_imports(path: pathlib.Path) -> set[str]:
    """The modules of Durable that ``path`` imports when it runs."""
    names: set[str] = set()
    for node in walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "durable_core":
                names.update(f"durable_core.{alias.name}" for alias in node.names)
            elif node.module.startswith("durable_core."):
                names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("durable_core"))
    return names


def test_the_wing_has_its_modules():
    assert {path.stem for path in MODULES} == {
        "__init__",
        "model",
        "path",
        "fields",
        "fastpath",
        "jsonio",
        "encoder",
        "delta",
        "integrity",
        "check",
    }


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.stem)
def test_a_module_imports_only_the_ground_floor(path: pathlib.Path):
    outside = {
        name
        for name in durable_imports(path)
        if name not in GROUND and not name.startswith("durable_core.records")
    }
    assert not outside, f"{path.name} imports {sorted(outside)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.stem)
def test_a_module_is_short_and_says_its_job(path: pathlib.Path):
    text = path.read_text(encoding="utf-8")
    if path.stem != "integrity":  # the rules of the data model are one pass, kept together
        assert len(text.splitlines()) <= 800
    docstring = ast.get_docstring(ast.parse(text))
    assert docstring and len(docstring.splitlines()[0]) > 20


def test_the_ground_modules_import_nothing_of_durable():
    for name in GROUND:
        module = importlib.import_module(name)
        assert module.__file__ is not None
        assert not durable_imports(pathlib.Path(module.__file__)), name


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("durable_core.recordjson", "durable_core.records.jsonio"),
        ("durable_core.recordjson", "durable_core.records.encoder"),
        ("durable_core.recordjson", "durable_core.records.fields"),
        ("durable_core.recorddelta", "durable_core.records.delta"),
        ("durable_core._recordpath", "durable_core.records.path"),
        ("durable_core.integrity", "durable_core.records.integrity"),
    ],
)
def test_the_old_paths_re_export_the_public_names(old: str, new: str):
    before, after = importlib.import_module(old), importlib.import_module(new)
    for name in after.__all__:
        assert getattr(before, name) is getattr(after, name), (old, name)


def test_the_package_names_the_record_classes():
    model = importlib.import_module("durable_core.records.model")
    assert durable_core.records.__all__ == model.__all__
    for name in model.__all__:
        assert getattr(durable_core.records, name) is getattr(model, name), name
