"""What a durable run is asked to do, and the checks made on it before the store is touched.

:class:`RunRequest` holds the arguments of one call of ``Runtime.run``, ``resume`` or
``run_or_resume`` (and their ``async`` forms), frozen, so that every public method builds one and
hands it to the runtime's one path. :func:`preflight` makes the checks that need no store: the
graph is valid and takes no stream root input, ``max_running`` and ``version`` are well formed,
every value key has a codec (:func:`check_codecs`), and every function-form body can travel to
the runtime's executor. :func:`input_parts` checks and encodes the root inputs into their
fingerprints (R-REC-2 ``Inputs``). A check that fails raises before anything is acquired or
saved (R-RT-3).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from typing import Any

import attrs

from durable_core._typeforms import (
    InstanceMismatch,
    check_instance,
    format_path,
    mismatch_text,
    normalize,
    type_name,
)
from durable_core.codecs import Codecs
from durable_core.durable.events import InputFingerprints
from durable_core.durable.fingerprint import values_fingerprint
from durable_core.errors import CodecError, ConfigError, GraphError
from durable_core.executors import Executor
from durable_core.graph import CancelToken, Graph, Key
from durable_core.graph.processor import Processor
from durable_core.graph.remote import dump_bodies
from durable_core.plugins import default_plugins
from durable_core.records import ValueRecord, ValueState

__all__ = [
    "Mode",
    "PluginHints",
    "RunRequest",
    "check_codecs",
    "encode_inputs",
    "input_parts",
    "preflight",
]

log = logging.getLogger("durable_core.durable")


class Mode(enum.Enum):
    """Which public method a :class:`RunRequest` comes from."""

    RUN = "run"
    """Start a new run; an existing record is refused."""
    RESUME = "resume"
    """Continue an existing run; a missing record is ``NotFoundError``."""
    RUN_OR_RESUME = "run_or_resume"
    """Start the run when it has no record, else continue it."""


@attrs.frozen(eq=False)
class RunRequest:
    """One call of ``Runtime.run``, ``resume`` or ``run_or_resume``: the arguments as given.

    Nothing is checked when it is built: :func:`preflight` and the runtime check it in the
    order the methods document, so that every error names the argument the caller gave.

    Attributes:
        mode: which method was called.
        graph: the graph.
        run_id: the run's identity in the store.
        version: the host's business version.
        inputs: a value for every root input, by key.
        max_running: at most this many bodies at once, or None for the engine's default.
        timeout: seconds ``store.acquire`` may wait at most, or None for the store's limit.
        cancel: the token that stops the run from outside, or None.
        input_identity: stand-ins for some root inputs in the input fingerprint, or None.
    """

    mode: Mode
    graph: Graph
    run_id: str
    version: str
    inputs: Mapping[Key[Any], Any]
    max_running: int | None = None
    timeout: float | None = None
    cancel: CancelToken | None = None
    input_identity: Mapping[Key[Any], Any] | None = None


@attrs.frozen
class PluginHints:
    """Where :func:`check_codecs` looks for a codec plugin to name in its error.

    Attributes:
        plugins: the runtime's plugin manager, or None (the installed plugins are loaded for
            the hint).
        codecs_from_plugins: the runtime's registry already comes from the plugins (no hint).
    """

    plugins: Any = None
    codecs_from_plugins: bool = False


def preflight(
    request: RunRequest, codecs: Codecs, executor: Executor | None, hints: PluginHints
) -> None:
    """The checks ``run`` and ``resume`` make before touching the store.

    Raises:
        GraphError: the graph is invalid, or takes a stream root input.
        ConfigError: ``max_running`` or ``version`` is invalid.
        CodecError: a value key's declared type has no codec (:func:`check_codecs`).
        NotPicklableError: a function-form body cannot be sent to ``executor``.
    """
    graph = request.graph
    _check_graph(graph)
    _check_max_running(request.max_running)
    _check_version(request.version)
    check_codecs(graph, codecs, hints)
    if executor is not None:
        dump_bodies(graph, executor)  # a body that cannot travel: before any save


def _check_graph(graph: Graph) -> None:
    graph.validate()
    for key in graph.inputs:
        if key.stream:
            raise GraphError(
                f"graph {graph.name!r} takes the stream {key.name!r} as a root input: a durable "
                "run stores only the streams its nodes produce. Produce it in a node (with "
                "send_at, to survive restarts), or run the graph with execute(). Nothing was "
                "saved."
            )


def _check_max_running(max_running: object) -> None:
    if max_running is None:
        return
    if isinstance(max_running, bool) or not isinstance(max_running, int) or max_running < 1:
        raise ConfigError(
            f"max_running must be a positive integer (bodies running at once), got "
            f"{max_running!r}; nothing was saved"
        )


def _check_version(version: object) -> None:
    if not isinstance(version, str):
        raise ConfigError(
            f"version must be a str (the host's business version), got {version!r}; nothing "
            "was saved"
        )


_UNSEEN: Any = object()


def _codec_problem(codecs: Codecs, key: Key[Any]) -> str | None:
    """Why no codec serves ``key``'s type in ``codecs`` (None: one does)."""
    try:
        if key.stream:  # every element is stored with the element type's codec
            codecs.lookup(key.type)
        else:
            codecs.check_declared(key.type)
    except CodecError as exc:
        return str(exc)
    return None


