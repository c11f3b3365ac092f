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


def test_your_own_class_as_a_value_runs_as_written(tmp_path, monkeypatch):
    section = DOC.read_text(encoding="utf-8").split("## Your own classes as values", 1)[1]
    section = section.split("\n## ", 1)[0]
    (module,) = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    (config,) = re.findall(r"^```toml\n(.*?)^```", section, re.S | re.M)
    (console,) = re.findall(r"^```console\n(.*?)^```", section, re.S | re.M)
    jobs = tmp_path / "myjobs" / "jobs"
    jobs.mkdir(parents=True)
    (jobs / "tally.py").write_text(module)
    (jobs / "tally.toml").write_text(config.replace("[codecs]", "[absent]").split("[absent]")[0])
    monkeypatch.chdir(tmp_path / "myjobs")
    sys.modules.pop("tally", None)
    try:
        refused = CliRunner().invoke(cli, ["run", "jobs/tally.toml"])
        assert refused.exit_code != 0
        assert '[codecs] json = ["tally:Tally"]' in refused.stderr  # the error names the line
        (jobs / "tally.toml").write_text(config)
        result = CliRunner().invoke(cli, ["run", "jobs/tally.toml"])
    finally:
        sys.modules.pop("tally", None)
    assert result.exit_code == 0, result.output
    assert console.splitlines()[-1] in result.stdout  # tally = Tally(count=3, total=6)
