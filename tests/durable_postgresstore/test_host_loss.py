"""A host that drops off the network loses its runs within the keepalive bound (X-HOST).

The owner runs in a network namespace this test makes (``ip netns add``), joined to the host by a
veth pair; a PostgreSQL server of its own listens on the host's end. The test takes the owner's
end of the link down: nothing is sent or refused, the peer just goes silent, as when a host loses
power or its cable. With keepalives of a few seconds, the server ends the vanished owner's
session, another process in the host namespace takes the run over, and the takeover time is
measured. The old owner's next save fails closed, whether it comes while the link is still
down (its own keepalive or user timeout ends the connection) or after it is back (its socket
already says the connection is gone: refused before anything is sent).

Needs root, ``ip`` and network namespaces, and PostgreSQL server binaries; skipped with the
reason otherwise.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from durable_core import BusyError, RunRecord
from durable_postgresstore import Keepalives, PostgresStore, advisory_key

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
OWNER = HERE / "host_loss_owner.py"

# Keepalives of the test: a silent peer is gone after 1 + 1 × 2 = 3 s (user timeout 3 s).
KEEPALIVES = {
    "keepalives_idle": 1,
    "keepalives_interval": 1,
    "keepalives_count": 2,
    "tcp_user_timeout": 3,
}
BOUND = Keepalives(
    idle=KEEPALIVES["keepalives_idle"],
    interval=KEEPALIVES["keepalives_interval"],
    count=KEEPALIVES["keepalives_count"],
    user_timeout=KEEPALIVES["tcp_user_timeout"],
).bound
TAKEOVER_LIMIT = 60.0  # seconds; with the settings above it takes about 3 to 5 s


def _ip(*args: str, netns: str | None = None) -> subprocess.CompletedProcess[str]:
    command = ["ip", *args] if netns is None else ["ip", "netns", "exec", netns, "ip", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)


def _must(done: subprocess.CompletedProcess[str]) -> None:
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(done.args)} failed: {done.stderr.strip()}")


class Namespace:
    """A network namespace joined to the host namespace by a veth pair on a /30 subnet."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 100000}{random.randrange(100)}"
        self.name = f"durable-hl-{tag}"
        self.host_if, self.inner_if = f"dhl{tag}h", f"dhl{tag}n"
        net = random.randrange(1, 250)
        self.host_ip, self.inner_ip = f"10.213.{net}.1", f"10.213.{net}.2"
        self.subnet = f"10.213.{net}.0/30"

    def create(self) -> None:
        _must(_ip("netns", "add", self.name))
        _must(_ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.inner_if))
        _must(_ip("link", "set", self.inner_if, "netns", self.name))
        _must(_ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_if))
        _must(_ip("link", "set", self.host_if, "up"))
        _must(_ip("addr", "add", f"{self.inner_ip}/30", "dev", self.inner_if, netns=self.name))
        _must(_ip("link", "set", self.inner_if, "up", netns=self.name))
        _must(_ip("link", "set", "lo", "up", netns=self.name))

    def cut(self) -> None:
        """The owner's end of the link goes down: its packets stop, in both directions."""
        _must(_ip("link", "set", self.inner_if, "down", netns=self.name))

    def restore(self) -> None:
        _must(_ip("link", "set", self.inner_if, "up", netns=self.name))

    def remove(self) -> None:
        _ip("netns", "del", self.name)  # takes its end of the pair, and so the pair, along
        _ip("link", "del", self.host_if)


def _netns_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the 'ip' command (iproute2) is not installed"
    probe = Namespace()
    try:
        probe.create()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return f"cannot make a network namespace with a veth pair here: {exc}"
    finally:
        probe.remove()
    return None


def _throwaway_server_class() -> Any:
    """The suite's ThrowawayServer (tests/conftest.py is not importable by name)."""
    path = HERE.parent / "conftest.py"
    spec = importlib.util.spec_from_file_location("durable_suite_conftest", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def namespace() -> Iterator[Namespace]:
    reason = _netns_unavailable()
    if reason is not None:
        pytest.skip(f"host-loss test skipped: {reason}")
    ns = Namespace()
    ns.create()
    try:
        yield ns
    finally:
        ns.remove()


@pytest.fixture
def server(namespace: Namespace) -> Iterator[Any]:
    """A PostgreSQL server of this test, listening on the host's end of the veth pair."""
    suite = _throwaway_server_class()
    try:
        pg = suite.ThrowawayServer(
            suite._find_bindir(),
            listen_addresses=f"127.0.0.1,{namespace.host_ip}",
            hba=(f"host all all {namespace.subnet} scram-sha-256",),
        )
        pg.start()
    except suite.ServerUnavailable as exc:
        pytest.skip(f"host-loss test skipped: no PostgreSQL server: {exc}")
    try:
        yield pg
    finally:
        pg.stop()


def _client_of_lock(dsn: str, run_id: str) -> str | None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT host(a.client_addr) FROM pg_locks AS l JOIN pg_stat_activity AS a "
            "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
            "AND ((l.classid::bigint << 32) | l.objid::bigint) = %s::bigint",
            [advisory_key(run_id)],
        ).fetchone()
    return None if row is None else row[0]