def check_codecs(graph: Graph, codecs: Codecs, hints: PluginHints) -> None:
    """Every value key of ``graph`` and of its Sub graphs has a codec in ``codecs`` for its
    declared type (or a type broad on purpose, see :meth:`Codecs.check_declared`).

    Raises:
        CodecError: listing every key without one, and how to register it.
    """
    missing: list[tuple[str, Key[Any], str]] = []
    answers: dict[tuple[bool, Any], str | None] = {}  # (stream, type) -> the problem, if any
    for sub_graph in graph.graphs().values():
        states = [
            n.body.state_key for n in sub_graph.nodes.values() if isinstance(n.body, Processor)
        ]
        for key in [*sub_graph.keys.values(), *states]:  # a processor's state is stored too
            try:  # each type once: a graph of many keys has few types
                problem = answers.get((key.stream, key.type), _UNSEEN)
            except TypeError:  # a type form that cannot be hashed: asked each time
                problem = _codec_problem(codecs, key)
            else:
                if problem is _UNSEEN:
                    problem = answers[(key.stream, key.type)] = _codec_problem(codecs, key)
            if problem is not None:
                missing.append((sub_graph.name, key, problem))
    if not missing:
        return
    served = _served_by_plugins([key.type for _, key, _ in missing], hints)
    lines = []
    for graph_name, key, problem in missing:
        line = f"  - key {key.name!r} of graph {graph_name!r} (type {type_name(key.type)}): "
        line += problem
        hint = served.get(type_name(key.type))
        if hint is not None:
            line += (
                f". An installed codec plugin serves this type ({hint}), but this "
                "runtime's registry does not use it: pass codecs=Codecs.from_plugins() or "
                "plugins=make_plugin_manager() to Runtime"
            )
        lines.append(line)
    count = f"{len(missing)} key{'s' if len(missing) > 1 else ''}"
    raise CodecError(
        f"graph {graph.name!r} cannot run durably: no codec serves the declared type of "
        f"{count}, so their values could not be stored. Nothing was run or saved.\n"
        + "\n".join(lines)
        + "\nRegister a codec for each type in the registry the Runtime uses: "
        'for attrs classes, dataclasses and enums, [codecs] json = ["module:Class"] in '
        "the run's TOML file or codecs.register_json(T) from Python, "
        "codecs.register(codec) for a custom codec, or install a codec plugin and build "
        "the registry with Codecs.from_plugins() (see docs/codecs.md)."
    )


def _served_by_plugins(types: list[Any], hints: PluginHints) -> dict[str, str]:
    """For types the runtime's registry lacks: the codec id an installed codec plugin has
    for them, by type name (empty when the registry already comes from the plugins, or the
    plugins cannot be loaded)."""
    if hints.codecs_from_plugins:
        return {}
    try:
        pm = hints.plugins if hints.plugins is not None else default_plugins()
        available = Codecs.from_plugins(pm)
    except Exception:  # only a hint: never hide the real error behind a plugin's
        log.debug("codec plugins could not be loaded for a hint", exc_info=True)
        return {}
    served: dict[str, str] = {}
    for tp in types:
        try:
            available.check_declared(tp)
        except CodecError:
            continue
        try:
            served[type_name(tp)] = f"codec {available.lookup(tp).id}"
        except CodecError:
            served[type_name(tp)] = "its values' classes have codecs"
    return served


