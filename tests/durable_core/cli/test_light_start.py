"""A command loads every installed plugin, but imports a store's or a codec's dependencies
(psycopg, numpy, distributed) only when it uses that store or codec."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
from durable_core.cli import main
sys.argv = ["durable", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
heavy = ("psycopg", "numpy", "distributed", "durable_postgresstore.store")
print(json.dumps({name: name in sys.modules for name in heavy}), file=sys.stderr)
"""


def imported(*args: str) -> dict[str, bool]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120
    )
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "command",
    [
        ["list", "--store", "file://{tmp}/runs"],
        ["inspect", "--store", "file://{tmp}/runs", "nothing-here"],
        ["log", "nothing-here"],
    ],
    ids=["list", "inspect", "log"],
)
def test_a_command_on_a_file_store_imports_neither_psycopg_nor_numpy(command, tmp_path):
    (tmp_path / "runs").mkdir()
    loaded = imported(*(part.format(tmp=tmp_path) for part in command))
    assert loaded == dict.fromkeys(loaded, False), loaded


def test_the_postgres_plugin_is_imported_once_its_store_is_used(tmp_path):
    # an unreachable server: the store's module (and psycopg) is imported to try it
    loaded = imported("list", "--store", "postgresql://u@127.0.0.1:1/x")
    assert loaded["psycopg"] and loaded["durable_postgresstore.store"]
    assert not loaded["numpy"]
