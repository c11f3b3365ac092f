"""``durable submit`` on the ``local`` launcher: real worker processes, a real SQLite store."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from durable_core import ConfigError, UnsharedStoreError, make_plugin_manager
from durable_core.cli import ExitCode, cli
from durable_core.launchers import (
    LaunchStatus,
    LocalLauncher,
    RunSpec,
    read_runs_file,
    split_target,
    submit,
)


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


# covers: X-LAUNCH
def test_submit_runs_file_runs_each_run_once_and_resubmit_resumes(fleet):
    runs = fleet.runs_file(6)
    result = invoke("submit", fleet.config, "--inputs-file", runs, "--on", "local:2", "--wait")
    assert result.exit_code == 0, result.output
    assert "6 runs on local:2: 6 completed" in result.stdout
    calls = fleet.calls()
    assert len(calls) == 12 and set(calls.values()) == {1}
    # the same runs again: each is resumed, nothing runs twice
    again = invoke(
        "submit", fleet.config, "--inputs-file", runs, "--on", "local:2", "--wait", "--json"
    )
    assert again.exit_code == 0, again.output
    document = json.loads(again.stdout)
    assert document["counts"] == {"completed": 6}
    assert {r["run_id"]: r["outputs"]["out"] for r in document["runs"]} == {
        f"r{i:02d}": i * 10 + 1 for i in range(6)
    }
    assert fleet.calls() == calls


# covers: X-LAUNCH
def test_submit_one_run_with_input_override(fleet):
    result = invoke(
        "submit", fleet.config, "--run-id", "solo", "--input", "n=7", "--on", "local:1",
        "--wait", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (run,) = json.loads(result.stdout)["runs"]
    assert run["run_id"] == "solo" and run["status"] == "completed"
    assert run["outputs"] == {"out": 71}


# covers: X-LAUNCH
def test_a_killed_worker_is_replaced_and_the_run_resumes(fleet):
    (fleet.folder / "kill-r01").write_text("")
    outcomes = submit(
        fleet.config, read_runs_file(fleet.runs_file(3)), on="local:1", store=fleet.store_url
    )
    assert [o.status for o in outcomes] == [LaunchStatus.COMPLETED] * 3
    by_id = {o.run_id: o for o in outcomes}
    assert by_id["r01"].launches == 2 and by_id["r00"].launches == 1
    assert set(fleet.calls().values()) == {1}


# covers: X-LAUNCH
def test_a_worker_lost_too_often_is_reported_lost(fleet):
    (fleet.folder / "kill-r00").write_text("")
    outcomes = submit(fleet.config, read_runs_file(fleet.runs_file(1)), on="local:1", relaunches=0)
    assert outcomes[0].status is LaunchStatus.LOST
    assert "BrokenProcessPool" in (outcomes[0].error or "")


# covers: X-LAUNCH
def test_a_run_owned_elsewhere_is_waited_for_not_failed_nor_run_twice(fleet):
    hold = fleet.folder / "hold"
    hold.write_text("")
    owner = subprocess.Popen(
        [sys.executable, "-m", "durable_core", "run", fleet.config, "--run-id", "r00",
         "--input", "n=0", "--input", "tag=r00"],
        env=fleet.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_until_owned(fleet)
        busy = []

        def found_busy(outcome):
            busy.append(outcome.run_id)
            threading.Timer(0.5, hold.unlink).start()  # the owner goes on after a while

        started = time.monotonic()
        (run,) = submit(
            fleet.config, read_runs_file(fleet.runs_file(1)), on="local:1", on_busy=found_busy
        )
        assert busy == ["r00"]
        assert run.status is LaunchStatus.COMPLETED and run.busy and run.launches == 1
        assert time.monotonic() - started < 30
        assert owner.wait(timeout=30) == 0
    finally:
        owner.kill()
    assert fleet.calls() == {"r00 first": 1, "r00 second": 1}


# covers: X-LAUNCH
def test_busy_wait_is_bounded(fleet):
    hold = fleet.folder / "hold"
    hold.write_text("")
    owner = subprocess.Popen(
        [sys.executable, "-m", "durable_core", "run", fleet.config, "--run-id", "r00",
         "--input", "n=0", "--input", "tag=r00"],
        env=fleet.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_until_owned(fleet)
        result = invoke(
            "submit", fleet.config, "--inputs-file", fleet.runs_file(1), "--on", "local:1",
            "--wait", "--busy-timeout", "1", "--json",
        )  # fmt: skip
        assert result.exit_code == 0, result.output  # still running elsewhere: not a failure
        (run,) = json.loads(result.stdout)["runs"]
        assert run["status"] == "running" and run["busy"] is True
    finally:
        hold.unlink()
        owner.wait(timeout=30)
    assert fleet.calls() == {"r00 first": 1, "r00 second": 1}


def _wait_until_owned(fleet) -> None:
    """Until the run r00 has a record (its owner holds it in ``first``)."""
    from durable_core.config import load_config

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        store = load_config(fleet.config).open_store()
        try:
            if "r00" in {s.run_id for s in store.list_runs()}:
                return
        except Exception:
            pass
        finally:
            store.close()
        time.sleep(0.05)
    raise AssertionError("the owner did not start")


# covers: X-LAUNCH
def test_memory_store_is_refused(fleet):
    result = invoke("submit", fleet.config, "--on", "local:1", "--store", "memory:", "--wait")
    assert result.exit_code == ExitCode.CONFIG, result.output
    assert "UnsharedStoreError" in result.stderr and "memory store" in result.stderr
    with pytest.raises(UnsharedStoreError):
        submit(fleet.config, on="local:1", store="memory:")
    assert fleet.calls() == {}


# covers: X-LAUNCH
def test_a_failed_run_makes_wait_exit_1(fleet):
    result = invoke(
        "submit", fleet.config, "--run-id", "bad", "--input", "calls=/nonexistent/dir/calls.txt",
        "--on", "local:1", "--wait",
    )  # fmt: skip
    assert result.exit_code == ExitCode.RUN_FAILED, result.output
    assert "run 'bad' failed" in result.stdout


# covers: X-LAUNCH
def test_bad_runs_file_line_is_refused_before_anything_runs(fleet):
    path = fleet.folder / "bad.jsonl"
    path.write_text(
        '{"run_id": "a", "inputs": {"n": 1, "tag": "a"}}\n{"run_id": "b", "inputs": {"n": "x"}}\n'
    )
    result = invoke("submit", fleet.config, "--inputs-file", str(path), "--on", "local:1")
    assert result.exit_code == ExitCode.CONFIG, result.output
    assert f"{path}:2" in result.stderr
    path.write_text('{"run_id": "a"}\n{"run_id": "a"}\n')
    result = invoke("submit", fleet.config, "--inputs-file", str(path), "--on", "local:1")
    assert result.exit_code == ExitCode.CONFIG and "listed twice" in result.stderr
    assert fleet.calls() == {}


def test_targets():
    assert split_target("local") == ("local", "")
    assert split_target("local:4") == ("local", "4")
    assert split_target("dask://10.0.0.5:8786") == ("dask", "10.0.0.5:8786")
    with pytest.raises(ConfigError):
        split_target(":4")
    with pytest.raises(ConfigError, match="whole number"):
        make_plugin_manager().launcher_factory("local")("two")
    with pytest.raises(ConfigError):
        LocalLauncher(0)


# covers: X-LAUNCH
def test_launchers_are_plugins_registered_through_the_hook(fleet):
    """durable_register_launchers: a plugin's launcher is found by --on NAME."""
    from durable_core import hookimpl

    made = []

    class Plugin:
        @hookimpl
        def durable_register_launchers(self, register):
            def factory(address):
                made.append(address)
                return LocalLauncher(int(address or 1))

            register("mine", factory)

    pm = make_plugin_manager(plugins=[("mine-plugin", Plugin())])
    assert "mine" in pm.launchers().names() and "local" in pm.launchers().names()
    assert pm.launchers().provider("mine") == "mine-plugin"
    outcomes = submit(fleet.config, [RunSpec(run_id="via-plugin")], on="mine:2", pm=pm)
    assert made == ["2"] and outcomes[0].status is LaunchStatus.COMPLETED
    listed = json.loads(invoke("plugins", "--json").stdout)
    assert {"name": "memory", "launchers": ["local"]}.items() <= {
        k: v for p in listed if p["name"] == "memory" for k, v in p.items()
    }.items()
    unknown = invoke("submit", fleet.config, "--on", "nowhere:1")
    assert unknown.exit_code == ExitCode.CONFIG and "unknown launcher" in unknown.stderr


