"""``durable recover`` on the ``local`` launcher: orphans made by SIGKILLing a real submitter
and its workers, a real SQLite store.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from durable_core.config import load_config
from durable_core.launchers import find_orphans, prepare


def durable(fleet, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "durable_core", *args],
        env=fleet.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def listed(fleet) -> set[str]:
    store = load_config(fleet.config).open_store()
    try:
        return {s.run_id for s in store.list_runs()}
    except Exception:
        return set()
    finally:
        store.close()


def orphan_runs(fleet, runs: str, started: int) -> None:
    """Submit the runs of ``runs`` on local:2 while ``hold`` stops them, then SIGKILL the
    submitter and its workers once ``started`` runs have a record."""
    hold = fleet.folder / "hold"
    hold.write_text("")
    submitter = durable(
        fleet, "submit", fleet.config, "--inputs-file", runs, "--on", f"local:{started}",
        "--wait", start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while len(listed(fleet)) < started and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    os.killpg(submitter.pid, signal.SIGKILL)
    submitter.wait(timeout=30)
    hold.unlink()
    assert len(listed(fleet)) == started


# covers: X-LAUNCH
def test_recover_finishes_orphans_and_unstarted_runs(fleet):
    runs = fleet.runs_file(5)
    orphan_runs(fleet, runs, started=2)
    assert fleet.calls() == {}
    part = prepare(fleet.config, [])
    store = part.config.open_store()
    try:
        orphans, owned, known = find_orphans(store, part.graph)
    finally:
        store.close()
    assert sorted(orphans) == sorted(known) and len(orphans) == 2 and owned == []

    recover = durable(
        fleet, "recover", fleet.config, "--store", fleet.store_url, "--inputs-file", runs,
        "--on", "local:2", "--wait", "--json",
    )  # fmt: skip
    out, err = recover.communicate(timeout=120)
    assert recover.returncode == 0, err
    document = json.loads(out)
    assert sorted(document["orphans"]) == sorted(orphans)
    assert len(document["unstarted"]) == 3
    assert document["counts"] == {"completed": 5}
    calls = fleet.calls()
    assert len(calls) == 10 and set(calls.values()) == {1}
    # nothing left: a second recovery submits nothing
    again = durable(fleet, "recover", fleet.config, "--on", "local:1", "--wait", "--json")
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    assert json.loads(out)["runs"] == [] and fleet.calls() == calls


# covers: X-LAUNCH
def test_two_recoveries_at_once_run_each_orphan_once(fleet):
    runs = fleet.runs_file(6)
    orphan_runs(fleet, runs, started=3)
    both = [
        durable(
            fleet,
            "recover",
            fleet.config,
            "--inputs-file",
            runs,
            "--on",
            "local:2",
            "--wait",
            "--json",
        )
        for _ in range(2)
    ]
    documents = []
    for process in both:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err  # the loser of a race neither fails nor hangs
        documents.append(json.loads(out))
    for document in documents:
        assert set(document["counts"]) <= {"completed"}
    calls = fleet.calls()
    assert len(calls) == 12 and set(calls.values()) == {1}, calls


# covers: X-LAUNCH
def test_recover_leaves_owned_runs_alone_and_uses_the_config_inputs(fleet):
    hold = fleet.folder / "hold-owned"
    hold.write_text("")
    owner = durable(fleet, "run", fleet.config, "--run-id", "owned", "--input", "tag=owned")
    deadline = time.monotonic() + 60
    while "owned" not in listed(fleet) and time.monotonic() < deadline:
        time.sleep(0.05)
    (fleet.folder / "hold-single").write_text("")
    victim = durable(fleet, "run", fleet.config, start_new_session=True)  # run id "single"
    while "single" not in listed(fleet) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    (fleet.folder / "hold-single").unlink()
    try:
        recover = durable(fleet, "recover", fleet.config, "--on", "local:1", "--json")
        out, err = recover.communicate(timeout=120)
        hold.unlink()
        assert recover.returncode == 0, err
        document = json.loads(out)
        assert document["orphans"] == ["single"] and document["owned"] == ["owned"]
        assert [r["status"] for r in document["runs"]] == ["completed"]
        assert owner.wait(timeout=60) == 0
    finally:
        owner.kill()
        hold.unlink(missing_ok=True)
    assert fleet.calls() == {
        "single first": 1,
        "single second": 1,
        "owned first": 1,
        "owned second": 1,
    }


# The submitter's CLI, with a thread that sends SIGINT to itself once the file argv[1] exists:
# Linux may hand a Ctrl-C to any thread of the process, not only to the main one.
INTERRUPTED_BY_A_THREAD = """
import os, signal, sys, threading, time

def interrupt(now):
    while not os.path.exists(now):
        time.sleep(0.01)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)

threading.Thread(target=interrupt, args=(sys.argv[1],), daemon=True).start()
sys.argv = ["durable", *sys.argv[2:]]
from durable_core.cli import main
main()
"""


# covers: X-LAUNCH
@pytest.mark.parametrize("received_by", ["main thread", "other thread"])
def test_ctrl_c_stops_the_workers_and_leaves_the_runs_resumable(fleet, received_by):
    runs = fleet.runs_file(2)
    hold = fleet.folder / "hold"
    hold.write_text("")
    args = ("submit", fleet.config, "--inputs-file", runs, "--on", "local:2")
    now = fleet.folder / "interrupt-now"
    if received_by == "main thread":
        submitter = durable(fleet, *args)
    else:
        submitter = subprocess.Popen(
            [sys.executable, "-c", INTERRUPTED_BY_A_THREAD, str(now), *args],
            env=fleet.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    deadline = time.monotonic() + 60
    while len(listed(fleet)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    if received_by == "main thread":
        submitter.send_signal(signal.SIGINT)
    else:
        now.write_text("")
    # the workers hold until ``hold`` goes: only the interrupt can end the submitter
    out, err = submitter.communicate(timeout=60)
    assert submitter.returncode == 130, err
    hold.unlink()
    assert fleet.calls() == {}  # the workers were stopped before their first node ended
    # the command to finish them; the line may be followed by the multiprocessing resource
    # tracker's own warnings about the terminated workers' semaphores
    hint = err.partition("finish them with ")[2].partition("\n")[0].strip()
    assert hint == (
        f"durable recover {shlex.quote(str(fleet.config))} --inputs-file "
        f"{shlex.quote(str(runs))} --on local:2 --wait"
    ), err
    recover = durable(fleet, *shlex.split(hint)[1:])
    out, err = recover.communicate(timeout=120)
    assert recover.returncode == 0, err
    assert "2 runs on local:2: 2 completed" in out
    assert set(fleet.calls().values()) == {1} and len(fleet.calls()) == 4
