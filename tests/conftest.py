"""Suite-wide test setup: a real PostgreSQL server for tests marked ``postgres`` (B-PG-3).

Fixtures:
    postgres_server (session): the server every ``postgres`` test uses, with ``.dsn`` and
        ``.throwaway``. Either ``PULSE_POSTGRES_TEST_DSN`` when set, or a throwaway server
        started here with the machine's ``initdb``/``pg_ctl`` (found in
        ``PULSE_POSTGRES_TEST_BINDIR``, on ``PATH``, or in ``/usr/lib/postgresql/*/bin``),
        listening on 127.0.0.1 on a free port with its data directory and unix socket in a
        temporary directory. When the tests run as root it runs as the ``postgres`` system user
        (PostgreSQL refuses root). It is stopped (``pg_ctl stop -m immediate``) and removed at
        the end of the session.
    postgres_dsn (session): the server's DSN (a libpq connection string).

Every test marked ``postgres`` (and every test using ``postgres_dsn``, which gets the mark)
starts from a database without the ``pulse_durable`` schema: it is dropped with
``DROP SCHEMA IF EXISTS pulse_durable CASCADE`` before each such test. That is why
``PULSE_POSTGRES_TEST_DSN`` must name an isolated test database, never one holding real runs.

When no server can be had, those tests are skipped with the reason. A skip is not a pass: under
``CI=true`` a skipped ``postgres`` test fails the run (see :func:`pytest_runtest_makereport`).
"""

from __future__ import annotations

import atexit
import fcntl
import glob
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["pytester"]

# Property tests judge results, never speed: no deadline per example and no "too slow" health
# check, which a loaded or slower machine trips (speed is measured in benchmarks/).
settings.register_profile("durable", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("durable")

POSTGRES_DSN_ENV = "PULSE_POSTGRES_TEST_DSN"
POSTGRES_BINDIR_ENV = "PULSE_POSTGRES_TEST_BINDIR"
TEST_SCHEMA = "pulse_durable"
_TEST_DATABASE = "durable_test"


# The child processes the tests start (the CLI, crash children, launcher workers) import
# Durable and its dependencies anew each time; where the environment forbids writing bytecode
# (PYTHONDONTWRITEBYTECODE), every one of them would compile every module from source again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def pytest_configure(config: pytest.Config) -> None:
    # A shell starts a background job with SIGINT ignored, and children inherit that: the
    # tests that press Ctrl-C on a child (a run, the CLI) need Python's default handling.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.addinivalue_line(
        "markers",
        "postgres: needs a real PostgreSQL server (started by the suite or given by "
        f"{POSTGRES_DSN_ENV}); skipped without one, which fails the run under CI=true",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that use the server ``postgres``."""
    for item in items:
        uses_server = {"postgres_dsn", "postgres_server"} & set(getattr(item, "fixturenames", ()))
        if uses_server and item.get_closest_marker("postgres") is None:
            item.add_marker(pytest.mark.postgres)


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """Under ``CI=true``, turn the skip of a ``postgres`` test into a failure (B-PG-3).

    A database test that did not run proves nothing; CI must provide a server (``.ci/run``
    installs one) or set ``PULSE_POSTGRES_TEST_DSN``. Expected failures (xfail) stay as they are.
    """
    report: pytest.TestReport = yield
    if (
        report.skipped
        and not hasattr(report, "wasxfail")
        and item.get_closest_marker("postgres") is not None
        and _under_ci()
    ):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = (
            f"a test marked 'postgres' was skipped under CI=true, which counts as a failure: "
            f"{reason}. Provide PostgreSQL server binaries (initdb, pg_ctl) or set "
            f"{POSTGRES_DSN_ENV} to an isolated test database"
        )
    return report


# ---------------------------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------------------------


class ServerUnavailable(Exception):
    """No PostgreSQL server can be started here; the message says why."""


class PostgresServer:
    """A PostgreSQL server for the tests: its DSN and whether the suite started it."""

    def __init__(self, dsn: str, *, throwaway: bool) -> None:
        self.dsn = dsn
        self.throwaway = throwaway

    def reset(self) -> None:
        """Give the next test a database without Durable's schema (and, on the throwaway
        server, without other connections left over by an earlier test)."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            if self.throwaway:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            conn.execute("SET lock_timeout = '20s'")
            conn.execute(f"DROP SCHEMA IF EXISTS {TEST_SCHEMA} CASCADE")


def _version_key(path: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path))


