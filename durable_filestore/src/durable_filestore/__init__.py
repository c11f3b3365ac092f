"""Durable's file store: one JSON record per run in a local directory (B-FILE-1…5).

Public API:

- :class:`FileStore` / :class:`FileSession`: the store and its exclusive sessions;
- :class:`RunLock`, :func:`acquire_run_lock`: the per-run OS file lock (also used by the SQLite
  store);
- :func:`run_key`: the SHA-256 hex of a run id that names its files;
- :func:`make_private_directory`: create a directory and its parents with mode 0700.

The store is registered as the backend ``file`` (option ``directory``).
"""

from durable_filestore.locks import RunLock, acquire_run_lock, make_private_directory, run_key
from durable_filestore.store import FileSession, FileStore

__all__ = [
    "FileSession",
    "FileStore",
    "RunLock",
    "acquire_run_lock",
    "make_private_directory",
    "run_key",
]
