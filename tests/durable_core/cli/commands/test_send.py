"""``durable send`` refusals: each mistake is a clear error with its exit code (X-INBOX-1)."""

from __future__ import annotations

import pathlib

import pytest
from click.testing import CliRunner

from durable_core.cli.app import cli
from durable_core.config import load_config

EXAMPLE = pathlib.Path(__file__).resolve().parents[4] / "examples" / "approval"


@pytest.fixture
def config(tmp_path: pathlib.Path) -> pathlib.Path:
    load_config(EXAMPLE / "approval.toml").load_graph()  # the example's module is importable
    text = (EXAMPLE / "approval.toml").read_text()
    head = text.partition("[store]")[0]
    path = tmp_path / "approval.toml"
    path.write_text(
        head.replace("max_files = 40", "max_files = 2").replace(
            '{ path = "out" }', f'"{tmp_path / "out"}"'
        )
        + f'[store]\nbackend = "file"\ndirectory = "{tmp_path / "runs"}"\n'
    )
    return path


def send(*args: str):
    return CliRunner().invoke(cli, ["send", *args], catch_exceptions=False)


def test_send_refuses_what_it_cannot_post(config: pathlib.Path) -> None:
    # covers: X-INBOX-1
    unknown_key = send(str(config), "r", "nope", '"approve"')
    assert unknown_key.exit_code == 6 and "no inbox key 'nope'" in unknown_key.output
    bad_json = send(str(config), "r", "decisions", "{not json")
    assert bad_json.exit_code == 6 and "not valid JSON" in bad_json.output
    wrong_type = send(str(config), "r", "decisions", "42")
    assert wrong_type.exit_code == 6 and "str" in wrong_type.output
    no_run = send(str(config), "nobody", "decisions", '"approve"')
    assert no_run.exit_code == 4 and "no record" in no_run.output


def test_send_to_a_waiting_run_on_an_unknown_launcher_is_refused(config: pathlib.Path) -> None:
    # covers: X-WAIT
    started = CliRunner().invoke(
        cli, ["run", str(config), "w", "--suspend", "--json"], catch_exceptions=False
    )
    assert started.exit_code == 0 and '"waiting"' in started.output
    refused = send(str(config), "w", "decisions", '"approve"', "--on", "nowhere")
    assert refused.exit_code == 6 and "unknown launcher backend 'nowhere'" in refused.output
    assert "sequence 1" in refused.output  # the post itself was kept
    woken = send(str(config), "w", "decisions", '"approve"', "--idempotency-key", "k")
    assert woken.exit_code == 0 and "sequence 2" in woken.output and "completed" in woken.output


def test_a_suspended_run_names_the_resume_that_continues_it(config: pathlib.Path) -> None:
    # covers: X-WAIT
    import shlex
    import time

    started = CliRunner().invoke(
        cli,
        ["run", str(config), "--run-id", "quick", "--suspend", "--input", "wait_seconds=1"],
        catch_exceptions=False,
    )
    assert started.exit_code == 0 and "is waiting for" in started.output
    hint = next(
        line for line in started.stderr.splitlines() if "once its deadline has passed" in line
    )
    command = hint.partition("resume it with: ")[2].partition(" (")[0]
    looked = CliRunner().invoke(cli, ["inspect", str(config), "--run-id", "quick"])
    status = next(line for line in looked.output.splitlines() if line.startswith("status"))
    assert status.split()[1] == "waiting", looked.output  # as 'durable list' says
    assert (
        command
        == f"durable resume {shlex.quote(str(config))} --run-id quick --input wait_seconds=1"
    )
    time.sleep(1.2)
    resumed = CliRunner().invoke(cli, shlex.split(command)[1:], catch_exceptions=False)
    assert resumed.exit_code == 0, resumed.output  # the inputs it started with came along
    assert "completed" in resumed.output and "discarded" in resumed.output
