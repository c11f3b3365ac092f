"""The stream example end to end, in real subprocesses killed with SIGKILL at random moments.

``examples/stdlib_stream`` tallies the standard library through a resumable producer and a
processor that commits its tally with each batch of files. Here it runs on a subset of the
files and is killed at a random moment, resumed, killed again, … ``KILLS`` times, then resumed
to the end. A kill lands either during start-up (a random delay, before the process has
processed a file) or once the process has processed a random number of files: a moment picked
by progress, not by the clock, so a fast machine cannot finish the run before its kill. After
every kill the record is loaded through the store: the processor's acknowledged front is noted,
and every file the next process processes (the example's ``trace`` side file) must lie after
it — a message whose transaction was confirmed is never processed again. The final
``tally.json`` must equal an uninterrupted run's and a computation made here without the
example's code.

Counts: 20 kills on the file store and 20 on SQLite, one on PostgreSQL (a whole run takes about
2 s): under a minute per store.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import sysconfig
import time
import uuid

import pytest

from durable_core import BusyError, NotFoundError
from durable_core.records import RunRecord

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "stdlib_stream"
MAX_FILES = 400
KILLS = 20


def durable(*args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "durable_core", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def write_config(folder: pathlib.Path, store: str, run_id: str) -> pathlib.Path:
    """The example's stream.toml with a subset of the files, a trace file, the report in
    ``folder`` and the given ``[store]`` table; the graph is found through PYTHONPATH."""
    text = (EXAMPLE / "stream.toml").read_text()
    head, _, _ = text.partition("[store]")
    head = head.replace("max_files = 0 ", f"max_files = {MAX_FILES} ")
    head = head.replace('trace = ""', 'trace = { path = "trace.log" }')
    head = head.replace('run_id = "stdlib-stream"', f'run_id = "{run_id}"')
    assert f"max_files = {MAX_FILES}" in head and "trace.log" in head and run_id in head
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "stream.toml"
    config.write_text(f"{head}{store}\n[runtime]\nmax_running = 4\n")
    return config


def environment(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EXAMPLE), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def independent_tally(max_files: int) -> dict:
    """What tally.json must hold, computed without the example's code."""
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    paths = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*.py")
        if p.is_file()
        and "site-packages" not in p.relative_to(root).parts
        and "__pycache__" not in p.relative_to(root).parts
    )[:max_files]
    tally = {"files": 0, "bytes": 0, "lines": 0, "by_top_package": {}, "big_files": []}
    for path in paths:
        data = (root / path).read_bytes()
        lines = len(data.splitlines())
        top = path.split("/")[0] if "/" in path else path[: -len(".py")]
        tally["files"] += 1
        tally["bytes"] += len(data)
        tally["lines"] += lines
        tally["by_top_package"][top] = tally["by_top_package"].get(top, 0) + lines
        if len(data) > 100_000:
            tally["big_files"].append(path)
    tally["big_files"].sort()
    return tally


def order(max_files: int) -> dict[str, int]:
    """Path -> its sequence number in the producer's stream (1-based, sorted order)."""
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    paths = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*.py")
        if p.is_file() and not {"site-packages", "__pycache__"} & set(p.relative_to(root).parts)
    )[:max_files]
    return {path: i for i, path in enumerate(paths, start=1)}


def read_trace(trace: pathlib.Path) -> list[str]:
    """The complete lines of the trace file (a kill may cut the last one short)."""
    if not trace.exists():
        return []
    text = trace.read_text()
    return text[: text.rfind("\n") + 1].split()


def load(store, run_id: str) -> RunRecord | None:
    """The run's record once the killed owner's lock is gone.

    A file or SQLite lock goes with the killed process; a PostgreSQL advisory lock goes when the
    server notices that the client's connection closed, a moment later: wait for it (at most
    30 s), as an operator resuming after a crash would.
    """
    deadline = time.monotonic() + 30.0
    while True:
        try:
            with store.acquire(run_id) as session:
                return session.load()
        except NotFoundError:
            return None
        except BusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def acked_front(record: RunRecord | None) -> int:
    """How far the processor ``tally`` has acknowledged its input (everything once it is
    confirmed)."""
    if record is None:
        return 0
    if "tally" in record.scopes[record.root_scope].nodes:
        return MAX_FILES
    entries = [s for s in record.streams.values() if s.group == "tally"]
    return entries[0].acked_through if entries else 0


