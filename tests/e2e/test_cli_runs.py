"""The ``durable`` command end to end, in real subprocesses, on the stdlib audit example.

The run is killed with SIGKILL once at least 3 shards are confirmed — seen by reading the
record the store persisted, never by waiting a fixed time — then resumed. The report must equal
an uninterrupted run's, and the shards confirmed before the kill must not run again. The same
test runs on the file, SQLite and PostgreSQL stores by changing only the ``[store]`` table of
the example's own config.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from durable_core.records import AttemptState, RunRecord
from durable_core.records.jsonio import record_from_json

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "stdlib_audit"
RUN_ID = "stdlib-audit"
MAX_FILES = 450  # a subset of the standard library keeps each run to a couple of seconds
SHARDS = [f"shard-{i:02d}" for i in range(16)]


def durable(*args: str, cwd: pathlib.Path | None = None, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "durable_core", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        **kwargs,
    )


def finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def write_config(folder: pathlib.Path, store: str) -> pathlib.Path:
    """The example's audit.toml with a smaller file subset, the report in ``folder``, and the
    given ``[store]`` table; the graph is still the example's (found through PYTHONPATH)."""
    text = (EXAMPLE / "audit.toml").read_text()
    head, _, _ = text.partition("[store]")
    head = head.replace("max_files = 0 ", f"max_files = {MAX_FILES} ")
    assert f"max_files = {MAX_FILES}" in head
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "audit.toml"
    config.write_text(f"{head}{store}\n[runtime]\nmax_running = 4\n")
    return config


def env_with_example(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EXAMPLE), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


# -- reading the persisted record without taking the run ---------------------------------------


def file_reader(folder: pathlib.Path):
    from durable_filestore.store import FileStore

    store = FileStore(str(folder / "runs"))
    path = pathlib.Path(store.record_path(RUN_ID))

    def read() -> RunRecord | None:
        try:
            return record_from_json(path.read_bytes())
        except FileNotFoundError:
            return None

    return read


def sqlite_reader(folder: pathlib.Path):
    db = folder / "runs.sqlite"

    def read() -> RunRecord | None:
        if not db.exists():
            return None
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            row = conn.execute(
                "SELECT record FROM durable_runs WHERE run_id = ?", (RUN_ID,)
            ).fetchone()
        except sqlite3.OperationalError:  # the table is not created yet
            return None
        finally:
            conn.close()
        return record_from_json(bytes(row[0])) if row else None

    return read


def postgres_reader(dsn: str):
    import psycopg

    def read() -> RunRecord | None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            try:
                row = conn.execute(
                    "SELECT record FROM pulse_durable.runs WHERE run_id = %s",
                    (RUN_ID.encode(),),
                ).fetchone()
            except psycopg.errors.UndefinedTable:
                return None
        return record_from_json(bytes(row[0])) if row else None

    return read


def confirmed_shards(record: RunRecord | None) -> dict[str, str]:
    """Shard node id -> its confirmed root attempt id, in the root scope."""
    if record is None or record.root_scope not in record.scopes:
        return {}
    nodes = record.scopes[record.root_scope].nodes
    return {n: r.attempt for n, r in nodes.items() if n in SHARDS}


def shard_attempts(record: RunRecord) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for attempt_id, attempt in record.attempts.items():
        if attempt.node_id in SHARDS:
            out.setdefault(attempt.node_id, set()).add(attempt_id)
    return out


# -- the baseline ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> dict[str, str]:
    """The report of an uninterrupted run (file store)."""
    folder = tmp_path_factory.mktemp("baseline")
    config = write_config(folder, '[store]\nbackend = "file"\ndirectory = "runs"\n')
    code, out, err = finish(durable("run", str(config), "--json", env=env_with_example()))
    assert code == 0, err
    result = json.loads(out)
    assert (result["status"], result["restored"], result["confirmed"]) == ("completed", 0, 22)
    return {name: (folder / "report" / name).read_text() for name in ("report.md", "report.json")}


def kill_and_resume(
    folder: pathlib.Path, config: pathlib.Path, read, env, baseline, *, full: bool = False
) -> None:
    """Kill a run after >= 3 shards are confirmed, resume it, compare with the baseline.

    ``full`` also checks the refusal of a second ``run``, a second ``resume``, ``inspect`` and
    ``list`` (once is enough: they do not depend on the backend).
    """
    proc = durable("run", str(config), "--json", env=env)
    seen: dict[str, str] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        seen = confirmed_shards(read())
        if len(seen) >= 3:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    code, _, err = finish(proc)
    assert code == -signal.SIGKILL, f"the run ended before 3 shards were confirmed: {err}"
    killed = read()
    at_kill = confirmed_shards(killed)
    assert len(at_kill) >= 3
    assert len(at_kill) < len(SHARDS), "every shard was done: the kill proved nothing"
    attempts_at_kill = shard_attempts(killed)
    assert not (folder / "report").exists()

    if full:
        # the killed run is resumable, not finished: a new run of the same id is refused
        code, _, err = finish(durable("run", str(config), env=env))
        assert code == 5, err
        assert "already exists" in err

    code, out, err = finish(durable("resume", str(config), "--json", env=env))
    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "completed"
    assert result["restored"] >= len(at_kill) + 1  # the listing node and the shards seen
    assert result["confirmed"] + result["restored"] <= 22

    final = read()
    final_shards = confirmed_shards(final)
    assert set(final_shards) == set(SHARDS)
    for node, attempt in at_kill.items():
        # confirmed before the kill: same confirmed attempt, and no new attempt was started
        assert final_shards[node] == attempt
        assert shard_attempts(final)[node] == attempts_at_kill[node]
        assert final.attempts[attempt].state == AttemptState.CONFIRMED
    for name, text in baseline.items():
        assert (folder / "report" / name).read_text() == text

    if not full:
        return

    # resuming a completed run restores everything and runs nothing
    code, out, err = finish(durable("resume", str(config), "--json", env=env))
    assert code == 0, err
    again = json.loads(out)
    assert again["confirmed"] == 0
    assert again["saves"] == 0

    # inspect and list see the finished run through the same config
    code, out, err = finish(durable("inspect", str(config), "--json", env=env))
    assert code == 0, err
    info = json.loads(out)
    assert info["status"] == "completed"
    assert info["definition_matches"] is True
    code, out, err = finish(durable("list", str(config), "--json", env=env))
    assert code == 0, err
    assert [(r["run_id"], r["status"]) for r in json.loads(out)] == [(RUN_ID, "completed")]


