"""Drive a store from another real process: acquire, load, save, close, and SIGKILL it."""

from __future__ import annotations

import base64
import json
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import attrs

from durable_core.records import RunRecord
from durable_core.records.jsonio import record_from_json, record_to_json

__all__ = ["ChildReply", "StoreProcess"]

_CHILD_CODE = "from durable_core.testing._child import main; main()"


@attrs.frozen
class ChildReply:
    """The outcome of one operation in a :class:`StoreProcess`.

    Attributes:
        ok: the operation returned normally.
        elapsed: seconds the operation took inside the child (no IPC time).
        error: the exception class name, when not ``ok``.
        errors: the names of the exception's classes (its MRO), when not ``ok``.
        message: the exception message, when not ``ok``.
        record_json: the loaded record's JSON bytes (``load`` only).
    """

    ok: bool
    elapsed: float
    error: str = ""
    errors: tuple[str, ...] = ()
    message: str = ""
    record_json: bytes | None = None

    def raised(self, error_type: type[BaseException]) -> bool:
        """True when the operation raised ``error_type`` or a subclass of it."""
        return not self.ok and error_type.__name__ in self.errors

    @property
    def record(self) -> RunRecord:
        """The loaded record (``load`` only)."""
        if self.record_json is None:
            raise AssertionError(f"no record in this reply: {self}")
        return record_from_json(self.record_json)

    def expect_ok(self) -> ChildReply:
        """Return self, or fail the test with the child's error."""
        if not self.ok:
            raise AssertionError(f"the child process raised {self.error}: {self.message}")
        return self


class StoreProcess:
    """A real child process (same interpreter) that creates a store with a pickled factory.

    Each request runs in the child and returns a :class:`ChildReply`. The child keeps one store
    (created on the first ``acquire``) and its sessions by run id. Use as a context manager, or
    call :meth:`kill`/:meth:`exit`; a child still running at the end is killed.

    Args:
        factory: a picklable zero-argument callable returning a Store (a module-level
            function, a class, or ``functools.partial`` of one).
        timeout: seconds to wait for each reply before failing.

    Raises:
        pickle.PicklingError / TypeError / AttributeError: ``factory`` cannot be pickled.
    """

    def __init__(self, factory: Callable[[], Any], *, timeout: float = 60.0) -> None:
        payload = base64.b64encode(pickle.dumps(factory)).decode("ascii")
        self.timeout = timeout
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD_CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self._replies: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        sys_path = [p for p in sys.path if isinstance(p, str) and p]
        self._send({"sys_path": [os.path.abspath(p) for p in sys_path], "factory": payload})
        hello = self._receive()
        self.pid: int = hello["pid"]

    # -- operations ------------------------------------------------------------------------

    def acquire(self, run_id: str) -> ChildReply:
        """Acquire ``run_id`` in the child (creating the child's store first if needed)."""
        return self._request({"op": "acquire", "run_id": run_id})

    def load(self, run_id: str) -> ChildReply:
        """Load the record of the child's session of ``run_id``."""
        return self._request({"op": "load", "run_id": run_id})

    def save(
        self, run_id: str, record: RunRecord, expected_revision: int, delta: bytes | None = None
    ) -> ChildReply:
        """Save ``record`` through the child's session of ``run_id`` (with ``delta``, as an
        ``EncodedRecord`` holding its bytes and that delta)."""
        data = base64.b64encode(record_to_json(record)).decode("ascii")
        message: dict[str, Any] = {
            "op": "save",
            "run_id": run_id,
            "record": data,
            "expected_revision": expected_revision,
        }
        if delta is not None:
            message["delta"] = base64.b64encode(delta).decode("ascii")
        return self._request(message)

    def start_chain(
        self,
        run_id: str,
        records: list[RunRecord],
        deltas: list[bytes | None],
        expected_revision: int,
        progress: str,
    ) -> None:
        """Start saving ``records`` one after another in the child, without waiting.

        After each confirmed save the child appends the new revision (a line) to the file
        ``progress``. Meant to be interrupted with :meth:`kill`; collect the reply of a chain
        that ran to its end with :meth:`finish`.
        """

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode("ascii")

        self._send(
            {
                "op": "chain",
                "run_id": run_id,
                "records": [b64(record_to_json(record)) for record in records],
                "deltas": [None if delta is None else b64(delta) for delta in deltas],
                "expected_revision": expected_revision,
                "progress": progress,
            }
        )

    def finish(self) -> ChildReply:
        """The reply of the operation started without waiting (see :meth:`start_chain`)."""
        return self._reply(self._receive())

    def close(self, run_id: str) -> ChildReply:
        """Close the child's session of ``run_id``."""
        return self._request({"op": "close", "run_id": run_id})

    def exit(self) -> int:
        """Close everything in the child, let it exit, and return its exit code."""
        if self._proc.poll() is None:
            self._request({"op": "exit"}).expect_ok()
        return self._proc.wait(self.timeout)

    def kill(self) -> int:
        """Kill the child with SIGKILL (TerminateProcess on Windows) and wait for it."""
        if self._proc.poll() is None:
            self._proc.kill()
        return self._proc.wait(self.timeout)

    @property
    def alive(self) -> bool:
        """True while the child process runs."""
        return self._proc.poll() is None

    @property
    def stderr(self) -> str:
        """What the child wrote to stderr so far."""
        return "".join(self._stderr)

    def __enter__(self) -> StoreProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()
        for stream in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()

    # -- plumbing --------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._replies.put(line)
        self._replies.put(None)

    def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self._stderr.append(line)

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(message) + "\n")
        self._proc.stdin.flush()

    def _receive(self) -> dict[str, Any]:
        try:
            line = self._replies.get(timeout=self.timeout)
        except queue.Empty:
            self.kill()
            raise AssertionError(
                f"the store child process did not answer within {self.timeout} s; "
                f"stderr:\n{self.stderr}"
            ) from None
        if line is None:
            self._proc.wait(self.timeout)
            raise AssertionError(
                f"the store child process exited (code {self._proc.returncode}); "
                f"stderr:\n{self.stderr}"
            )
        return json.loads(line)

    def _request(self, message: dict[str, Any]) -> ChildReply:
        self._send(message)
        return self._reply(self._receive())

    @staticmethod
    def _reply(reply: dict[str, Any]) -> ChildReply:
        record = reply.get("record")
        return ChildReply(
            ok=reply["ok"],
            elapsed=reply["elapsed"],
            error=reply.get("error", ""),
            errors=tuple(reply.get("errors", ())),
            message=reply.get("message", ""),
            record_json=base64.b64decode(record) if record is not None else None,
        )
