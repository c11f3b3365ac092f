"""The operator library's floor: ``durable_core.ops`` never imports the CLI, and the paths the
docs named before it moved (``durable_core.maintenance``, ``.runinfo``, ``.outputs``,
``.nodeview``) are the moved modules themselves."""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

import durable_core.ops

MOVED = ["maintenance", "runinfo", "outputs", "nodeview"]


@pytest.mark.parametrize("name", MOVED)
def test_the_old_path_is_the_moved_module(name):
    old = importlib.import_module(f"durable_core.{name}")
    new = importlib.import_module(f"durable_core.ops.{name}")
    assert old is new
    assert all(getattr(old, public) is getattr(new, public) for public in new.__all__)


def test_the_store_plugins_names_stay_importable_from_the_old_path():
    from durable_core.maintenance import each, watch_marker_file, write_marker_file
    from durable_core.ops import maintenance

    assert (each, watch_marker_file, write_marker_file) == (
        maintenance.each,
        maintenance.watch_marker_file,
        maintenance.write_marker_file,
    )


def test_no_operator_module_imports_the_cli():
    folder = pathlib.Path(durable_core.ops.__file__).parent
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("durable_core.cli"), (path.name, node.module)
