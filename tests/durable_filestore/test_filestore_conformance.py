"""FileStore runs the whole conformance kit, in-process and across real processes."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from durable_core.testing import StoreConformance
from durable_filestore import FileStore


class TestFileStoreConformance(StoreConformance):
    @pytest.fixture
    def durable_store_factory(self, tmp_path: Path) -> functools.partial[FileStore]:
        return functools.partial(FileStore, str(tmp_path / "checkpoints"))
