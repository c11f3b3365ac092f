"""``--json`` errors are a JSON object on stdout too; ``durable list`` on a fresh machine."""

from __future__ import annotations

import json

from click.testing import CliRunner

from durable_core.cli import ExitCode, cli


def test_json_errors_are_an_object_on_stdout_and_a_line_on_stderr(ops):
    assert ops.invoke("run", ops.config, "--run-id", "other").exit_code == 0  # the store exists
    missing = ops.invoke("inspect", ops.config, "--json")
    assert missing.exit_code == ExitCode.NOT_FOUND
    error = json.loads(missing.stdout)
    assert error["type"] == "NotFoundError"
    assert error["exit"] == ExitCode.NOT_FOUND
    assert "no record of run 'ops-1'" in error["error"]
    assert missing.stderr.startswith("error (NotFoundError): ")
    assert ops.invoke("run", ops.config).exit_code == 0
    conflict = ops.invoke("run", ops.config, "--json")
    assert conflict.exit_code == ExitCode.CONFLICT
    assert json.loads(conflict.stdout)["exit"] == ExitCode.CONFLICT
    shown = ops.invoke("show", "--store", ops.store_url, "ops-1", "price", "--json")
    assert json.loads(shown.stdout)["type"] == "CodecError"
    # without --json, stdout stays empty
    assert ops.invoke("inspect", ops.config, "nope").stdout == ""


def test_json_error_of_a_bad_config(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('graph = "m:g"\nrun_id = "r"\nversion = "1"\ncodecs = "money"\n')
    result = CliRunner().invoke(cli, ["list", str(bad), "--json"])
    assert result.exit_code == ExitCode.CONFIG
    assert json.loads(result.stdout) == {
        "error": json.loads(result.stdout)["error"],
        "type": "ConfigError",
        "exit": 6,
    }
    assert "key 'codecs': expected a list" in json.loads(result.stdout)["error"]


def test_list_on_a_fresh_machine_is_empty(tmp_path, monkeypatch):
    monkeypatch.setenv("DURABLE_HOME", str(tmp_path / "home"))
    runner = CliRunner()
    listed = runner.invoke(cli, ["list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == []
    text = runner.invoke(cli, ["list"])
    assert text.exit_code == 0
    assert text.stdout.startswith("no runs in the file store at ")
    assert not (tmp_path / "home").exists()  # listing never creates the store
    typo = runner.invoke(cli, ["list", "--store", str(tmp_path / "typo")])
    assert typo.exit_code == ExitCode.NOT_FOUND