class _Remote(LocalLauncher):
    """A local pool that says its workers are on other hosts (what a cluster's list shows)."""

    def single_host(self) -> bool:
        return False


# covers: X-LAUNCH
def test_sqlite_is_refused_for_workers_on_other_hosts_but_file_and_postgres_are_not(fleet):
    from durable_core.config import parse_store_url
    from durable_core.launchers import check_store

    with _Remote(1) as remote:
        with pytest.raises(UnsharedStoreError, match="write-ahead log"):
            submit(fleet.config, on=remote)
        check_store(parse_store_url(f"file:{fleet.folder / 'runs'}"), remote)
        check_store(parse_store_url("postgresql://db.invalid/durable"), remote)
    assert fleet.calls() == {}


# covers: X-LAUNCH
def test_per_graph_bounds_the_runs_of_each_graph_at_once(fleet):
    from durable_core.launchers import Submitter, prepare

    other = fleet.folder / "other.toml"
    other.write_text(pathlib.Path(fleet.config).read_text().replace('"single"', '"other"'))
    parts = [
        prepare(fleet.config, [RunSpec(run_id=f"a{i}", inputs={"tag": f"a{i}"}) for i in range(3)]),
        prepare(str(other), [RunSpec(run_id=f"b{i}", inputs={"tag": f"b{i}"}) for i in range(3)]),
    ]
    with LocalLauncher(3) as launcher:
        outcomes = Submitter(launcher, per_graph=1).run(parts)
    assert [o.status for o in outcomes] == [LaunchStatus.COMPLETED] * 6
    spans = fleet.spans()
    for prefix in "ab":  # each graph's runs one after another, never two at once
        own = [s for s in spans if s[1] == prefix]
        assert own == [s for i in range(3) for s in (f"+{prefix}{i}", f"-{prefix}{i}")], spans
    with pytest.raises(ConfigError):
        Submitter(launcher, per_graph=0)
