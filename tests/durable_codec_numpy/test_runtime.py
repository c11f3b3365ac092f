"""The numpy codec plugin in durable runs: used through ``Runtime(plugins=...)``, and named by
the error of a runtime whose registry does not use it (C-2)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from durable_core import CodecError, Graph, Key, MemoryStore, Runtime, make_plugin_manager

SIZE = Key("size", int)
ARRAY = Key("array", np.ndarray)
TOTAL = Key("total", float)


def graph() -> Graph:
    g = Graph("arrays", inputs=[SIZE])

    @g.node("make", requires=[SIZE], provides=[ARRAY])
    def make(rc: Any) -> None:
        rc.set(ARRAY, np.arange(rc.get(SIZE), dtype=np.float64))

    @g.node("sum", requires=[ARRAY], provides=[TOTAL])
    def total(rc: Any) -> None:
        rc.set(TOTAL, float(rc.get(ARRAY).sum()))

    return g


# covers: C-2, R-VAL-3
def test_a_runtime_given_the_plugins_stores_arrays_with_the_plugin_codec():
    store = MemoryStore()
    runtime = Runtime(store, plugins=make_plugin_manager())
    assert runtime.run(graph(), run_id="r1", version="1", inputs={SIZE: 4})[TOTAL] == 6.0
    again = runtime.resume(graph(), run_id="r1", version="1", inputs={SIZE: 4})
    assert again.restored == 2
    assert again[TOTAL] == 6.0


# covers: C-2
def test_the_error_of_a_runtime_without_the_plugin_codecs_names_the_installed_plugin():
    with pytest.raises(CodecError) as caught:
        Runtime(MemoryStore()).run(graph(), run_id="r1", version="1", inputs={SIZE: 4})
    message = str(caught.value)
    assert "key 'array' of graph 'arrays' (type numpy.ndarray)" in message
    assert "An installed codec plugin serves this type (codec numpy:ndarray)" in message
