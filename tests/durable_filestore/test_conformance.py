"""FileStore runs the whole conformance kit, in-process and across real processes."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from durable_core.testing import StoreConformance
from durable_filestore import FileStore, run_key


class FileRawRecords:
    """``<key>.json`` read and written by hand, as an operator's editor would."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    def _path(self, run_id: str) -> Path:
        return self._directory / f"{run_key(run_id)}.json"

    def read(self, run_id: str) -> bytes | None:
        path = self._path(run_id)
        return path.read_bytes() if path.exists() else None

    def write(self, run_id: str, data: bytes, revision: int) -> None:
        self._path(run_id).write_bytes(data)


class TestFileStoreConformance(StoreConformance):
    @pytest.fixture
    def durable_store_factory(self, tmp_path: Path) -> functools.partial[FileStore]:
        return functools.partial(FileStore, str(tmp_path / "checkpoints"))

    @pytest.fixture
    def durable_raw_records(self, tmp_path: Path) -> FileRawRecords:
        return FileRawRecords(tmp_path / "checkpoints")

    @pytest.fixture
    def durable_other_store_factory(self, tmp_path: Path) -> functools.partial[FileStore]:
        return functools.partial(FileStore, str(tmp_path / "other-checkpoints"))
