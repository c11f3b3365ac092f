"""The generated quick paths of the record wing show their source in tracebacks, inspect and pdb:
every generated module is registered in linecache under its own ``<durable-records-…>`` name."""

from __future__ import annotations

import inspect
import io
import json
import linecache
import pdb
import sys
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from durable_core.records import RunRecord, fastpath
from durable_core.records.jsonio import record_to_json
from tests.durable_core.records.samples import load_format2


def generated_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    return [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if frame.filename.startswith("<durable-records-")
    ]


# covers: R-REC-4
def test_a_traceback_through_the_quick_reader_shows_each_generated_line():
    tree = json.loads(record_to_json(load_format2()))
    scope = next(scope for scope in tree["Scopes"].values() if scope["Nodes"])
    node = next(iter(scope["Nodes"].values()))
    node["NodeID"] = 5  # not a string: the quick reader hands the record to the exact reader
    with pytest.raises(fastpath._Slow) as caught:
        fastpath._QUICK_READ(tree)
    frames = generated_frames(caught.value)
    # (a map's entries are read in a comprehension, a frame of its own before Python 3.12)
    assert [frame.name for frame in frames if not frame.name.startswith("<")] == [
        "_quick_RunRecord",
        "_quick_ScopeRecord",
        "_quick_NodeRecord",
    ]
    assert {frame.filename for frame in frames} == {"<durable-records-quick-readers>"}
    for frame in frames:  # the line is the generated source's, not an empty placeholder
        assert frame.line
        assert frame.line == linecache.getline(frame.filename, frame.lineno).strip()
    assert frames[-1].line == "if type(v) is not str: raise _Slow"
    text = "".join(traceback.format_exception(caught.value))
    assert 'File "<durable-records-quick-readers>"' in text
    assert "    if type(v) is not str: raise _Slow\n" in text


# covers: R-REC-4
def test_a_traceback_through_a_text_writer_shows_its_line():
    with pytest.raises(fastpath._Slow) as caught:
        fastpath._TEXT[RunRecord](object())
    (frame,) = generated_frames(caught.value)
    assert frame.filename == "<durable-records-text-writers>"
    assert frame.name == "_text_RunRecord"
    assert frame.line == "if type(v) is not RunRecord: raise _Slow"


def test_every_generated_function_has_its_source():
    first_lines = {
        fastpath._SHAPE_OK: "def _shape_RunRecord(value):\n",
        fastpath._QUICK_RUN: "def _quick_RunRecord(raw, n):\n",
        fastpath._TEXT[RunRecord]: "def _text_RunRecord(v):\n",
        fastpath._FIELD_TEXT[RunRecord]["revision"]: "def _field_RunRecord_revision(x):\n",
    }
    for function, first in first_lines.items():
        source = inspect.getsource(function)
        assert source.startswith(first)
        assert len(source.splitlines()) > 1


@pytest.fixture
def no_tracer() -> Iterator[None]:
    """pdb replaces the trace function (a coverage tracer, if one runs); it is put back after."""
    tracer = sys.gettrace()
    try:
        yield
    finally:
        sys.settrace(tracer)


def test_pdb_lists_a_generated_shape_check(no_tracer: None):
    out = io.StringIO()
    debugger = pdb.Pdb(stdin=io.StringIO("list\ncontinue\n"), stdout=out, nosigint=True)
    debugger.use_rawinput = False
    assert debugger.runcall(fastpath._SHAPE_OK, load_format2()) is True
    listing = out.getvalue()
    assert "<durable-records-shape-checks>" in listing
    assert "def _shape_RunRecord(value):" in listing
    assert "if type(value) is not RunRecord: return False" in listing


def test_sources_under_one_name_stay_apart():
    compiled: list[dict[str, Any]] = []
    sources = [
        "def f():\n    raise ValueError('first')\n",
        "def f():\n    raise ValueError('second')\n",
        "def f():\n    raise ValueError('first')\n",
    ]
    try:
        for source in sources:
            names: dict[str, Any] = {}
            fastpath._linecache_and_compile(source, "test-apart", names)
            compiled.append(names)
        filenames = [names["f"].__code__.co_filename for names in compiled]
        # a different source gets a name of its own; the same source again reuses its entry
        assert filenames == [
            "<durable-records-test-apart>",
            "<durable-records-test-apart-1>",
            "<durable-records-test-apart>",
        ]
        for names, word in zip(compiled, ["first", "second", "first"], strict=True):
            with pytest.raises(ValueError) as caught:
                names["f"]()
            (frame,) = generated_frames(caught.value)
            assert frame.line == f"raise ValueError({word!r})"
    finally:
        for name in ("<durable-records-test-apart>", "<durable-records-test-apart-1>"):
            linecache.cache.pop(name, None)
