"""docs/tutorial.md's quickstart: the commands print what the tutorial shows."""

from __future__ import annotations

import pathlib
import re
import shutil
import sys

from click.testing import CliRunner

from durable_core.cli import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _shown(command: str) -> list[str]:
    """The lines the tutorial shows after ``$ uv run durable COMMAND`` (its first such block)."""
    text = (ROOT / "docs" / "tutorial.md").read_text()
    block = text.split(f"$ uv run durable {command}\n", 1)[1]
    return block.split("\n\n", 1)[0].split("```", 1)[0].strip().splitlines()


def _comparable(line: str) -> str:
    line = re.sub(r"in \d+\.\d s", "in N s", line)
    return re.sub(r"at \S*examples/quickstart/\.durable", "at …/examples/quickstart/.durable", line)


def test_the_quickstart_prints_what_the_tutorial_shows(tmp_path, monkeypatch):
    folder = tmp_path / "examples" / "quickstart"
    shutil.copytree(
        ROOT / "examples" / "quickstart",
        folder,
        ignore=shutil.ignore_patterns(".durable", "__pycache__"),
    )
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("quickstart", None)
    runner = CliRunner()
    try:
        for command in ("run", "resume"):
            result = runner.invoke(cli, [command, "examples/quickstart/quickstart.toml"])
            assert result.exit_code == 0, result.output
            printed = [_comparable(line) for line in result.stdout.strip().splitlines()]
            shown = [
                _comparable(line)
                for line in _shown(f"{command} examples/quickstart/quickstart.toml")
            ]
            assert printed == shown
    finally:
        sys.modules.pop("quickstart", None)
