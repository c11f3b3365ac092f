"""``durable show``: a confirmed node's outputs, decoded with the codecs that wrote them."""

from __future__ import annotations

import json
from typing import Any

import click

from durable_core.cli.options import json_option, run_id_option

__all__ = ["show_command"]


@click.command("show")
@click.argument("args", nargs=-1, metavar="[CONFIG] RUN_ID NODE [KEY]")
@click.option("--store", "store_url", metavar="URL", help="The store, instead of a CONFIG.")
@run_id_option()
@json_option()
def show_command(
    args: tuple[str, ...], store_url: str | None, run_id_option: str | None, as_json: bool
) -> None:
    """Print the outputs of a confirmed node of a run (or only its KEY).

    NODE is a node of the root graph, or SUB/NODE for a node inside a Sub graph. Each value is
    decoded with the codec that wrote it (installed plugins' codecs; with a CONFIG, also those
    its graph's module registers) and printed as its repr, or as JSON with --json. The run is
    read through an exclusive session and never saved.
    """
    from durable_core.cli.context import plugin_manager
    from durable_core.cli.targets import (
        load_record,
        require_existing_store,
        split_store_args,
        store_words,
    )
    from durable_core.errors import NotFoundError
    from durable_core.ops.outputs import decode_output, node_outputs
    from durable_core.ops.runinfo import check_record

    pm = plugin_manager()
    store_config, config, rest = split_store_args(args, store_url, pm)
    if run_id_option is not None:  # --run-id ID NODE [KEY]: the same as RUN_ID NODE [KEY]
        rest = (run_id_option, *rest)
    if len(rest) not in (2, 3):
        raise click.UsageError(
            "give RUN_ID (or --run-id ID) and NODE, and optionally one KEY of the node"
        )
    run_id, node, key = rest[0], rest[1], (rest[2] if len(rest) == 3 else None)
    if config is not None:
        config.load_graph()
        config.register_graph_module(pm)
        codecs = config.make_codecs(pm)
    else:
        codecs = pm.codecs()
    require_existing_store(store_config)
    store = store_config.open(pm)
    try:
        named = store_words(args[0] if config is not None else None, store_url)
        record = load_record(store_config, store, run_id, named)
    finally:
        store.close()
    check_record(record, run_id)
    reason, stored = node_outputs(record, node)
    if key is not None:
        stored = [v for v in stored if v.name == key]
        if not stored:
            names = ", ".join(v.name for v in node_outputs(record, node)[1]) or "none"
            raise NotFoundError(
                f"node {node!r} of run {run_id!r} has no output {key!r}; its outputs: {names}"
            )
    outputs = [decode_output(v, codecs) for v in stored]
    if as_json:
        click.echo(
            json.dumps(
                {
                    "run_id": run_id,
                    "node": node,
                    "reason": reason,
                    "outputs": {
                        o.name: {
                            "state": o.state,
                            "codec": o.codec,
                            "value": _jsonable(o.value, v),
                        }
                        for o, v in zip(outputs, stored, strict=True)
                    },
                },
                indent=2,
            )
        )
        return
    if key is not None:
        (only,) = outputs
        click.echo(_text(only))
        return
    if reason == "skipped":
        click.echo(f"node {node!r} was skipped", err=True)
    for o in outputs:
        click.echo(f"{o.name} = {_text(o)}")


def _text(output: Any) -> str:
    if output.state == "ready":
        return repr(output.value)
    return f"({output.state})"


def _jsonable(value: Any, stored: Any) -> Any:
    """JSON values as they are; a value that a JSON codec wrote (an attrs class, a dataclass,
    a ``register_json`` class) as the JSON document it was stored as; anything else (a binary
    codec's value) as ``{"repr": "…"}``."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        pass
    else:
        return value
    if stored.stream is None and stored.type_id.startswith("json:"):
        try:
            return json.loads(bytes(stored.data))
        except ValueError:
            pass
    return {"repr": repr(value)}