def _find_bindir() -> Path:
    wanted = ("initdb", "pg_ctl")
    explicit = os.environ.get(POSTGRES_BINDIR_ENV)
    if explicit:
        bindir = Path(explicit)
        if all((bindir / name).is_file() for name in wanted):
            return bindir
        raise ServerUnavailable(f"{POSTGRES_BINDIR_ENV}={explicit} holds no initdb and pg_ctl")
    candidates: list[Path] = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    candidates += [
        Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key)[::-1]
    ]
    for bindir in candidates:
        if all((bindir / name).is_file() for name in wanted):
            return bindir
    raise ServerUnavailable(
        "no PostgreSQL server binaries (initdb and pg_ctl) on PATH or in "
        f"/usr/lib/postgresql/*/bin; install them or set {POSTGRES_DSN_ENV}"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ThrowawayServer:
    """A PostgreSQL cluster in a temporary directory, removed when stopped.

    Args:
        bindir: where ``initdb`` and ``pg_ctl`` are.
        listen_addresses: the server's ``listen_addresses`` (they must exist when it starts).
        hba: extra ``pg_hba.conf`` lines, e.g. ``host all all 10.0.0.0/24 scram-sha-256``.
    """

    def __init__(
        self, bindir: Path, *, listen_addresses: str = "127.0.0.1", hba: tuple[str, ...] = ()
    ) -> None:
        self.bindir = bindir
        self.listen_addresses = listen_addresses
        self.hba = hba
        self.user: tuple[int, int] | None = None  # (uid, gid) to run as, when we are root
        if os.geteuid() == 0:
            import pwd

            try:
                entry = pwd.getpwnam("postgres")
            except KeyError:
                raise ServerUnavailable(
                    "the tests run as root and there is no 'postgres' system user to run the "
                    "throwaway server as (PostgreSQL refuses to run as root)"
                ) from None
            self.user = (entry.pw_uid, entry.pw_gid)
        self.base = Path(tempfile.mkdtemp(prefix="durable-pg-"))
        self.data = self.base / "data"
        self.sockets = self.base / "sock"
        self.log = self.base / "server.log"
        self.password = secrets.token_hex(16)
        self.port = 0
        self.running = False

    def _own(self, path: Path) -> None:
        if self.user is not None:
            os.chown(path, *self.user)

    def _run(self, *args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        kwargs: dict[str, object] = {}
        if self.user is not None:
            kwargs = {"user": self.user[0], "group": self.user[1], "extra_groups": []}
        return subprocess.run(
            [str(a) for a in args],
            cwd=self.base,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            **kwargs,  # type: ignore[arg-type]
        )

    def start(self) -> None:
        os.chmod(self.base, 0o700)
        self._own(self.base)
        self.sockets.mkdir(mode=0o700)
        self._own(self.sockets)
        pwfile = self.base / "pwfile"
        pwfile.write_text(self.password + "\n")
        os.chmod(pwfile, 0o600)
        self._own(pwfile)
        done = self._run(
            self.bindir / "initdb",
            "-D",
            self.data,
            "-U",
            "postgres",
            f"--pwfile={pwfile}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        pwfile.unlink()
        if done.returncode != 0:
            raise ServerUnavailable(f"initdb failed: {done.stderr.strip() or done.stdout.strip()}")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                "\n# throwaway test server\n"
                f"listen_addresses = '{self.listen_addresses}'\n"
                f"unix_socket_directories = '{self.sockets}'\n"
                "fsync = off\n"
                "synchronous_commit = off\n"
                "full_page_writes = off\n"
                "max_connections = 100\n"
            )
        if self.hba:
            with open(self.data / "pg_hba.conf", "a") as hba:
                hba.write("\n" + "\n".join(self.hba) + "\n")
        last_error = ""
        for _ in range(3):
            self.port = _free_port()
            started = self._run(
                self.bindir / "pg_ctl",
                "start",
                "-D",
                self.data,
                "-l",
                self.log,
                "-w",
                "-t",
                "60",
                "-o",
                f"-p {self.port}",
            )
            if started.returncode == 0:
                self.running = True
                break
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            last_error = (started.stderr + started.stdout + log).strip()[-2000:]
        else:
            raise ServerUnavailable(f"pg_ctl start failed: {last_error}")
        atexit.register(self.stop)
        self._create_database()

    @property
    def admin_dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, dbname: str) -> str:
        return (
            f"host=127.0.0.1 port={self.port} dbname={dbname} user=postgres "
            f"password={self.password} connect_timeout=10"
        )

    def _create_database(self) -> None:
        import psycopg

        deadline = time.monotonic() + 120
        while True:
            try:
                with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
                    conn.execute(f"CREATE DATABASE {_TEST_DATABASE}")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        if self.running:
            self.running = False
            self._run(self.bindir / "pg_ctl", "stop", "-D", self.data, "-m", "immediate", "-w")
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The PostgreSQL server of this test session (see the module docstring)."""
    explicit = os.environ.get(POSTGRES_DSN_ENV)
    if explicit:
        yield PostgresServer(explicit, throwaway=False)
        return
    try:
        server = ThrowawayServer(_find_bindir())
    except ServerUnavailable as exc:
        pytest.skip(f"no PostgreSQL server: {exc}")
    try:
        server.start()
    except (ServerUnavailable, OSError, subprocess.SubprocessError) as exc:
        server.stop()
        pytest.skip(f"no PostgreSQL server: could not start a throwaway one: {exc}")
    try:
        yield PostgresServer(server.dsn_for(_TEST_DATABASE), throwaway=True)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """The DSN of the test database (a libpq keyword/value string)."""
    return postgres_server.dsn


@pytest.fixture(autouse=True)
def _postgres_isolation(request: pytest.FixtureRequest) -> Iterator[None]:
    """Drop ``pulse_durable`` before every ``postgres`` test, so each starts clean.

    The parallel workers (``-n``) each start a throwaway server of their own; a database given
    by ``PULSE_POSTGRES_TEST_DSN`` is shared by them, so there each ``postgres`` test holds an
    OS lock on a file named after the DSN for its whole run: one at a time.
    """
    if request.node.get_closest_marker("postgres") is None:
        yield
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    if server.throwaway:
        server.reset()
        yield
        return
    import hashlib

    name = hashlib.sha256(server.dsn.encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"durable-test-db-{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            server.reset()
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(autouse=True, scope="session")
def _run_logs_in_a_temporary_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The run log plugin writes under ``DURABLE_LOG_DIR``: keep the suite's logs out of the
    user's log folder (subprocesses inherit the variable)."""
    previous = os.environ.get("DURABLE_LOG_DIR")
    os.environ["DURABLE_LOG_DIR"] = str(tmp_path_factory.mktemp("run-logs"))
    yield
    if previous is None:
        os.environ.pop("DURABLE_LOG_DIR", None)
    else:
        os.environ["DURABLE_LOG_DIR"] = previous