def _line(proc: subprocess.Popen[str], seconds: float) -> dict[str, Any]:
    """The owner's next JSON line, within ``seconds``."""
    import selectors

    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(seconds):
            raise AssertionError(f"the owner said nothing within {seconds:g} s")
    line = proc.stdout.readline()
    if not line:
        proc.wait(10)
        assert proc.stderr is not None
        raise AssertionError(f"the owner ended ({proc.returncode}): {proc.stderr.read()}")
    return json.loads(line)


def _tell_to_save(owner: subprocess.Popen[str]) -> None:
    assert owner.stdin is not None
    owner.stdin.write("save\n")
    owner.stdin.flush()


# covers: X-HOST, B-PG-1
@pytest.mark.parametrize("old_owner_saves", ["after the link is back", "while the link is down"])
def test_a_vanished_owner_loses_its_run_and_its_next_save_fails_closed(
    namespace: Namespace, server: Any, record_property: Any, old_owner_saves: str
) -> None:
    run_id = "vanishing"
    inner_dsn = server.dsn_for("postgres").replace("host=127.0.0.1", f"host={namespace.host_ip}")
    local_dsn = server.dsn_for("postgres")
    env = {**os.environ, "DURABLE_HOST_LOSS_DSN": inner_dsn}
    options = {**KEEPALIVES, "acquire_timeout": 20}
    owner = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            namespace.name,
            sys.executable,
            str(OWNER),
            run_id,
            json.dumps(options),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    taker = PostgresStore(local_dsn, **KEEPALIVES)
    try:
        assert _line(owner, 60) == {"event": "owns"}
        # The owner's lock connection really goes through the namespace's link.
        assert _client_of_lock(local_dsn, run_id) == namespace.inner_ip
        with pytest.raises(BusyError):
            taker.acquire(run_id)

        namespace.cut()
        cut_at = time.monotonic()
        if old_owner_saves == "while the link is down":
            # Its save cannot reach the server: the client's keepalive or user timeout ends
            # the connection, and the save fails (uncertain: it was sent into the silence).
            _tell_to_save(owner)
            outcome = _line(owner, 120)
            assert outcome["event"] == "refused" and outcome["connection_lost"], outcome
            assert outcome["seconds"] < TAKEOVER_LIMIT
        while True:
            try:
                session = taker.acquire(run_id)
                break
            except BusyError:
                assert time.monotonic() - cut_at < TAKEOVER_LIMIT, (
                    f"no takeover within {TAKEOVER_LIMIT:g} s of the link going down"
                )
                time.sleep(0.1)
        takeover = time.monotonic() - cut_at
        record_property("takeover_seconds", round(takeover, 2))
        print(f"takeover {takeover:.2f} s after the owner's link went down")
        assert takeover < TAKEOVER_LIMIT
        # Not before the keepalives can have spoken: the lock was not freed by anything else.
        assert takeover >= KEEPALIVES["keepalives_idle"]

        assert session.load().version == "old owner"
        session.save(RunRecord(run_id=run_id, revision=2, version="new owner"), 1)

        if old_owner_saves == "after the link is back":
            # Past the keepalive bound the owner's own end has given up too (a link restored
            # sooner makes its save go out and meet the server's reset: refused as well, but
            # uncertain, as any save whose answer was lost).
            time.sleep(max(0.0, cut_at + BOUND + 1.5 - time.monotonic()))
        namespace.restore()
        if old_owner_saves == "after the link is back":
            # Its socket already says the connection is gone: refused before sending.
            _tell_to_save(owner)
            outcome = _line(owner, 120)
            assert outcome["event"] == "refused" and outcome["connection_lost"], outcome
            assert not outcome["uncertain"], outcome
        print(
            f"the old owner's save {old_owner_saves} was refused after "
            f"{outcome['seconds']:.2f} s: uncertain={outcome['uncertain']}"
        )
        assert session.load().version == "new owner"
        session.close()
        owner.wait(30)
        assert owner.returncode == 0
    finally:
        taker.close()
        if owner.poll() is None:
            owner.kill()
            owner.wait(10)
        for stream in (owner.stdin, owner.stdout, owner.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
