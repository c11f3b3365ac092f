"""Fixtures of the operator commands' tests: one small graph, run through the ``durable``
command against a real file, SQLite or PostgreSQL store.

``ops`` writes the graph's module and a config next to it in a temporary folder. The graph
(``double`` → ``price`` → ``total``) records every body that runs in ``calls.txt``; ``total``
fails while the file ``broken`` exists (no Retry: a failure is for good); ``double`` waits
while the file ``hold`` exists (a run that is running, for as long as a test needs). ``price``
holds a value of the module's own class ``Money``, whose codec the module registers.
"""

from __future__ import annotations

import itertools
import json
import pathlib
import sys
import textwrap
from typing import Any

import attrs
import pytest
from click.testing import CliRunner, Result

from durable_core.cli import cli
from tests.durable_core.cli.stores_support import postgres_url

_counter = itertools.count()

GRAPH = """
import pathlib
import time

import attrs

from durable_core import hookimpl
from durable_core.graph import Graph, Key


@attrs.frozen
class Money:
    cents: int


N = Key("n", int)
CALLS = Key("calls", str)
BROKEN = Key("broken", str)
TWICE = Key("twice", int)
PRICE = Key("price", Money)
TOTAL = Key("total", int)
NOTE = Key("note", str)

graph = Graph("ops", inputs=[N, CALLS, BROKEN])


def called(rc, name):
    with open(rc.get(CALLS), "a") as f:
        f.write(name + "\\n")


@graph.node("double", requires=[N, CALLS], provides=[TWICE])
def double(rc):
    called(rc, "double")
    hold = pathlib.Path(rc.get(CALLS)).with_name("hold")  # a test holds the run here
    deadline = time.monotonic() + 60
    canceled = False
    while hold.exists() and time.monotonic() < deadline:
        if rc.canceled and not canceled:
            called(rc, "double-canceled")  # a test waits for this before it lets go
            canceled = True
        time.sleep(0.02)
    rc.set(TWICE, rc.get(N) * 2)


@graph.node("price", requires=[TWICE, CALLS], provides=[PRICE, NOTE])
def price(rc):
    called(rc, "price")
    rc.set(PRICE, Money(rc.get(TWICE) * 100))
    rc.set(NOTE, "priced")


@graph.node("total", requires=[PRICE, BROKEN, CALLS], provides=[TOTAL])
def total(rc):
    called(rc, "total")
    if pathlib.Path(rc.get(BROKEN)).exists():
        raise RuntimeError("total is broken")
    rc.set(TOTAL, rc.get(PRICE).cents + 1)


@hookimpl
def durable_register_codecs(codecs):
    codecs.register_json(Money)
"""


@attrs.define
class Ops:
    """One project: a graph module, its config, and the store it uses."""

    folder: pathlib.Path
    module: str
    config: str
    store_url: str
    store_kind: str
    runner: CliRunner = attrs.field(factory=CliRunner)

    def invoke(self, *args: str, **kwargs: Any) -> Result:
        return self.runner.invoke(cli, list(args), **kwargs)

    def json(self, *args: str) -> Any:
        result = self.invoke(*args, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def calls(self) -> list[str]:
        path = self.folder / "calls.txt"
        return path.read_text().split() if path.exists() else []

    def write_config(
        self, name: str = "ops.toml", *, run_id: str = "ops-1", extra: str = ""
    ) -> str:
        path = self.folder / name
        path.write_text(
            textwrap.dedent(
                f"""
                graph = "{self.module}:graph"
                run_id = "{run_id}"
                version = "1"
                {extra}
                [inputs]
                n = 21
                calls = {{ path = "calls.txt" }}
                broken = {{ path = "broken" }}

                """
            )
            + _STORE_TABLES[self.store_kind](self)
        )
        return str(path)


def _pg_table(ops: Ops) -> str:
    return f'[store]\nbackend = "postgres"\ndsn = {json.dumps(ops.store_url)}\n'


_STORE_TABLES = {
    "file": lambda ops: '[store]\nbackend = "file"\ndirectory = "runs"\n',
    "sqlite": lambda ops: '[store]\nbackend = "sqlite"\npath = "db/runs.sqlite"\n',
    "postgres": _pg_table,
}


STORE_KINDS = ["file", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=STORE_KINDS)
def ops(request, tmp_path, monkeypatch) -> Ops:
    kind = request.param
    module = f"ops_graph_{next(_counter)}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(GRAPH))
    if kind == "file":
        url = f"file://{tmp_path / 'runs'}"
    elif kind == "sqlite":
        url = f"sqlite://{tmp_path / 'db' / 'runs.sqlite'}"
    else:
        url = postgres_url(request.getfixturevalue("postgres_dsn"))
    monkeypatch.chdir(tmp_path)
    project = Ops(tmp_path, module, "", url, kind)
    project.config = project.write_config()
    yield project
    sys.modules.pop(module, None)
