"""FileStore's own rules (B-FILE-1…5): paths, names, modes, temp files, crashes, bad records."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable_core import (
    BusyError,
    ConfigError,
    CorruptRecordError,
    DurableError,
    EncodedRecord,
    NotFoundError,
    RunRecord,
    make_plugin_manager,
    record_to_json,
)
from durable_core.testing import StoreProcess, record_delta, sample_record
from durable_filestore import FileSession, FileStore, run_key
from durable_filestore.store import FOLD_RATIO

POSIX = os.name == "posix"
needs_posix = pytest.mark.skipif(not POSIX, reason="POSIX permissions and signals")


def sha(run_id: str) -> str:
    return hashlib.sha256(run_id.encode("utf-8")).hexdigest()


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "checkpoints"


@pytest.fixture
def store(directory: Path) -> Iterator[FileStore]:
    with FileStore(directory) as opened:
        yield opened


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- construction (B-FILE-1) -----------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", b"/tmp/x", None, 3])
def test_empty_or_non_path_directory_is_refused(bad: object) -> None:
    # covers: B-FILE-1
    with pytest.raises(ConfigError):
        FileStore(bad)  # type: ignore[arg-type]


@needs_posix
def test_directory_and_parents_are_created_0700(tmp_path: Path) -> None:
    # covers: B-FILE-1
    directory = tmp_path / "a" / "b" / "checkpoints"
    FileStore(directory)
    for path in (tmp_path / "a", tmp_path / "a" / "b", directory):
        assert path.is_dir()
        assert mode(path) == 0o700, (path, oct(mode(path)))


@needs_posix
def test_existing_directory_permissions_are_untouched(tmp_path: Path) -> None:
    # covers: B-FILE-1
    directory = tmp_path / "shared"
    directory.mkdir()
    directory.chmod(0o755)
    with FileStore(directory).acquire("run") as session:
        session.save(sample_record("run", 1), 0)
    assert mode(directory) == 0o755


def test_an_existing_file_is_not_a_directory(tmp_path: Path) -> None:
    # covers: B-FILE-1
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError):
        FileStore(tmp_path / "file")


def test_relative_path_is_made_absolute_at_construction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: B-FILE-1
    monkeypatch.chdir(tmp_path)
    store = FileStore("checkpoints")
    assert store.directory == str(tmp_path / "checkpoints")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with store.acquire("run") as session:
        session.save(sample_record("run", 1), 0)
    assert (tmp_path / "checkpoints" / f"{sha('run')}.json").is_file()
    assert list(elsewhere.iterdir()) == []


def test_an_empty_directory_is_a_store_with_no_records(directory: Path) -> None:
    # covers: B-FILE-1, R-STORE-2
    directory.mkdir()
    store = FileStore(directory)
    assert store.list_runs() == []
    with store.acquire("run") as session, pytest.raises(NotFoundError):
        session.load()


# -- names and modes (B-FILE-2) --------------------------------------------------------------


@needs_posix
def test_files_are_named_by_sha256_and_created_0600(store: FileStore, directory: Path) -> None:
    # covers: B-FILE-2, B-FILE-1
    run_id = "../../etc/passwd ü 🚀"
    with store.acquire(run_id) as session:
        session.save(sample_record(run_id, 1), 0)
        session.save(sample_record(run_id, 2), 1)
    key = sha(run_id)
    assert key == run_key(run_id)
    assert sorted(p.name for p in directory.iterdir()) == [f"{key}.json", f"{key}.lock"]
    assert mode(directory / f"{key}.json") == 0o600
    assert mode(directory / f"{key}.lock") == 0o600
    assert store.record_path(run_id) == str(directory / f"{key}.json")
    assert store.lock_path(run_id) == str(directory / f"{key}.lock")
    assert (directory / f"{key}.json").read_bytes() == record_to_json(sample_record(run_id, 2))


def test_lock_file_stays_after_close(store: FileStore, directory: Path) -> None:
    # covers: B-FILE-2
    store.acquire("run").close()
    assert (directory / f"{sha('run')}.lock").is_file()
    store.acquire("run").close()  # and locking it again works


def test_deleting_the_lock_file_is_not_needed_to_reacquire(
    store: FileStore, directory: Path
) -> None:
    # covers: B-FILE-2, E-1
    session = store.acquire("run")
    with pytest.raises(BusyError) as busy:
        FileStore(directory).acquire("run")
    assert "never delete the lock file" in str(busy.value)
    session.close()
    FileStore(directory).acquire("run").close()


# -- stale temp files (B-FILE-4) -------------------------------------------------------------


def test_acquire_removes_exactly_the_runs_stale_temp_files(
    store: FileStore, directory: Path
) -> None:
    # covers: B-FILE-4
    key, other = sha("run"), sha("other")
    with store.acquire("run") as session:
        session.save(sample_record("run", 1), 0)
    removed = [f"{key}-0.tmp", f"{key}-7.tmp", f"{key}-123456.tmp", f"{key}-4294967295.tmp"]
    kept_files = [
        f"{key}-4294967296.tmp",  # beyond uint32
        f"{key}-99999999999.tmp",
        f"{key}-00.tmp",  # leading zeros
        f"{key}-0123.tmp",
        f"{key}--1.tmp",
        f"{key}-+1.tmp",
        f"{key}-.tmp",
        f"{key}-1.TMP",
        f"{key}-1.tmp.bak",
        f"{key}-1.tmpx",
        f"{key}-1 .tmp",
        f"{key}-١.tmp",  # a non-ASCII digit
        f"{key.upper()}-1.tmp",
        f"x{key}-1.tmp",
        f"{key}1.tmp",
        f"{key}.tmp",
        f"{other}-5.tmp",  # another run's temp file
        f"{key}.json.tmp",
    ]
    for name in removed + kept_files:
        (directory / name).write_bytes(b"partial")
    (directory / f"{key}-8.tmp").mkdir()  # not a regular file
    (directory / "sub").mkdir()
    (directory / "sub" / f"{key}-9.tmp").write_bytes(b"not recursive")
    target = directory / "target"
    target.write_bytes(b"target")
    if POSIX:
        (directory / f"{key}-10.tmp").symlink_to(target)
    before = {p.name for p in directory.iterdir()}

    with store.acquire("run") as session:
        assert session.load() == sample_record("run", 1)

    after = {p.name for p in directory.iterdir()}
    assert before - after == set(removed)
    assert (directory / "sub" / f"{key}-9.tmp").exists()
    assert target.read_bytes() == b"target"
    assert (directory / f"{key}.lock").exists()


def test_another_runs_acquire_keeps_this_runs_temp_files(store: FileStore, directory: Path) -> None:
    # covers: B-FILE-4
    (directory / f"{sha('run')}-5.tmp").write_bytes(b"x")
    store.acquire("other").close()
    assert (directory / f"{sha('run')}-5.tmp").exists()


def test_cleanup_failure_raises_and_releases_the_lock(
    store: FileStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: B-FILE-4
    (directory / f"{sha('run')}-5.tmp").write_bytes(b"x")

    def refuse(path: object, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "unlink", refuse)
    with pytest.raises(DurableError, match="stale temp files"):
        store.acquire("run")
    monkeypatch.undo()
    FileStore(directory).acquire("run").close()  # the lock was released (else: busy)
    assert not (directory / f"{sha('run')}-5.tmp").exists()


def test_directory_read_failure_raises_and_releases_the_lock(
    store: FileStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: B-FILE-4
    def refuse(path: object = None) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "scandir", refuse)
    with pytest.raises(DurableError, match="stale temp files"):
        store.acquire("run")
    monkeypatch.undo()
    FileStore(directory).acquire("run").close()


# -- crashes at every write boundary (B-FILE-3, B-FILE-4) ------------------------------------

_CRASHING_SAVE = textwrap.dedent(
    """
    import os, signal, sys
    from durable_core.testing import sample_record
    from durable_filestore import FileStore

    directory, boundary = sys.argv[1], sys.argv[2]
    session = FileStore(directory).acquire("run")
    session.save(sample_record("run", 1), 0)

    def die(*args):
        os.kill(os.getpid(), signal.SIGKILL)

    if boundary == "mid-write":
        real_write = os.write
        def write(fd, data):
            real_write(fd, bytes(data[: len(data) // 2]))
            die()
        os.write = write
    elif boundary == "before-sync":
        os.fsync = die
    elif boundary == "before-rename":
        os.replace = die
    elif boundary == "after-rename":
        real_fsync, calls = os.fsync, []
        def fsync(fd):
            calls.append(fd)
            if len(calls) == 2:  # the directory's sync, after the rename
                die()
            real_fsync(fd)
        os.fsync = fsync
    session.save(sample_record("run", 2, marker="new"), 1)
    print("the save returned")
    """
)


@needs_posix
@pytest.mark.parametrize(
    ("boundary", "survivor"),
    [("mid-write", 1), ("before-sync", 1), ("before-rename", 1), ("after-rename", 2)],
)
def test_crash_during_save_keeps_an_authoritative_record(
    directory: Path, boundary: str, survivor: int
) -> None:
    # covers: B-FILE-3, B-FILE-4, R-RT-2
    done = subprocess.run(
        [sys.executable, "-c", _CRASHING_SAVE, str(directory), boundary],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    key = sha("run")
    temps = sorted(p.name for p in directory.glob(f"{key}-*.tmp"))
    if survivor == 1:
        assert len(temps) == 1, temps  # the unfinished new record
    else:
        assert temps == []
    expected = sample_record("run", survivor, marker="new" if survivor == 2 else "")
    assert (directory / f"{key}.json").read_bytes() == record_to_json(expected)

    # the dead owner's lock is gone (else: busy)
    with FileStore(directory).acquire("run") as session:
        assert list(directory.glob(f"{key}-*.tmp")) == []
        assert session.load() == expected
        session.save(sample_record("run", survivor + 1), survivor)
    with FileStore(directory).acquire("run") as session:
        assert session.load().revision == survivor + 1


@needs_posix
def test_killed_owner_process_lets_a_new_process_acquire_at_once(directory: Path) -> None:
    # covers: B-FILE-2, R-STORE-1
    import functools

    factory = functools.partial(FileStore, str(directory))
    with StoreProcess(factory) as owner, StoreProcess(factory) as successor:
        owner.acquire("run").expect_ok()
        owner.save("run", sample_record("run", 1), 0).expect_ok()
        # The owner holds the run for the whole call: a successor that waited for it would
        # not reply (the StoreProcess reply timeout fails the test).
        busy = successor.acquire("run")
        assert busy.raised(BusyError), busy
        owner.kill()
        successor.acquire("run").expect_ok()  # the killed owner's lock is gone (else: busy)
        assert successor.load("run").expect_ok().record == sample_record("run", 1)


# -- failures around the rename (B-FILE-3, R-RT-2) -------------------------------------------


def test_rename_failure_leaves_the_old_record(
    store: FileStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: B-FILE-3
    with store.acquire("run") as session:
        session.save(sample_record("run", 1), 0)

        def refuse(src: str, dst: str) -> None:
            raise OSError(28, "No space left on device", dst)

        monkeypatch.setattr(os, "replace", refuse)
        with pytest.raises(DurableError, match="stored record is unchanged"):
            session.save(sample_record("run", 2), 1)
        monkeypatch.undo()
        assert list(directory.glob("*.tmp")) == []
        assert session.load() == sample_record("run", 1)
        session.save(sample_record("run", 2), 1)


@needs_posix
def test_directory_sync_failure_is_an_uncertain_save(
    store: FileStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: B-FILE-3, R-RT-2
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    with store.acquire("run") as session:
        session.save(sample_record("run", 1), 0)
        monkeypatch.setattr(os, "fsync", fsync)
        with pytest.raises(DurableError, match="uncertain") as raised:
            session.save(sample_record("run", 2), 1)
        assert isinstance(raised.value.__cause__, OSError)
        monkeypatch.undo()
        # the rename happened: loading again tells the truth, and the stale revision conflicts
        assert session.load().revision == 2


# -- bad records on disk (R-STORE-2, B-FILE-5, E-1) ------------------------------------------


_CORRUPT = {
    "garbage": b"\x00\x01 not json",
    "empty": b"",
    "truncated": record_to_json(sample_record("run", 1))[:-10],
    "invalid utf-8": record_to_json(sample_record("run", 1)).replace(b"v1", b"v\xff"),
    "wrong shape": b'{"RunID": "run", "Revision": "one"}',
    "unknown field": record_to_json(sample_record("run", 1))[:-1] + b',"Extra":1}',
    "another run": record_to_json(sample_record("other", 1)),
    "revision zero": record_to_json(sample_record("run", 1)).replace(
        b'"Revision":1,', b'"Revision":0,'
    ),
    "lone surrogate escape": record_to_json(sample_record("run", 1)).replace(
        b'"v1"', b'"v1\\ud800"'
    ),
}


@pytest.mark.parametrize("case", list(_CORRUPT))
def test_corrupt_record_file_is_a_typed_error_and_untouched(
    store: FileStore, directory: Path, case: str
) -> None:
    # covers: R-STORE-2, B-FILE-5, E-1
    path = directory / f"{sha('run')}.json"
    path.write_bytes(_CORRUPT[case])
    with store.acquire("run") as session:
        with pytest.raises(CorruptRecordError) as raised:
            session.load()
        assert str(path) in str(raised.value)
        with pytest.raises(CorruptRecordError):
            session.save(sample_record("run", 1), 0)  # never "repaired" by a new record
        with pytest.raises(CorruptRecordError):
            session.save(sample_record("run", 2), 1)
    assert path.read_bytes() == _CORRUPT[case]
    (listed,) = store.list_runs()
    assert listed.error is not None and "CorruptRecordError" in listed.error
    assert listed.location == str(path)


def test_record_path_that_is_a_directory_is_not_not_found(
    store: FileStore, directory: Path
) -> None:
    # covers: R-STORE-2
    (directory / f"{sha('run')}.json").mkdir()
    with store.acquire("run") as session:
        with pytest.raises(DurableError) as raised:
            session.load()
        assert not isinstance(raised.value, NotFoundError)


def _within(seconds: float, call, fifo: Path | None = None):  # type: ignore[no-untyped-def]
    """Run ``call`` in a daemon thread; return ("raised", exc) / ("returned", value), or
    ("blocked", None) when it did not finish in time (then a reader blocked on ``fifo`` is
    let go, so that the test fails instead of hanging)."""
    outcome: list[tuple[str, object]] = []

    def run() -> None:
        try:
            outcome.append(("returned", call()))
        except BaseException as exc:
            outcome.append(("raised", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if outcome:
        return outcome[0]
    if fifo is not None:
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(seconds)
    return ("blocked", None)


def _non_regular(kind: str, path: Path) -> None:
    if kind == "dangling symlink":
        path.symlink_to(path.parent / "nowhere.json")
    elif kind == "symlink to a record":
        target = path.parent / "elsewhere.json"
        target.write_bytes(record_to_json(sample_record("run", 1)))
        path.symlink_to(target)
    else:
        os.mkfifo(path)


@needs_posix
@pytest.mark.parametrize("kind", ["dangling symlink", "symlink to a record", "fifo"])
def test_a_record_path_that_is_not_a_regular_file_is_refused_at_once(
    store: FileStore, directory: Path, kind: str
) -> None:
    # covers: R-STORE-2, E-1
    path = directory / f"{sha('run')}.json"
    _non_regular(kind, path)
    before = os.lstat(path)
    with store.acquire("run") as session:
        fifo = path if kind == "fifo" else None
        state, error = _within(5, session.load, fifo)
        assert state == "raised", state
        assert isinstance(error, DurableError) and not isinstance(error, NotFoundError)
        assert "not a regular file" in str(error)
        for expected in (0, 1):  # never replaced, whatever the caller expects
            state, error = _within(
                5, lambda e=expected: session.save(sample_record("run", e + 1), e), fifo
            )
            assert state == "raised", state
            assert isinstance(error, DurableError), error
            assert "not a regular file" in str(error)
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    state, summaries = _within(5, store.list_runs, fifo)
    assert state == "returned", state
    (listed,) = summaries  # type: ignore[misc]
    assert listed.error is not None and "not a regular file" in listed.error


@needs_posix
@pytest.mark.parametrize("command", ["list", "inspect"])
def test_a_fifo_record_does_not_block_the_cli(directory: Path, command: str) -> None:
    # covers: E-1
    FileStore(directory).close()
    os.mkfifo(directory / f"{sha('run')}.json")
    args = ["list"] if command == "list" else ["inspect", "run"]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from durable_core.cli import main; sys.exit(main())",
            *args,
            "--store",
            f"file://{directory}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "not a regular file" in done.stdout + done.stderr, done


def test_removed_directory_is_not_not_found(store: FileStore, directory: Path) -> None:
    # covers: R-STORE-2
    with store.acquire("run") as session:
        session.save(sample_record("run", 1), 0)
        shutil.rmtree(directory)
        with pytest.raises(DurableError, match="no longer exists") as raised:
            session.load()
        assert not isinstance(raised.value, NotFoundError)


_UNREADABLE_LOAD = textwrap.dedent(
    """
    import sys
    from durable_filestore import FileStore
    try:
        FileStore(sys.argv[1]).acquire("run").load()
    except BaseException as exc:
        print(type(exc).__name__)
    else:
        print("loaded")
    """
)


@needs_posix
def test_unreadable_record_is_a_permission_error(tmp_path: Path) -> None:
    # covers: R-STORE-2, E-1
    store = FileStore(tmp_path / "cp")
    with store.acquire("run") as session:
        session.save(sample_record("run", 1), 0)
    record_path = Path(store.record_path("run"))
    record_path.chmod(0)
    if os.geteuid() != 0:
        with store.acquire("run") as session, pytest.raises(PermissionError):
            session.load()
    else:
        # root reads any file: load in a child without the capabilities that allow it
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and setpriv(1) is missing to drop CAP_DAC_OVERRIDE")
        done = subprocess.run(
            [
                setpriv,
                "--bounding-set",
                "-dac_override,-dac_read_search",
                "--",
                *(sys.executable, "-c", _UNREADABLE_LOAD, store.directory),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0 and "setpriv" in done.stderr:
            pytest.skip(f"cannot drop capabilities here: {done.stderr.strip()}")
        assert done.stdout.strip() == "PermissionError", done.stderr
    record_path.chmod(0o600)
    assert record_path.read_bytes() == record_to_json(sample_record("run", 1))


# -- listing (RunLister) ---------------------------------------------------------------------


def test_list_runs_reads_run_ids_from_records_and_reports_bad_files(
    store: FileStore, directory: Path
) -> None:
    # covers: R-STORE-2, B-FILE-2
    for run_id in ("b", "a"):
        with store.acquire(run_id) as session:
            session.save(sample_record(run_id, 1), 0)
    with store.acquire("held"):  # lock and temp files are not runs
        (directory / f"{sha('x')}-3.tmp").write_bytes(b"partial")
        copied = directory / f"{sha('copy')}.json"
        copied.write_bytes(record_to_json(sample_record("a", 1)))
        (directory / f"{sha('bad')}.json").write_bytes(b"{")
        (directory / "notes.json").write_bytes(b"{}")  # not a record file name
        summaries = store.list_runs()
    assert [(s.run_id, s.revision, s.ok) for s in summaries] == [
        ("a", 1, True),
        ("b", 1, True),
        ("", 0, False),
        ("", 0, False),
    ]
    bad = {s.location: s.error for s in summaries if not s.ok}
    assert set(bad) == {str(copied), str(directory / f"{sha('bad')}.json")}
    assert "copied or renamed" in (bad[str(copied)] or "")


# -- registration ----------------------------------------------------------------------------


def test_registered_as_file_backend(directory: Path) -> None:
    # covers: B-FILE-1
    factory = make_plugin_manager().store_factory("file")
    store = factory(directory=str(directory))
    assert isinstance(store, FileStore)
    assert store.directory == str(directory)
    with pytest.raises(ConfigError, match="directory"):
        factory()
    with pytest.raises(ConfigError, match="path"):
        factory(directory=str(directory), path="x")


# -- saves in proportion to the change: the journal --------------------------------------------


def _delta_saves(count: int, start: int = 1) -> list[tuple[RunRecord, EncodedRecord]]:
    records = [
        sample_record("run", n, marker=f"-{n}-" + "d" * 120) for n in range(start, start + count)
    ]
    saves = [(records[0], EncodedRecord(record_to_json(records[0])))]
    for previous, record in itertools.pairwise(records):
        saves.append(
            (record, EncodedRecord(record_to_json(record), record_delta(previous, record)))
        )
    return saves


def _saved_then_abandoned(store: FileStore, count: int) -> list[tuple[RunRecord, EncodedRecord]]:
    """Save ``count`` revisions with deltas, then the owner dies: its lock goes, nothing is
    folded (as after SIGKILL)."""
    saves = _delta_saves(count)
    session: FileSession = store.acquire("run")
    for record, encoded in saves:
        session.save(record, record.revision - 1, encoded)
    session._wrote = False  # closing folds nothing now, as a killed owner folds nothing
    session.close()
    return saves


def test_delta_saves_append_to_the_journal_and_fold_when_it_outgrows_the_record(
    store: FileStore, directory: Path
) -> None:
    # covers: B-FILE-3, R-STORE-3
    journal = directory / f"{sha('run')}.journal"
    record_file = directory / f"{sha('run')}.json"
    saves = _delta_saves(120)
    seen = []
    with store.acquire("run") as session:
        for record, encoded in saves:
            session.save(record, record.revision - 1, encoded)
            size = journal.stat().st_size if journal.exists() else 0
            assert size <= FOLD_RATIO * record_file.stat().st_size
            seen.append(size)
        assert session.load() == saves[-1][0]
    assert max(seen) > 0 and seen.count(0) > 2  # appended, and folded from time to time
    assert not journal.exists()  # at rest: one complete record, as `cat` shows it
    assert record_file.read_bytes() == record_to_json(saves[-1][0])


def test_a_torn_journal_tail_is_a_save_never_confirmed(store: FileStore, directory: Path) -> None:
    # covers: B-FILE-3, R-STORE-2, R-RT-2
    journal = directory / f"{sha('run')}.journal"
    saves = _saved_then_abandoned(store, 5)
    whole = journal.read_bytes()
    next_delta = record_delta(saves[-1][0], sample_record("run", 6))
    entry = len(next_delta).to_bytes(4, "big") + zlib.crc32(next_delta).to_bytes(4, "big")
    for torn in (entry[:5], entry + next_delta[:10], entry[:4] + b"\0\0\0\0" + next_delta):
        journal.write_bytes(whole + torn)
        with store.acquire("run") as again:
            assert again.load() == saves[-1][0]  # the torn save is not there, nothing is lost
    with store.acquire("run") as again:
        again.load()
        more = _delta_saves(3, start=5)
        for record, encoded in more[1:]:  # the chain goes on past the torn tail
            again.save(record, record.revision - 1, encoded)
        assert again.load() == more[-1][0]
    assert not journal.exists()
    assert (directory / f"{sha('run')}.json").read_bytes() == record_to_json(more[-1][0])


def test_a_fold_that_crashed_before_removing_the_journal_is_read_right(
    store: FileStore, directory: Path
) -> None:
    # covers: B-FILE-3, R-STORE-2
    journal = directory / f"{sha('run')}.journal"
    saves = _saved_then_abandoned(store, 5)
    # the fold wrote the complete record of revision 5, then the process died
    (directory / f"{sha('run')}.json").write_bytes(record_to_json(saves[-1][0]))
    assert journal.exists()
    with store.acquire("run") as again:
        assert again.load() == saves[-1][0]
        after = sample_record("run", 6, marker="after")
        again.save(
            after, 5, EncodedRecord(record_to_json(after), record_delta(saves[-1][0], after))
        )
        assert again.load() == after
    assert not journal.exists()


def test_a_damaged_journal_is_corrupt_and_kept(store: FileStore, directory: Path) -> None:
    # covers: R-STORE-2, E-1
    journal = directory / f"{sha('run')}.journal"
    _saved_then_abandoned(store, 5)
    data = bytearray(journal.read_bytes())
    data[12] ^= 0xFF  # inside the first entry; entries follow it
    journal.write_bytes(bytes(data))
    with store.acquire("run") as again:
        with pytest.raises(CorruptRecordError, match="checksum"):
            again.load()
        with pytest.raises(CorruptRecordError):
            again.save(sample_record("run", 6), 5)
    assert journal.read_bytes() == bytes(data)
    (listed,) = store.list_runs()
    assert listed.error is not None and "checksum" in listed.error


def test_a_journal_without_its_record_is_corrupt_and_never_replaced(
    store: FileStore, directory: Path
) -> None:
    # covers: R-STORE-2, R-RT-3, E-1
    journal = directory / f"{sha('run')}.journal"
    _saved_then_abandoned(store, 5)
    (directory / f"{sha('run')}.json").unlink()  # the record removed by hand: its saves remain
    kept = journal.read_bytes()
    with store.acquire("run") as again:
        with pytest.raises(CorruptRecordError, match=r"record file .* is missing"):
            again.load()
        # a new run under the same id is refused: the saved deltas are never removed
        with pytest.raises(CorruptRecordError, match="is missing"):
            again.save(sample_record("run", 1), 0)
    assert journal.read_bytes() == kept
    assert not (directory / f"{sha('run')}.json").exists()
    with pytest.raises(CorruptRecordError, match="is missing"):
        store.peek("run")
    (listed,) = store.list_runs()
    assert listed.location == str(journal)
    assert listed.error is not None and "is missing" in listed.error
    # deleting the run is what removes it
    with store.acquire("run") as again:
        again.delete()
    assert not journal.exists()
    with store.acquire("run") as again, pytest.raises(NotFoundError):
        again.load()


def test_a_key_written_twice_in_the_record_is_corrupt_while_its_journal_waits(
    store: FileStore, directory: Path
) -> None:
    # covers: R-REC-4, R-STORE-2, E-1
    journal = directory / f"{sha('run')}.journal"
    record_file = directory / f"{sha('run')}.json"
    _saved_then_abandoned(store, 5)
    assert journal.exists()
    data = record_file.read_bytes()
    # the same key twice, with the same value: a plain parse would keep one and fold the
    # journal over it as if the record were sound
    start = data.index(b'"RootScope":')
    pair = data[start : data.index(b",", start) + 1]
    doubled = data.replace(pair, pair + pair, 1)
    assert doubled.count(b'"RootScope":') == 2
    record_file.write_bytes(doubled)
    journal_bytes = journal.read_bytes()
    with store.acquire("run") as again, pytest.raises(CorruptRecordError):
        again.load()
    assert record_file.read_bytes() == doubled and journal.read_bytes() == journal_bytes
