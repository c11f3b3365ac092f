"""``durable --help`` and ``durable --version`` start light: no plugin (numpy, a database
driver) and not the engine are imported. Their speed is measured in docs/performance.md, not
timed here; what is checked is what makes them slow: the modules they load."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import pytest

HEAVY = (
    "numpy",
    "psycopg",
    "durable_codec_numpy",
    "durable_filestore",
    "durable_sqlitestore",
    "durable_postgresstore",
    "durable_core.graph",
    "durable_core.durable",
    "durable_core.codecs",
    "durable_core.config",
    "cattrs",
)

PROBE = """
import json, sys
from durable_core.cli import main
try:
    main({args!r})
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in sys.modules if m.startswith({heavy!r}))
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


def _probe(*args: str) -> tuple[dict, str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=list(args), heavy=HEAVY)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return json.loads(proc.stderr.strip().splitlines()[-1]), proc.stdout


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["run", "--help"]])
def test_help_and_version_import_no_plugin_and_no_engine(args):
    result, out = _probe(*args)
    assert result["code"] in (0, None)
    assert result["heavy"] == []
    assert out


def test_version_names_the_installed_distribution():
    _, out = _probe("--version")
    assert out.strip() == f"durable {importlib.metadata.version('durable-core')}"


def test_python_dash_m_runs_the_command():
    proc = subprocess.run(
        [sys.executable, "-m", "durable_core", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("durable ")


def test_help_lists_every_builtin_command_and_points_at_plugin_commands():
    _, out = _probe("--help")
    for name in ("run", "resume", "inspect", "list", "plugins"):
        assert f"  {name} " in out
    assert "durable plugins" in out