def test_the_example_graph_computes_the_independent_tally_on_the_plain_engine(tmp_path):
    from durable_core.config import load_config
    from durable_core.graph import execute

    graph = load_config(EXAMPLE / "stream.toml").load_graph()
    keys = {key.name: key for key in graph.inputs}
    inputs = {keys["max_files"]: 150, keys["out_dir"]: str(tmp_path), keys["trace"]: ""}
    result = execute(graph, inputs)
    assert result.status == "completed", result.error
    assert json.loads((tmp_path / "tally.json").read_text()) == independent_tally(150)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> str:
    """tally.json of an uninterrupted run (file store)."""
    folder = tmp_path_factory.mktemp("baseline")
    config = write_config(folder, '[store]\nbackend = "file"\ndirectory = "runs"\n', "base")
    proc = durable("run", str(config), "--json", env=environment())
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert json.loads(out)["status"] == "completed"
    text = (folder / "report" / "tally.json").read_text()
    assert json.loads(text) == independent_tally(MAX_FILES)
    return text


def kill_at_a_random_moment(
    proc: subprocess.Popen,
    trace: pathlib.Path,
    seen_lines: int,
    remaining: int,
    kills_left: int,
    rng: random.Random,
) -> None:
    """SIGKILL ``proc`` during start-up or after it has processed a random number of files.

    ``remaining`` files are not acknowledged yet, so the process processes at least that many:
    the number drawn stays within a share of them (``kills_left`` more kills must still find
    work), so the kill lands before the run ends. One time in five the kill comes after a
    random delay of 0.05–0.6 s, or as soon as the first file is processed, whichever is first.
    """
    if rng.random() < 0.2:
        target, deadline = 1, time.monotonic() + rng.uniform(0.05, 0.6)
    else:
        target, deadline = rng.randint(1, max(1, remaining // (kills_left + 1))), None
    while proc.poll() is None:
        if len(read_trace(trace)) - seen_lines >= target:
            break
        if deadline is not None and time.monotonic() >= deadline:
            break
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)


def kill_and_resume(
    folder: pathlib.Path, config: pathlib.Path, store, run_id: str, env, baseline: str, kills: int
) -> None:
    rng = random.Random(f"{run_id}-{kills}")
    sequence = order(MAX_FILES)
    trace = folder / "trace.log"
    seen_lines = 0
    front = 0
    killed = 0
    command = "run"
    for _ in range(kills * 3):  # a process may finish before its kill: try again, bounded
        if killed == kills:
            break
        proc = durable(command, str(config), "--json", env=env)
        kill_at_a_random_moment(proc, trace, seen_lines, MAX_FILES - front, kills - killed, rng)
        _, err = proc.communicate(timeout=120)
        lines = read_trace(trace)
        processed = [sequence[path] for path in lines[seen_lines:]]
        # everything this process processed lies after what was acknowledged before it
        assert all(n > front for n in processed), (front, processed[:5])
        seen_lines = len(lines)
        record = load(store, run_id)
        new_front = acked_front(record)
        assert new_front >= front  # an acknowledged message is never taken back
        front = new_front
        if record is not None:
            command = "resume"
        if proc.returncode == -signal.SIGKILL:
            killed += 1
        else:
            assert proc.returncode == 0, err  # it finished before the kill
    assert killed == kills
    proc = durable(command, str(config), "--json", env=env)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert json.loads(out)["status"] == "completed"
    lines = read_trace(trace)
    assert all(sequence[path] > front for path in lines[seen_lines:])
    assert set(lines) == set(sequence)  # every file was processed at least once
    text = (folder / "report" / "tally.json").read_text()
    assert text == baseline
    assert json.loads(text) == independent_tally(MAX_FILES)


# covers: S-7, S-8
@pytest.mark.slow
def test_the_stream_example_survives_random_kills_on_the_file_store(tmp_path, baseline):
    from durable_filestore import FileStore

    config = write_config(tmp_path, '[store]\nbackend = "file"\ndirectory = "runs"\n', "files")
    store = FileStore(str(tmp_path / "runs"))
    kill_and_resume(tmp_path, config, store, "files", environment(), baseline, KILLS)


# covers: S-7, S-8
@pytest.mark.slow
def test_the_stream_example_survives_random_kills_on_the_sqlite_store(tmp_path, baseline):
    from durable_sqlitestore import SQLiteStore

    config = write_config(tmp_path, '[store]\nbackend = "sqlite"\npath = "runs.sqlite"\n', "sql")
    store = SQLiteStore(str(tmp_path / "runs.sqlite"))
    kill_and_resume(tmp_path, config, store, "sql", environment(), baseline, KILLS)


# covers: S-7, S-8
@pytest.mark.postgres
def test_the_stream_example_survives_a_kill_on_the_postgres_store(tmp_path, baseline, postgres_dsn):
    from durable_postgresstore import PostgresStore

    run_id = f"stream-{uuid.uuid4().hex[:12]}"
    config = write_config(
        tmp_path, '[store]\nbackend = "postgres"\ndsn_env = "STREAM_PG_DSN"\n', run_id
    )
    store = PostgresStore(postgres_dsn)
    try:
        env = environment(STREAM_PG_DSN=postgres_dsn)
        kill_and_resume(tmp_path, config, store, run_id, env, baseline, 1)
    finally:
        store.close()