# covers: R-ATT-4, R-RT-1, E-2
def test_killed_run_resumes_on_the_file_store(tmp_path, baseline):
    config = write_config(tmp_path, '[store]\nbackend = "file"\ndirectory = "runs"\n')
    kill_and_resume(
        tmp_path, config, file_reader(tmp_path), env_with_example(), baseline, full=True
    )


def test_killed_run_with_the_process_executor_resumes_with_the_same_report(tmp_path, baseline):
    """The shards run in a process pool ([executor] backend = "process"); the owner is killed,
    resumed, and the report equals the thread run's."""
    config = write_config(tmp_path, '[store]\nbackend = "file"\ndirectory = "runs"\n')
    config.write_text(config.read_text() + '\n[executor]\nbackend = "process"\nmax_workers = 2\n')
    kill_and_resume(tmp_path, config, file_reader(tmp_path), env_with_example(), baseline)


# covers: R-ATT-4, R-RT-1, B-SQL-2
def test_killed_run_resumes_on_the_sqlite_store(tmp_path, baseline):
    config = write_config(tmp_path, '[store]\nbackend = "sqlite"\npath = "runs.sqlite"\n')
    kill_and_resume(tmp_path, config, sqlite_reader(tmp_path), env_with_example(), baseline)


# covers: R-ATT-4, R-RT-1, B-PG-1
@pytest.mark.postgres
def test_killed_run_resumes_on_the_postgres_store(tmp_path, baseline, postgres_dsn):
    config = write_config(tmp_path, '[store]\nbackend = "postgres"\ndsn_env = "AUDIT_PG_DSN"\n')
    env = env_with_example(AUDIT_PG_DSN=postgres_dsn)
    kill_and_resume(tmp_path, config, postgres_reader(postgres_dsn), env, baseline)


@pytest.mark.parametrize(("signum", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_stops_cleanly_and_says_how_to_resume(tmp_path, baseline, signum, exit_code):
    config = write_config(tmp_path, '[store]\nbackend = "file"\ndirectory = "runs"\n')
    read = file_reader(tmp_path)
    proc = durable("run", str(config), env=env_with_example())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if confirmed_shards(read()):
            proc.send_signal(signum)
            break
        time.sleep(0.005)
    code, _, err = finish(proc)
    assert code == exit_code, err
    again = "Ctrl-C again" if signum == signal.SIGINT else "send SIGTERM again (or press Ctrl-C)"
    assert f"waiting for running nodes to end ({again} to stop at once)" in err
    assert f"Continue it with: durable resume {config}" in err
    assert "Traceback" not in err
    stopped = read()
    # the record stays resumable: nothing active was turned into a failure
    assert not any(a.state == AttemptState.FAILED for a in stopped.attempts.values())
    code, out, err = finish(durable("resume", str(config), env=env_with_example()))
    assert code == 0, err
    assert "completed" in out
    for name, text in baseline.items():
        assert (tmp_path / "report" / name).read_text() == text


HOLDER = """
import sys
from durable_core.config import load_config
store = load_config(sys.argv[1]).open_store()
session = store.acquire(sys.argv[2])
print("held", flush=True)
sys.stdin.readline()
"""


# covers: R-STORE-1, E-1
def test_a_run_owned_elsewhere_gives_the_busy_exit_code_at_once(tmp_path):
    config = write_config(tmp_path, '[store]\nbackend = "file"\ndirectory = "runs"\n')
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(config), RUN_ID],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        # The holder keeps the run until the loop is over: a command that waited for the
        # owner would never end (finish's bound then fails the test).
        for command in ("run", "resume", "inspect"):
            code, _, err = finish(durable(command, str(config), env=env_with_example()))
            assert code == 3, (command, err)
            assert "owned by another session" in err
            assert holder.poll() is None  # still the owner when the answer came
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert not (tmp_path / "report").exists()


def test_output_cut_short_by_the_reader_ends_quietly(tmp_path):
    """`durable inspect … | head -1`: a closed pipe is not an error of Durable."""
    config = write_config(tmp_path, '[store]\nbackend = "file"\ndirectory = "runs"\n')
    code, _, err = finish(durable("run", str(config), env=env_with_example()))
    assert code == 0, err
    # `true` exits at once, so every write of inspect meets a closed pipe.
    shell = f"{sys.executable} -m durable_core inspect {config} | true; exit ${{PIPESTATUS[0]}}"
    proc = subprocess.run(
        ["bash", "-c", shell], capture_output=True, text=True, env=env_with_example(), timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "BrokenPipe" not in proc.stderr and "rror" not in proc.stderr, proc.stderr
