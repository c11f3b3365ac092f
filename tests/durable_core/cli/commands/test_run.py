"""``durable run`` / ``durable resume`` in-process: outcomes, exit codes, messages.

The stores are real file stores in a temporary folder; the graphs are small modules written next
to their configs. Crashes and signals are tested in subprocesses in tests/e2e/test_cli_runs.py.
"""

from __future__ import annotations

import itertools
import json
import sys
import textwrap

import pytest
from click.testing import CliRunner

from durable_core.cli import ExitCode, cli

_counter = itertools.count()

GRAPH = """
import pathlib
from durable_core.graph import Graph, Key, Retry

N = Key("n", int)
FLAKY = Key("flaky_file", str)
TWICE = Key("twice", int)
TOTAL = Key("total", int)

graph = Graph("calc", inputs=[N, FLAKY])


@graph.node("double", requires=[N], provides=[TWICE])
def double(rc):
    rc.set(TWICE, rc.get(N) * 2)


@graph.node("add", requires=[TWICE, FLAKY], provides=[TOTAL], aspects=[Retry(3, delay=0.01)])
def add(rc):
    # fails while the flag file holds a positive count, decrementing it
    flag = pathlib.Path(rc.get(FLAKY))
    left = int(flag.read_text()) if flag.exists() else 0
    if left > 0:
        flag.write_text(str(left - 1))
        raise RuntimeError(f"flaky: {left} failures left")
    rc.set(TOTAL, rc.get(TWICE) + 1)
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    module = f"calc_graph_{next(_counter)}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(GRAPH))
    monkeypatch.chdir(tmp_path)
    yield tmp_path, module
    sys.modules.pop(module, None)


def config(tmp_path, module, *, n="21", version="1", extra="") -> str:
    path = tmp_path / "calc.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            graph = "{module}:graph"
            run_id = "calc-1"
            version = "{version}"
            {extra}
            [inputs]
            n = {n}
            flaky_file = {{ path = "flaky.txt" }}

            [store]
            backend = "file"
            directory = "runs"
            """
        )
    )
    return str(path)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_run_prints_result_and_leaf_outputs(runner, project):
    tmp_path, module = project
    result = runner.invoke(cli, ["run", config(tmp_path, module)])
    assert result.exit_code == 0, result.output
    assert "run 'calc-1' completed in" in result.stdout
    assert "2 nodes confirmed, 0 restored from checkpoint, 0 retries" in result.stdout
    assert "  total = 43" in result.stdout
    assert "twice" not in result.stdout  # consumed inside the graph: not a result


def test_run_json_then_resume_restores(runner, project):
    tmp_path, module = project
    path = config(tmp_path, module)
    (tmp_path / "flaky.txt").write_text("2")
    first = json.loads(runner.invoke(cli, ["run", path, "--json"]).stdout)
    assert first["status"] == "completed"
    assert (first["confirmed"], first["restored"], first["total_nodes"]) == (2, 0, 2)
    assert (first["retries"], first["failed_attempts"]) == (2, 2)
    assert first["revision"] == first["saves"]
    assert first["outputs"] == {"total": 43}
    again = runner.invoke(cli, ["resume", path, "--json"])
    assert again.exit_code == 0, again.output
    second = json.loads(again.stdout)
    assert (second["confirmed"], second["restored"], second["saves"]) == (0, 2, 0)
    assert second["revision"] == first["revision"]
    assert second["outputs"] == {"total": 43}


def test_run_of_an_existing_run_is_a_conflict(runner, project):
    tmp_path, module = project
    path = config(tmp_path, module)
    assert runner.invoke(cli, ["run", path]).exit_code == 0
    result = runner.invoke(cli, ["run", path])
    assert result.exit_code == ExitCode.CONFLICT
    assert "run 'calc-1' already exists" in result.stderr
    assert f"durable resume {path}" in result.stderr
    other = runner.invoke(cli, ["run", path, "--run-id", "calc-2", "--json"])
    assert other.exit_code == 0, other.output
    assert json.loads(other.stdout)["run_id"] == "calc-2"


def test_a_conflict_on_another_store_names_that_store_in_both_commands(runner, project):
    tmp_path, module = project
    path = config(tmp_path, module)
    other = tmp_path / "elsewhere"
    assert runner.invoke(cli, ["run", path, "--store", str(other)]).exit_code == 0
    result = runner.invoke(cli, ["run", path, "--store", str(other)])
    assert result.exit_code == ExitCode.CONFLICT
    assert f"durable resume {path} --store {other}'" in result.stderr
    assert f"durable run {path} --run-id NEW-ID --store {other}'" in result.stderr


