"""Durable streams survive SIGKILL at random moments (real processes; file, SQLite and PostgreSQL
stores).

A resumable producer of 10,000 elements and three reading groups (``every`` acks each delivery,
``sparse`` acks in shuffled batches, ``awaited`` awaits every seventh ack's save) run in a child
process (``streams_child.py``) that is killed with SIGKILL at a random moment, then resumed, again
and again; a last resume runs to the end. 25 kills per store (75 in all), with a quick producer,
keep the wall time reasonable. After every kill the stored record is read, and at the end the side
logs are checked:

- every element was delivered to each group at least once, always with its own value;
- an element whose ack was saved is never delivered to that group again, and the final ack
  front of each group covers the whole stream: the acked elements, in order, are the stream
  exactly once;
- the producer's saved position and each group's ack front never went backwards, and no
  producer ever started before the last saved position;
- each resume raised the generation by exactly one: deliveries of a process carry the stored
  generation + 1, and the stored generation grows by at most one per process.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from durable_core import NotFoundError, RunRecord
from durable_core.durable.streams import WRITER_GROUP
from tests import ROOT
from tests.durable_core.durable.scenarios import open_store

CHILD = "tests.durable_core.durable.streams_child"
ELEMENTS = 10_000
KILLS = 25


def stored(kind: str, location: Path | str, run_id: str) -> RunRecord | None:
    store = open_store(kind, location)
    try:
        with store.acquire(run_id) as session:
            return session.load()
    except NotFoundError:
        return None
    finally:
        store.close()


def entries(record: RunRecord | None) -> dict[str, object]:
    if record is None:
        return {}
    return {entry.group: entry for entry in record.streams.values()}


def producer_starts(logs: Path) -> int:
    path = logs / "producer.log"
    return path.read_text().count("\n") if path.exists() else 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind", ["file", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_killed_stream_run_resumes_exactly_where_it_was(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # covers: S-2, S-3, R-RT-2
    rng = random.Random(f"streams-{kind}")
    kills = rounds = 0
    starts: list[int] = []
    generations: list[int] = []
    while kills < KILLS:  # a run that finishes before the last kill is followed by another
        rounds += 1
        root = tmp_path / f"round{rounds}"
        # The child opens the store at this location (PostgreSQL: the server's DSN, where
        # each round is a run of its own).
        location = request.getfixturevalue("postgres_dsn") if kind == "postgres" else root / "store"
        done, position, generation = killed_run(
            kind, location, f"s{rounds}", root, rng, KILLS - kills
        )
        kills += done
        starts.append(position)
        generations.append(generation)
    assert kills == KILLS
    # The kills really landed mid-stream: producers resumed from saved positions, readers
    # were delivered elements by resumed processes.
    assert max(starts) > 0 and max(generations) >= 3, (starts, generations)


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def kill_after_deliveries(
    proc: subprocess.Popen,
    logs: Path,
    started: int,
    delivered: int,
    remaining: int,
    kills_left: int,
    rng: random.Random,
) -> None:
    """SIGKILL ``proc`` once its producer started (the ``started``-th start in the log) and the
    group ``every`` was delivered a random number of elements by it (none to a share of
    ``remaining``; earlier processes logged ``delivered`` deliveries).

    ``remaining`` elements are not acknowledged by ``every`` yet, so this process delivers at
    least that many; the number drawn stays within a share of them (``kills_left`` more kills
    must still find work), so the kill lands mid-stream however fast the machine is.
    """
    target = rng.randint(0, max(1, remaining // (kills_left + 1)))
    deadline = time.monotonic() + 300  # a process that makes no progress fails the test
    while proc.poll() is None:
        if producer_starts(logs) >= started and lines(logs / "every.log") - delivered >= target:
            break
        if time.monotonic() >= deadline:
            proc.kill()
            pytest.fail("the stream run made no progress for 300 s")
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)


def killed_run(
    kind: str, location: Path | str, run_id: str, root: Path, rng: random.Random, budget: int
) -> tuple[int, int, int]:
    """Run ``run_id`` to its end in the store at ``location``, killing it up to ``budget``
    times; check everything. Returns the number of kills, the highest position a producer
    started from and the highest generation an element was delivered with."""
    logs = root / "logs"
    if isinstance(location, Path):
        location.mkdir(parents=True)
    logs.mkdir(parents=True)
    processes: list[tuple[int, int]] = []  # (pid, stored generation before it started)
    previous: dict[str, object] = {}
    kills = 0
    finished = False
    while not finished:
        before = stored(kind, location, run_id)
        mode = "run" if before is None else "resume"
        generation = entries(before).get(WRITER_GROUP)
        delivered = lines(logs / "every.log")  # by earlier processes, all ended
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                CHILD,
                mode,
                kind,
                str(location),
                str(logs),
                str(ELEMENTS),
                run_id,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        processes.append((proc.pid, 0 if generation is None else generation.generation))
        if kills < budget:
            every = entries(before).get("every")
            acked = 0 if every is None else every.acked_through
            kill_after_deliveries(
                proc, logs, len(processes), delivered, ELEMENTS - acked, budget - kills, rng
            )
        out, err = proc.communicate(timeout=300)
        if proc.returncode == -signal.SIGKILL:
            kills += 1
        else:
            assert proc.returncode == 0, (proc.returncode, err)
            assert out.startswith("completed"), (out, err)
            finished = True
        now = entries(stored(kind, location, run_id))
        for group, entry in now.items():
            old = previous.get(group)
            if old is None:
                continue
            assert entry.last_sequence >= old.last_sequence, group
            assert entry.acked_through >= old.acked_through, group
            assert entry.generation - old.generation in (0, 1), group
            if group == WRITER_GROUP and old.cursor:
                assert json.loads(entry.cursor) >= json.loads(old.cursor)
        previous = now

    generation_before = dict(processes)
    # Producer starts: never before the position saved by an earlier process.
    starts = [line.split() for line in (logs / "producer.log").read_text().splitlines()]
    positions = [int(position) for _, position, _ in starts]
    assert positions == sorted(positions)
    for group in ("every", "sparse", "awaited"):
        delivered: set[int] = set()
        acked_at: dict[int, int] = {}  # sequence -> index of the process whose ack was saved
        order = {pid: index for index, (pid, _) in enumerate(processes)}
        seen_generation: dict[int, set[int]] = defaultdict(set)
        for line in (logs / f"{group}.log").read_text().splitlines():
            parts = line.split()
            if len(parts) < 3 or not parts[-1].isdigit():
                continue  # a line torn by the kill
            if parts[0] == "d" and len(parts) == 5:
                sequence, value, gen, pid = (int(p) for p in parts[1:])
                assert value == sequence - 1, line
                index = order[pid]
                earlier = acked_at.get(sequence)
                assert earlier is None or earlier >= index, (
                    f"{group}: element {sequence} delivered again after its ack was saved"
                )
                delivered.add(sequence)
                seen_generation[pid].add(gen)
            elif parts[0] == "a" and len(parts) == 3:
                acked_at.setdefault(int(parts[1]), order[int(parts[2])])
        assert delivered == set(range(1, ELEMENTS + 1)), group
        for pid, gens in seen_generation.items():
            # One generation per process: the stored one raised by exactly one.
            assert gens == {generation_before[pid] + 1}, (group, pid, gens)
    final = stored(kind, location, run_id)
    assert final is not None
    for entry in final.streams.values():
        assert entry.last_sequence == entry.acked_through == ELEMENTS
        assert entry.pending == []
    top = max((max(g) for g in seen_generation.values()), default=0)
    return kills, max(positions), top
