"""docs/install.md: the first job of a project outside the repository runs as written."""

from __future__ import annotations

import pathlib
import re
import sys

from click.testing import CliRunner

from durable_core.cli import cli

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "install.md"


def test_the_first_job_runs_as_written(tmp_path, monkeypatch):
    section = DOC.read_text(encoding="utf-8").split("## A first job", 1)[1].split("\n## ", 1)[0]
    (module,) = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    (config,) = re.findall(r"^```toml\n(.*?)^```", section, re.S | re.M)
    jobs = tmp_path / "myjobs" / "jobs"
    jobs.mkdir(parents=True)
    (jobs / "hello.py").write_text(module)
    (jobs / "hello.toml").write_text(config)
    monkeypatch.chdir(tmp_path / "myjobs")
    sys.modules.pop("hello", None)
    try:
        result = CliRunner().invoke(cli, ["run", "jobs/hello.toml"])
    finally:
        sys.modules.pop("hello", None)
    assert result.exit_code == 0, result.output
    assert "run 'hello-1' completed" in result.stdout
    assert "greeting = 'hello, world'" in result.stdout
    assert (jobs / ".durable" / "runs").is_dir()  # the store stays in the project
