"""Durable's file store: one JSON record per run in a local directory (B-FILE-1…5).

Public API:

- :class:`FileStore` / :class:`FileSession`: the store and its exclusive sessions;
- :func:`run_key`: the SHA-256 hex of a run id that names its files.

:class:`RunLock`, :func:`acquire_run_lock` and :func:`make_private_directory` live in
:mod:`durable_core.store.locks` (shared with the SQLite store) and are re-exported here.

The store is registered as the backend ``file`` (option ``directory``).
"""

from durable_core.store.locks import RunLock, acquire_run_lock, make_private_directory, run_key
from durable_filestore.store import FileSession, FileStore

__all__ = [
    "FileSession",
    "FileStore",
    "RunLock",
    "acquire_run_lock",
    "make_private_directory",
    "run_key",
]
