"""The per-run OS lock helper shared by the file and SQLite stores (B-FILE-2, B-SQL-2)."""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import filelock
import pytest

from durable_core import AcquireTimeoutError, BusyError, DurableError
from durable_filestore import RunLock, acquire_run_lock, make_private_directory, run_key
from tests.bounded import returns_within


def test_second_lock_of_the_same_file_is_busy_at_once(tmp_path: Path) -> None:
    # covers: B-FILE-2, R-STORE-1
    path = tmp_path / "x.lock"
    with RunLock.acquire(path) as lock:
        assert lock.held
        # the lock is held for the whole call: a waiting acquire would never return
        with pytest.raises(BusyError, match="run 'x'"):
            returns_within(lambda: RunLock.acquire(path, description="run 'x'"))
    assert not lock.held
    RunLock.acquire(path).release()


def test_release_is_idempotent_and_keeps_the_file(tmp_path: Path) -> None:
    # covers: B-FILE-2
    lock = RunLock.acquire(tmp_path / "x.lock")
    lock.release()
    lock.release()
    assert (tmp_path / "x.lock").is_file()
    if os.name == "posix":
        assert stat.S_IMODE((tmp_path / "x.lock").stat().st_mode) == 0o600


def test_a_dropped_lock_object_releases_the_lock(tmp_path: Path) -> None:
    # covers: B-FILE-2
    RunLock.acquire(tmp_path / "x.lock")  # not kept: garbage-collected at once
    RunLock.acquire(tmp_path / "x.lock").release()


def test_acquire_run_lock_names_the_file_by_sha256(tmp_path: Path) -> None:
    # covers: B-FILE-2
    with acquire_run_lock(tmp_path, "run/../ü") as lock:
        assert lock.path == str(tmp_path / f"{run_key('run/../ü')}.lock")
        with pytest.raises(BusyError, match=re.escape("run/../ü")):
            acquire_run_lock(tmp_path, "run/../ü")
        acquire_run_lock(tmp_path, "other").release()


def test_missing_directory_is_an_os_error(tmp_path: Path) -> None:
    # covers: B-FILE-2
    with pytest.raises(FileNotFoundError):
        acquire_run_lock(tmp_path / "missing", "run")


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from durable_filestore import RunLock
    lock = RunLock.acquire(sys.argv[1])
    print("locked", flush=True)
    time.sleep(600)
    """
)


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_lock_of_a_killed_process_is_released(tmp_path: Path) -> None:
    # covers: B-FILE-2, R-STORE-1
    path = tmp_path / "x.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(BusyError):
            RunLock.acquire(path)
    finally:
        holder.kill()
        holder.wait(30)
        if holder.stdout is not None:
            holder.stdout.close()
    RunLock.acquire(path).release()  # free again: a lock still held would be busy


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions and SIGKILL")
def test_a_lock_file_that_cannot_be_written_is_locked_read_only_and_still_excludes(
    tmp_path: Path,
) -> None:
    # covers: B-FILE-2, R-STORE-1, E-2
    path = tmp_path / "x.lock"
    RunLock.acquire(path).release()
    path.chmod(0o400)
    tmp_path.chmod(0o500)  # chmod -R a-w: nothing here can be written or created
    command = [sys.executable, "-c", _HOLDER, str(path)]
    if os.geteuid() == 0:  # root writes anywhere: drop that capability in the child
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and setpriv(1) is missing")
        command = [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--", *command]
    holder = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline().strip()
        assert line == "locked", holder.communicate()
        with pytest.raises(BusyError):  # the read-only holder owns the lock all the same
            RunLock.acquire(path)
    finally:
        holder.kill()
        holder.communicate()
        tmp_path.chmod(0o700)
    assert path.read_bytes() == b""  # no owner's note could be written, nothing else changed
    RunLock.acquire(path).release()


def test_no_os_lock_refuses_to_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # covers: B-FILE-2
    def unsupported(fd: int, *, blocking: bool = True) -> bool:
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(filelock, "lock_descriptor", unsupported)
    with pytest.raises(DurableError, match="never runs a session unlocked"):
        RunLock.acquire(tmp_path / "x.lock")


def test_lock_file_replaced_while_locking_is_locked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: B-FILE-2
    path = tmp_path / "x.lock"
    real = filelock.lock_descriptor
    calls: list[int] = []

    def replace_then_lock(fd: int, *, blocking: bool = True) -> bool:
        calls.append(fd)
        if len(calls) == 1:  # another program swaps the file between our open and our lock
            path.unlink()
            path.write_bytes(b"")
        return real(fd, blocking=blocking)

    monkeypatch.setattr(filelock, "lock_descriptor", replace_then_lock)
    with RunLock.acquire(path) as lock:
        assert len(calls) == 2
        assert os.path.samestat(os.fstat(lock._fd), path.stat())  # type: ignore[arg-type]


def test_make_private_directory(tmp_path: Path) -> None:
    # covers: B-FILE-1, B-SQL-1
    created = make_private_directory(tmp_path / "a" / "b")
    assert created == str(tmp_path / "a" / "b")
    if os.name == "posix":
        assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
        assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o700
    assert make_private_directory(tmp_path / "a" / "b") == created


def test_waiting_lock_times_out_or_gets_the_lock(tmp_path: Path) -> None:
    # covers: B-SQL-1
    path = tmp_path / "init.lock"
    holder = RunLock.acquire(path)
    started = time.monotonic()
    with pytest.raises(AcquireTimeoutError):
        RunLock.acquire(path, wait=0.2)
    assert time.monotonic() - started >= 0.2
    threading.Timer(0.2, holder.release).start()
    with RunLock.acquire(path, wait=None) as lock:
        assert lock.held


# covers: B-FILE-1
def test_make_private_directory_made_by_many_at_once(tmp_path: Path) -> None:
    import threading

    errors: list[BaseException] = []
    for round_ in range(40):
        target = tmp_path / f"r{round_}" / "a" / "b" / "c"
        start = threading.Barrier(8)

        def make(target: Path = target, start: threading.Barrier = start) -> None:
            start.wait(10)
            try:
                make_private_directory(target)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=make) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert target.is_dir()
    assert errors == []  # one that lost the race to create a parent is not refused
