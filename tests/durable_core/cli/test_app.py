"""The ``durable`` command: exit codes, one-line errors, inspect/list/plugins.

Commands run in-process through click's runner; the stores are real (files on disk).
"""

from __future__ import annotations

import json
import pathlib
import textwrap

import pytest
from click.testing import CliRunner

from durable_core import (
    BusyError,
    CheckpointError,
    CodecError,
    ConfigError,
    ConflictError,
    CorruptRecordError,
    DefinitionMismatchError,
    GraphError,
    InputsMismatchError,
    InvariantError,
    NotFoundError,
    PluginError,
    SchemaError,
    StoreError,
    VersionMismatchError,
)
from durable_core.cli import ExitCode, cli, exit_code_for

MINIMAL = """
graph = "mod:graph"
run_id = "r1"
version = "1"
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def write(tmp_path: pathlib.Path, text: str, name: str = "run.toml") -> pathlib.Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_exit_codes_are_distinct():
    codes = [code.value for code in ExitCode]
    assert len(codes) == len(set(codes))
    assert ExitCode.OK == 0
    assert ExitCode.INTERRUPTED == 130


# covers: E-1
@pytest.mark.parametrize(
    ("error", "code"),
    [
        (BusyError("x"), ExitCode.BUSY),
        (NotFoundError("x"), ExitCode.NOT_FOUND),
        (ConflictError("x"), ExitCode.CONFLICT),
        (DefinitionMismatchError("x"), ExitCode.CONFLICT),
        (VersionMismatchError("x"), ExitCode.CONFLICT),
        (InputsMismatchError("x"), ExitCode.CONFLICT),
        (ConfigError("x"), ExitCode.CONFIG),
        (PluginError("x"), ExitCode.CONFIG),
        (GraphError("x"), ExitCode.CONFIG),
        (CheckpointError("x"), ExitCode.CHECKPOINT),
        (CorruptRecordError("x"), ExitCode.CORRUPT),
        (CodecError("x"), ExitCode.ERROR),
        (SchemaError("x"), ExitCode.ERROR),
        (PermissionError("x"), ExitCode.ERROR),
        (StoreError("x"), ExitCode.ERROR),
        (StoreError("x", uncertain=True), ExitCode.ERROR),
        (InvariantError("x"), ExitCode.ERROR),
        (KeyboardInterrupt(), ExitCode.INTERRUPTED),
    ],
)
def test_each_error_kind_has_its_exit_code(error, code):
    assert exit_code_for(error) is code


def _failing_group(error: BaseException):
    import click

    from durable_core.cli.app import DurableGroup

    @click.group(cls=DurableGroup)
    @click.option("--debug", is_flag=True)
    def group(debug):
        pass

    @group.command()
    def broken():
        raise error

    return group


# covers: E-1
def test_an_invariant_error_says_how_to_see_its_traceback(runner, monkeypatch):
    monkeypatch.delenv("DURABLE_DEBUG", raising=False)
    group = _failing_group(InvariantError("two scopes claim node 'a'"))
    result = runner.invoke(group, ["broken"])
    assert result.exit_code == ExitCode.ERROR
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        "error (InvariantError; rerun with --debug for the traceback): two scopes claim node 'a'"
    )
    assert "please report it" in lines[0]
    shown = runner.invoke(group, ["--debug", "broken"])
    assert shown.exit_code == ExitCode.ERROR
    assert "Traceback" in shown.stderr
    assert "error (InvariantError): two scopes" in shown.stderr


# covers: E-1
def test_a_store_error_is_one_line_with_the_error_exit_code(runner, monkeypatch):
    monkeypatch.delenv("DURABLE_DEBUG", raising=False)
    result = runner.invoke(_failing_group(StoreError("the disk is gone")), ["broken"])
    assert result.exit_code == ExitCode.ERROR
    assert result.stderr.strip() == "error (StoreError): the disk is gone"


def test_plugins_json_lists_the_installed_backends(runner):
    result = runner.invoke(cli, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    plugins = {p["name"]: p for p in json.loads(result.output)}
    assert plugins["memory"]["distribution"] == "durable-core"
    assert plugins["memory"]["stores"] == ["memory"]
    for name in ("file", "sqlite", "postgres"):
        assert plugins[name]["stores"] == [name]
        assert plugins[name]["error"] is None


def test_config_error_is_one_line_with_the_config_exit_code(runner, tmp_path):
    config = write(tmp_path, MINIMAL + "colour = 3\n")
    result = runner.invoke(cli, ["inspect", str(config)])
    assert result.exit_code == ExitCode.CONFIG
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error (ConfigError): ")
    assert str(config) in lines[0]
    assert "unknown key 'colour'" in lines[0]
    assert "Traceback" not in result.output


def test_missing_run_id_is_a_config_error(runner, tmp_path):
    config = write(tmp_path, 'graph = "mod:graph"\nversion = "1"\n')
    result = runner.invoke(cli, ["list", str(config)])
    assert result.exit_code == ExitCode.CONFIG
    assert "missing required key 'run_id'" in result.stderr


def test_unknown_backend_is_a_config_error_naming_installed_backends(runner, tmp_path):
    config = write(tmp_path, MINIMAL + '[store]\nbackend = "cassandra"\n')
    result = runner.invoke(cli, ["list", str(config)])
    assert result.exit_code == ExitCode.CONFIG
    assert "error (PluginError): " in result.stderr
    assert f"{config}: [store]: backend 'cassandra': unknown store backend" in result.stderr
    assert "sqlite" in result.stderr


def test_debug_shows_the_traceback(runner, tmp_path):
    config = write(tmp_path, MINIMAL + "colour = 3\n")
    result = runner.invoke(cli, ["--debug", "inspect", str(config)])
    assert result.exit_code == ExitCode.CONFIG
    assert "Traceback" in result.stderr


def test_bad_store_url_is_a_config_error(runner):
    result = runner.invoke(cli, ["list", "--store", "redis://h/0"])
    assert result.exit_code == ExitCode.CONFIG
    assert "unknown store URL scheme 'redis'" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["inspect"],
        ["inspect", "--store", "memory:"],
        ["inspect", "--store", "memory:", "a", "b"],
        ["list", "--store", "memory:", "extra"],
        ["list", "not-a-config", "x"],
    ],
)
def test_usage_errors(runner, args):
    result = runner.invoke(cli, args)
    assert result.exit_code == ExitCode.USAGE, result.output


def test_cli_reference_documents_every_exit_code():
    doc = (pathlib.Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text()
    section = doc.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    documented = {
        int(line.split("|")[1]) for line in section.splitlines() if line[:3].strip("| ").isdigit()
    }
    assert documented == {code.value for code in ExitCode}


def test_help_lists_every_exit_code():
    import re

    from click.testing import CliRunner

    from durable_core.cli import ExitCode, cli

    shown = CliRunner().invoke(cli, ["--help"])
    assert shown.exit_code == 0
    text = " ".join(shown.output.split())
    listed = {int(code) for code in re.findall(r"\b(\d+) [a-zA-Z(]", text.split("Exit codes:")[1])}
    assert listed >= {int(code) for code in ExitCode}, sorted(set(ExitCode) - listed)