def input_parts(
    graph: Graph,
    codecs: Codecs,
    inputs: Mapping[Key[Any], Any],
    input_identity: Mapping[Key[Any], Any] | None = None,
) -> tuple[InputFingerprints, ...]:
    """The input fingerprints of ``inputs`` (see
    :meth:`~durable_core.durable.Runtime.input_fingerprints`), each with the fingerprint of
    every input key: with the stand-ins of ``input_identity`` first when it is given, then
    without.

    Raises:
        GraphError: as :func:`encode_inputs`, for the inputs or the stand-ins; or a stand-in's
            key is not one of ``inputs``.
        CodecError: a value or stand-in cannot be encoded.
    """

    def parts(values: list[ValueRecord]) -> InputFingerprints:
        return InputFingerprints(
            values_fingerprint(values), {v.name: values_fingerprint([v]) for v in values}
        )

    plain = parts(encode_inputs(graph, codecs, inputs))
    if not input_identity:
        return (plain,)
    extra = [key for key in input_identity if key not in inputs]
    if extra:
        raise GraphError(
            f"input_identity names {sorted(getattr(k, 'name', repr(k)) for k in extra)}, "
            f"which are not among the inputs given to graph {graph.name!r}. Nothing was "
            "saved."
        )
    stand_ins = {**inputs, **input_identity}
    return (parts(encode_inputs(graph, codecs, stand_ins)), plain)


def encode_inputs(
    graph: Graph, codecs: Codecs, inputs: Mapping[Key[Any], Any]
) -> list[ValueRecord]:
    """Check the root inputs, then encode each (R-REC-2 ``Inputs``).

    Each value must be of its key's declared type, checked deeply as a durable run
    checks every value it stores (``[1, "two"]`` is not a ``list[int]``, ``True`` not an
    ``int``; an ``int`` is a ``float``): a wrong type is a ``GraphError``, like an input
    the engine refuses. A value of the right type that cannot be encoded is a
    ``CodecError``.

    Raises:
        GraphError: a key is not a root input, a value is not of its key's type, or an
            input is missing.
        CodecError: a value cannot be encoded (the message names the key).
    """
    if not isinstance(inputs, Mapping):
        raise GraphError(
            f"inputs must be a mapping of the root input keys of graph {graph.name!r} to "
            f"values, got {type(inputs).__name__}"
        )
    declared = {key.name: key for key in graph.inputs}
    values: list[ValueRecord] = []
    for key, value in inputs.items():
        name = getattr(key, "name", None)
        if not isinstance(key, Key) or declared.get(name) != key:  # type: ignore[arg-type]
            raise GraphError(
                f"{key!r} is not a root input of graph {graph.name!r}; its inputs are "
                f"{sorted(declared)}, keyed by their Key. Nothing was saved."
            )
        key_type = normalize(key.type)
        try:
            if not key.accepts(value):
                raise InstanceMismatch(mismatch_text(key_type, value))
            check_instance(value, key_type)
        except InstanceMismatch as exc:
            where = f"at {format_path(exc.path)}: " if exc.path else ""
            raise GraphError(
                f"root input {key.name!r} of graph {graph.name!r} takes "
                f"{type_name(key.type)} values: {where}{exc.problem}. Nothing was saved."
            ) from None
        try:
            encoded = codecs.encode_value(key.type, value)
        except CodecError as exc:
            raise CodecError(f"root input {key.name!r} cannot be stored: {exc}") from exc
        values.append(
            ValueRecord(
                name=key.name,
                type_id=encoded.codec_id,
                version=encoded.version,
                state=ValueState.READY,
                digest=encoded.digest,
                data=encoded.data,
            )
        )
    missing = sorted(set(declared) - {v.name for v in values})
    if missing:
        raise GraphError(
            f"graph {graph.name!r}: inputs {missing} were not given; pass a value for every "
            "root input. Nothing was saved."
        )
    return values
