"""The dask launcher against a real distributed.LocalCluster (1 worker process); the batch
acceptance tests with worker kills are in tests/e2e/test_fleet.py."""

from __future__ import annotations

import json
import pathlib
import textwrap
import time
from collections import Counter

import attrs
import pytest
from click.testing import CliRunner

from durable_core import ConfigError
from durable_core.cli import cli
from durable_core.launchers import LaunchStatus, RunSpec, submit

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
from durable_executor_dask import DaskLauncher  # noqa: E402
from durable_executor_dask.launcher import dask_launcher, task_key  # noqa: E402

GRAPH = """
import os
import pathlib
import time

from durable_core.graph import Graph, Key

N = Key("n", int)
CALLS = Key("calls", str)
OUT = Key("out", int)

graph = Graph("dask_launch_probe", inputs=[N, CALLS])


@graph.node("triple", requires=[N, CALLS], provides=[OUT])
def triple(rc):
    spans = pathlib.Path(rc.get(CALLS)).with_name("spans.txt")
    with open(spans, "a") as f:
        f.write(f"+{rc.get(N)} ")
    time.sleep(0.3)
    with open(spans, "a") as f:
        f.write(f"-{rc.get(N)} ")
    fd = os.open(rc.get(CALLS), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"{rc.get(N)}\\n".encode())
    os.close(fd)
    rc.set(OUT, rc.get(N) * 3)
"""


@attrs.frozen
class Project:
    config: str
    calls_file: str

    def calls(self) -> Counter[str]:
        try:
            with open(self.calls_file) as f:
                return Counter(f.read().split())
        except FileNotFoundError:
            return Counter()


@pytest.fixture
def project(tmp_path, request):
    module = f"dask_launch_probe_{request.node.name.replace('[', '_').replace(']', '_')}"
    (tmp_path / f"{module}.py").write_text(GRAPH)
    config = tmp_path / "probe.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            graph = "{module}:graph"
            run_id = "single"
            version = "1"

            [inputs]
            n = 5
            calls = {{ path = "calls.txt" }}

            [store]
            backend = "sqlite"
            path = "runs.sqlite"
            """
        )
    )
    return Project(str(config), str(tmp_path / "calls.txt"))


@pytest.fixture(scope="module")
def cluster():
    local = distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None
    )
    yield local
    local.close()


# covers: X-LAUNCH
def test_runs_are_tasks_on_the_cluster(cluster, project):
    with DaskLauncher(cluster.scheduler_address) as launcher:
        assert launcher.single_host() and launcher.detached and launcher.capacity is None
        runs = [RunSpec(run_id=f"d{i}", inputs={"n": i}) for i in range(3)]
        outcomes = submit(project.config, runs, on=launcher)
    assert [o.status for o in outcomes] == [LaunchStatus.COMPLETED] * 3
    assert [o.outputs for o in outcomes] == [{"out": 0}, {"out": 3}, {"out": 6}]
    assert project.calls() == {"0": 1, "1": 1, "2": 1}


# covers: X-LAUNCH
def test_submit_without_wait_hands_the_runs_over(cluster, project):
    address = cluster.scheduler_address.removeprefix("tcp://")
    result = CliRunner().invoke(
        cli, ["submit", project.config, "--input", "n=7", "--on", f"dask://{address}", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["counts"] == {"submitted": 1}
    deadline = time.monotonic() + 60  # the submitter is gone; the cluster runs it
    while not project.calls() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert project.calls() == {"7": 1}


# covers: X-LAUNCH
def test_runs_at_once_are_bounded_by_runs_n(cluster, project):
    address = cluster.scheduler_address.removeprefix("tcp://")
    runs = [RunSpec(run_id=f"b{i}", inputs={"n": i}) for i in range(3)]
    outcomes = submit(project.config, runs, on=f"dask://{address}?runs=1", wait=False)
    assert [o.status for o in outcomes] == [LaunchStatus.COMPLETED] * 3  # handed out one by one
    spans = (pathlib.Path(project.calls_file).parent / "spans.txt").read_text().split()
    assert spans == [s for i in range(3) for s in (f"+{i}", f"-{i}")]  # never two at once
    more = [RunSpec(run_id=f"u{i}", inputs={"n": 10 + i}) for i in range(2)]
    unbounded = submit(project.config, more, on=f"dask://{address}")
    assert [o.status for o in unbounded] == [LaunchStatus.COMPLETED] * 2
    later = (pathlib.Path(project.calls_file).parent / "spans.txt").read_text().split()[6:]
    assert later[:2] in (["+10", "+11"], ["+11", "+10"])  # the cluster's 2 threads: both at once


def test_bad_addresses_are_config_errors():
    with pytest.raises(ConfigError, match="needs the scheduler's address"):
        DaskLauncher("")
    with pytest.raises(ConfigError, match="cannot reach the Dask scheduler"):
        DaskLauncher("127.0.0.1:9", connect_timeout=1)
    assert task_key("a b").startswith("durable-run-a b-") and task_key("x") != task_key("x")
    with pytest.raises(ConfigError, match="unknown option"):
        dask_launcher("127.0.0.1:9?workers=2")
    with pytest.raises(ConfigError, match="whole number"):
        dask_launcher("127.0.0.1:9?runs=many")
