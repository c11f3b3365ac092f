"""``durable show``: a confirmed node's outputs decoded with the codecs that wrote them."""

from __future__ import annotations

from durable_core.cli import ExitCode


def test_show_prints_a_nodes_outputs_as_repr_and_json(ops):
    done = ops.invoke("run", ops.config)
    assert done.exit_code == 0, done.output
    shown = ops.invoke("show", ops.config, "ops-1", "double")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == "twice = 42\n"
    price = ops.invoke("show", ops.config, "ops-1", "price")
    assert price.exit_code == 0, price.output
    assert price.stdout.splitlines() == ["price = Money(cents=4200)", "note = 'priced'"]
    only = ops.invoke("show", ops.config, "ops-1", "price", "note")
    assert only.stdout == "'priced'\n"
    data = ops.json("show", ops.config, "ops-1", "price")
    assert data["run_id"] == "ops-1" and data["node"] == "price"
    assert data["outputs"]["note"] == {"state": "ready", "codec": "json:str@1", "value": "priced"}
    assert data["outputs"]["price"]["value"] == {"cents": 4200}  # the JSON its codec stored
    assert data["outputs"]["price"]["codec"].endswith(".Money@1")
    by_url = ops.json("show", "--store", ops.store_url, "ops-1", "total")
    assert by_url["outputs"]["total"]["value"] == 4201


def test_show_names_the_codec_it_lacks_and_never_saves(ops):
    assert ops.invoke("run", ops.config).exit_code == 0
    before = ops.json("inspect", ops.config)["revision"]
    # without the config, the graph module's Money codec is not registered
    shown = ops.invoke("show", "--store", ops.store_url, "ops-1", "price")
    assert shown.exit_code == ExitCode.ERROR, shown.output
    assert "error (CodecError): output 'price' was written by codec json:" in shown.stderr
    assert ".Money@1, which is not registered" in shown.stderr
    assert ops.json("inspect", ops.config)["revision"] == before


def test_show_of_a_missing_node_key_or_run(ops):
    assert ops.invoke("run", ops.config).exit_code == 0
    node = ops.invoke("show", ops.config, "ops-1", "nope")
    assert node.exit_code == ExitCode.NOT_FOUND
    assert "no confirmed node 'nope'; confirmed nodes: double, price, total" in node.stderr
    key = ops.invoke("show", ops.config, "ops-1", "price", "nope")
    assert key.exit_code == ExitCode.NOT_FOUND
    assert "has no output 'nope'; its outputs: price, note" in key.stderr
    run = ops.invoke("show", ops.config, "other-run", "price")
    assert run.exit_code == ExitCode.NOT_FOUND
    usage = ops.invoke("show", ops.config, "ops-1")
    assert usage.exit_code == ExitCode.USAGE


def test_show_of_a_failed_run_shows_what_was_confirmed(ops):
    (ops.folder / "broken").touch()
    failed = ops.invoke("run", ops.config)
    assert failed.exit_code == ExitCode.RUN_FAILED
    assert ops.invoke("show", ops.config, "ops-1", "double").stdout == "twice = 42\n"
    missing = ops.invoke("show", ops.config, "ops-1", "total")
    assert missing.exit_code == ExitCode.NOT_FOUND


CONTAINERS = """
import attrs

from durable_core import hookimpl
from durable_core.graph import Graph, Key


@attrs.frozen
class Part:
    name: str


NUMS = Key("nums", list[int])
TABLE = Key("table", dict[str, float | None])
TAIL = Key("tail", tuple[int, ...])
PAIR = Key("pair", tuple[str, int])
EITHER = Key("either", int | str)
PARTS = Key("parts", list[Part])

graph = Graph("containers")


@graph.node("make", provides=[NUMS, TABLE, TAIL, PAIR, EITHER, PARTS])
def make(rc):
    rc.set(NUMS, [1, 2, 3])
    rc.set(TABLE, {"a": 0.5, "b": None})
    rc.set(TAIL, (4, 5))
    rc.set(PAIR, ("x", 1))
    rc.set(EITHER, "text")
    rc.set(PARTS, [Part("bolt")])


@hookimpl
def durable_register_codecs(codecs):
    codecs.register_json(Part)
"""


def test_show_decodes_container_values_with_or_without_the_config(tmp_path, monkeypatch):
    import sys

    from click.testing import CliRunner

    from durable_core.cli import cli

    (tmp_path / "show_containers.py").write_text(CONTAINERS)
    (tmp_path / "c.toml").write_text(
        'graph = "show_containers:graph"\nrun_id = "c-1"\nversion = "1"\n\n'
        '[store]\nbackend = "file"\ndirectory = "runs"\n'
    )
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    try:
        assert runner.invoke(cli, ["run", "c.toml"]).exit_code == 0
        expected = [
            "nums = [1, 2, 3]",
            "table = {'a': 0.5, 'b': None}",
            "tail = (4, 5)",
            "pair = ('x', 1)",
            "either = 'text'",
        ]
        with_config = runner.invoke(cli, ["show", "c.toml", "c-1", "make"])
        assert with_config.exit_code == 0, with_config.output
        assert with_config.stdout.splitlines() == [*expected, "parts = [Part(name='bolt')]"]
        # without the config only the graph module's class is unknown: the containers of
        # built-in types decode from the ids the record names
        store = f"file://{tmp_path / 'runs'}"
        for key, line in zip(["nums", "table", "tail", "pair", "either"], expected, strict=True):
            shown = runner.invoke(cli, ["show", "--store", store, "c-1", "make", key])
            assert shown.exit_code == 0, shown.output
            assert f"{key} = {shown.stdout.strip()}" == line
        parts = runner.invoke(cli, ["show", "--store", store, "c-1", "make", "parts"])
        assert parts.exit_code == ExitCode.ERROR
        assert "codec json:list[show_containers.Part]@1, which is not registered" in parts.stderr
    finally:
        sys.modules.pop("show_containers", None)