def test_resume_of_a_missing_run_is_not_found(runner, project):
    tmp_path, module = project
    result = runner.invoke(cli, ["resume", config(tmp_path, module)])
    assert result.exit_code == ExitCode.NOT_FOUND
    assert "no record of run 'calc-1'" in result.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").glob("*.json"))
    other = runner.invoke(cli, ["resume", config(tmp_path, module), "--run-id", "calc-9"])
    assert other.exit_code == ExitCode.NOT_FOUND
    assert "--run-id calc-9'" in other.stderr


@pytest.mark.parametrize(
    ("change", "kind"),
    [
        ({"version": "2"}, "VersionMismatchError"),
        ({"n": "22"}, "InputsMismatchError"),
    ],
)
def test_resume_with_other_version_or_inputs_is_a_mismatch(runner, project, change, kind):
    tmp_path, module = project
    assert runner.invoke(cli, ["run", config(tmp_path, module)]).exit_code == 0
    result = runner.invoke(cli, ["resume", config(tmp_path, module, **change)])
    assert result.exit_code == ExitCode.CONFLICT
    assert result.stderr.startswith(f"error ({kind}): ")


def test_failed_run_exits_1_and_names_the_node(runner, project):
    tmp_path, module = project
    (tmp_path / "flaky.txt").write_text("9")  # more failures than the Retry budget
    path = config(tmp_path, module)
    result = runner.invoke(cli, ["run", path])
    assert result.exit_code == ExitCode.RUN_FAILED
    assert "run 'calc-1' failed" in result.stdout
    assert "add" in result.stderr
    assert f"inspect it with: durable inspect {path}" in result.stderr
    # resuming does not refill the spent budget: it fails again without running
    (tmp_path / "flaky.txt").write_text("0")
    again = runner.invoke(cli, ["resume", path, "--json"])
    assert again.exit_code == ExitCode.RUN_FAILED
    assert json.loads(again.stdout)["status"] == "failed"


@pytest.mark.parametrize(
    ("graph_ref", "extra", "n", "message"),
    [
        ("no_such_graph_module_q:graph", "", "21", "cannot import module 'no_such_graph_module_q'"),
        (None, "", '"21"', "[inputs] n: the graph's input key has type int, found a string"),
        (None, "colour = 1", "21", "unknown key 'colour'"),
        (None, 'codecs = ["absent-plugin"]', "21", "needs the plugin 'absent-plugin'"),
    ],
)
def test_bad_configs_exit_with_the_config_code(runner, project, graph_ref, extra, n, message):
    tmp_path, module = project
    path = config(tmp_path, module, n=n, extra=extra)
    if graph_ref is not None:
        text = (tmp_path / "calc.toml").read_text().replace(f"{module}:graph", graph_ref)
        (tmp_path / "calc.toml").write_text(text)
    for command in ("run", "resume"):
        result = runner.invoke(cli, [command, path])
        assert result.exit_code == ExitCode.CONFIG, result.output
        assert message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()  # nothing was saved


def test_unknown_backend_in_run_is_a_config_error(runner, project):
    tmp_path, module = project
    path = config(tmp_path, module)
    text = (tmp_path / "calc.toml").read_text().replace('backend = "file"', 'backend = "s3"')
    (tmp_path / "calc.toml").write_text(text.replace('directory = "runs"\n', ""))
    result = runner.invoke(cli, ["run", path])
    assert result.exit_code == ExitCode.CONFIG
    assert "unknown store backend 's3'" in result.stderr
    assert f"{tmp_path / 'calc.toml'}: [store]" in result.stderr


# covers: E-1 (a bad store option names the file and the table)
def test_a_store_option_the_backend_refuses_names_the_file_and_table(runner, project):
    tmp_path, module = project
    path = config(tmp_path, module)
    text = (tmp_path / "calc.toml").read_text().replace('backend = "file"', 'backend = "sqlite"')
    (tmp_path / "calc.toml").write_text(text.replace('directory = "runs"', 'paht = "runs.db"'))
    result = runner.invoke(cli, ["run", path])
    assert result.exit_code == ExitCode.CONFIG, result.output
    assert f"{tmp_path / 'calc.toml'}: [store]" in result.stderr
    assert "paht" in result.stderr
