"""The test tree mirrors the code (docs/architecture.md, "Tests").

``tests/<distribution>/<package>/test_<module>.py``: every folder that holds Python is a
package, so helpers are imported by their dotted name and no test edits ``sys.path``; each
folder below ``tests/<distribution>`` names a package of that distribution; a test module's name
does not repeat its folder's. ``tests/e2e`` holds the end-to-end tests and mirrors nothing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests import ROOT

TESTS = ROOT / "tests"
END_TO_END = TESTS / "e2e"
SYS_PATH_EDITS = ("sys.path.insert", "sys.path.append", "sys.path[0:0]")


def python_folders() -> list[Path]:
    """The folders under ``tests`` that hold Python files (a data folder holds none)."""
    folders = {path.parent for path in TESTS.rglob("*.py") if "__pycache__" not in path.parts}
    return sorted(folders)


def mirrored_folders() -> list[Path]:
    """The folders that stand for a distribution or one of its packages (all but e2e)."""
    return [
        folder
        for folder in python_folders()
        if folder != TESTS and END_TO_END not in (folder, *folder.parents)
    ]


def test_the_tree_has_folders_to_check():
    assert TESTS / "durable_core" / "records" in mirrored_folders()
    assert END_TO_END in python_folders()


@pytest.mark.parametrize("folder", python_folders(), ids=lambda f: str(f.relative_to(ROOT)))
def test_every_folder_holding_python_is_a_package(folder: Path):
    assert (folder / "__init__.py").is_file(), f"{folder.relative_to(ROOT)} has no __init__.py"


def test_no_test_module_edits_sys_path():
    offenders = [
        f"{path.relative_to(ROOT)}: {edit}"
        for path in sorted(TESTS.rglob("*.py"))
        if path != Path(__file__).resolve()
        for edit in SYS_PATH_EDITS
        if edit in path.read_text("utf-8")
    ]
    assert not offenders, "import helpers as tests.… instead of editing sys.path: " + ", ".join(
        offenders
    )


@pytest.mark.parametrize("folder", mirrored_folders(), ids=lambda f: str(f.relative_to(ROOT)))
def test_every_folder_names_a_package_of_its_distribution(folder: Path):
    name = ".".join(folder.relative_to(TESTS).parts)
    spec = importlib.util.find_spec(name)
    assert spec is not None, f"tests/{name.replace('.', '/')} names no package: {name}"
    assert spec.submodule_search_locations is not None, f"{name} is a module, not a package"
    assert Path(spec.origin or "").resolve().parts[-1] == "__init__.py", name


@pytest.mark.parametrize("folder", python_folders(), ids=lambda f: str(f.relative_to(ROOT)))
def test_no_test_module_repeats_its_folder_name(folder: Path):
    stutter = sorted(p.name for p in folder.glob(f"test_{folder.name}_*.py"))
    assert not stutter, f"{folder.relative_to(ROOT)}: drop the folder's name from {stutter}"
