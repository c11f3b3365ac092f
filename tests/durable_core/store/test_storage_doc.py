"""docs/storage.md: the opening examples of the file store (§4) and the SQLite store (§5) run
on a fresh store, where ``load()`` raises ``NotFoundError``, and on a store that holds the run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from durable_core import Graph, Key, Runtime
from durable_filestore import FileStore
from durable_sqlitestore import SQLiteStore
from tests import ROOT

DOC = ROOT / "docs" / "storage.md"


def first_python_block(heading: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}")
    return re.findall(r"^```python\n(.*?)^```", text[start:], re.S | re.M)[0]


@pytest.mark.parametrize(
    ("heading", "opener", "fresh", "existing"),
    [
        (
            "4. The file store",
            lambda: FileStore("./checkpoints"),
            "no record: start the run with Runtime(store).run(...)",
            "revision 2: continue with Runtime(store).resume(...)",
        ),
        (
            "5. The SQLite store",
            lambda: SQLiteStore("./state/durable.sqlite"),
            "no record yet",
            "revision 2",
        ),
    ],
)
def test_the_store_examples_handle_a_fresh_store(
    heading: str,
    opener: Any,
    fresh: str,
    existing: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # covers: R-STORE-2, R-RT-3, B-FILE-1, B-SQL-1
    monkeypatch.chdir(tmp_path)
    code = compile(first_python_block(heading), f"{DOC.name} {heading}", "exec")
    namespace: dict[str, object] = {"__name__": "docs_storage"}
    exec(code, namespace)
    assert capsys.readouterr().out.strip() == fresh

    # the same store, now holding run "order-17": the example finds it
    n = Key("n", int)
    g = Graph("g", inputs=[n])
    g.add_node(
        "double",
        lambda rc: rc.set(Key("twice", int), rc.get(n) * 2),
        requires=[n],
        provides=[Key("twice", int)],
    )
    namespace["store"].close()  # type: ignore[attr-defined]
    store = opener()
    Runtime(store).run(g, run_id="order-17", version="1", inputs={n: 1})
    store.close()
    exec(code, {"__name__": "docs_storage"})
    assert capsys.readouterr().out.strip() == existing
