"""Each invocation of the ``durable`` command builds one plugin manager and hands it to
everything it does (real file and SQLite stores, the real plugins)."""

from __future__ import annotations

from typing import Any

import pytest

import durable_core.plugins
import durable_core.plugins.manager


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every plugin manager built from now on (real managers, counted)."""
    made: list[Any] = []
    real = durable_core.plugins.manager.make_plugin_manager

    def counted(**kwargs: Any) -> Any:
        made.append(real(**kwargs))
        return made[-1]

    durable_core.plugins.make_plugin_manager  # noqa: B018 - bind the lazy name before patching
    monkeypatch.setattr(durable_core.plugins, "make_plugin_manager", counted)
    monkeypatch.setattr(durable_core.plugins.manager, "make_plugin_manager", counted)
    return made


def test_run_inspect_and_a_plugin_command_build_one_manager_each(ops, builds):
    ran = ops.invoke("run", ops.config)
    assert ran.exit_code == 0, ran.output
    assert len(builds) == 1
    shown = ops.invoke("inspect", ops.config)
    assert shown.exit_code == 0, shown.output
    assert len(builds) == 2
    unknown = ops.invoke("no-such-command")
    assert unknown.exit_code == 2 and "No such command" in unknown.output
    assert len(builds) == 3
