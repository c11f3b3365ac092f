"""Durable's file store: one JSON record per run in a local directory (B-FILE-1…5).

Public API:

- :class:`FileStore` / :class:`FileSession`: the store and its exclusive sessions;
- :func:`run_key`: the SHA-256 hex of a run id that names its files.

:class:`RunLock`, :func:`acquire_run_lock` and :func:`make_private_directory` live in
:mod:`durable_core.store.locks` (shared with the SQLite store) and are re-exported here.

The store is registered as the backend ``file`` (option ``directory``).
"""

from __future__ import annotations

import typing

from durable_core._lazy import bind_lazily

if typing.TYPE_CHECKING:
    from durable_core.store.locks import RunLock, acquire_run_lock, make_private_directory, run_key
    from durable_filestore.store import FileSession, FileStore

# Each name is imported on first use, so that loading the plugin (every `durable` command
# does) does not import the store's or codec's dependencies.
_EXPORTS = {
    "FileSession": "durable_filestore.store",
    "FileStore": "durable_filestore.store",
    "RunLock": "durable_core.store.locks",
    "acquire_run_lock": "durable_core.store.locks",
    "make_private_directory": "durable_core.store.locks",
    "run_key": "durable_core.store.locks",
}

__all__ = [
    "FileSession",
    "FileStore",
    "RunLock",
    "acquire_run_lock",
    "make_private_directory",
    "run_key",
]

__getattr__, __dir__ = bind_lazily(__name__, _EXPORTS, __all__)
