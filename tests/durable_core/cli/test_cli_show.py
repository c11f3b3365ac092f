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
    assert data["outputs"]["price"]["value"] == {"repr": "Money(cents=4200)"}
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
