"""Inputs: the ``[inputs]`` table's three forms and how each becomes the value a root input key
receives.

- a literal TOML value: ``n = 3`` (or ``n = { value = 3 }``);
- a file read when the run starts: ``text = { file = "input.txt", as = "text" }`` (``as`` is
  ``"text"``, ``"bytes"`` or ``"json"``);
- a path: ``out_dir = { path = "report" }``, resolved against the configuration's folder.

Every value is checked strictly against the key's declared type (no ``"5"`` for an ``int``).

A path input's value is always the absolute path, but the run's input fingerprint holds the path
relative to the configuration's folder when the path lies under that folder
(:func:`input_identity`): the project folder can be moved or cloned elsewhere and its runs still
resume. A path outside that folder is fingerprinted as the absolute path.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
from collections.abc import Mapping
from typing import Any, Literal

import attrs
import cattrs

from durable_core.config._text import (
    Invalid,
    bytes_hook,
    describe_value,
    explain,
    float_hook,
    passthrough,
    quote_names,
    resolve_path,
    strict,
    type_name,
)
from durable_core.errors import ConfigError

__all__ = [
    "FILE_FORMATS",
    "FileInput",
    "InputSource",
    "LiteralInput",
    "PathInput",
    "input_identity",
    "parse_input_override",
    "resolve_inputs",
]

FILE_FORMATS = ("text", "bytes", "json")
"""The values of a file input's ``as``."""


@attrs.frozen
class LiteralInput:
    """An input given as a literal TOML value (``n = 3`` or ``n = { value = 3 }``)."""

    value: Any


@attrs.frozen
class FileInput:
    """An input read from a file when the run starts: ``{ file = "x.txt", as = "text" }``.

    Attributes:
        file: the file's path; relative paths resolve against the config's folder.
        as_: how to read it (TOML key ``as``): ``"text"`` (UTF-8 text, a ``str``), ``"bytes"``
            (the raw bytes) or ``"json"`` (a JSON document, checked against the key's type).
    """

    file: str
    as_: Literal["text", "bytes", "json"] = "text"


@attrs.frozen
class PathInput:
    """A filesystem path given as input: ``{ path = "report" }``.

    The value given to the graph is the absolute path (a ``str``, or a ``pathlib.Path`` when
    the key's type is ``Path``); relative paths resolve against the config's folder. The path
    need not exist.
    """

    path: str


InputSource = LiteralInput | FileInput | PathInput


def resolve_inputs(
    inputs: Mapping[str, InputSource], graph: Any, base_dir: pathlib.Path, where: str
) -> dict[Any, Any]:
    """Match configured inputs to the graph's root input keys and check their types.

    Files are read now; ``{ path = … }`` values become absolute paths.

    Args:
        inputs: the inputs by key name, as written.
        graph: the graph whose root inputs (``graph.inputs``, a sequence of keys with ``name``
            and ``type``) are to be fed.
        base_dir: the folder relative paths resolve against.
        where: where the inputs were written, for messages (``"/x/run.toml: [inputs]"``).

    Returns:
        ``{key: value}`` for every root input key of the graph.

    Raises:
        ConfigError: a root input is missing, an input names no root input key, a file cannot
            be read, or a value does not have the key's type.
    """
    keys = {key.name: key for key in graph.inputs}
    unknown = sorted(set(inputs) - set(keys))
    if unknown:
        verb = "is not an input" if len(unknown) == 1 else "are not inputs"
        raise ConfigError(
            f"{where}: {quote_names(unknown)} {verb} of graph {_graph_name(graph)!r}; its "
            f"inputs are: {quote_names(sorted(keys)) or 'none'}"
        )
    missing = sorted(set(keys) - set(inputs))
    if missing:
        expected = ", ".join(f"{n} ({type_name(keys[n].type)})" for n in missing)
        raise ConfigError(
            f"{where}: missing {'a value' if len(missing) == 1 else 'values'} for the "
            f"graph's input{'s' if len(missing) > 1 else ''} {expected}; add "
            f"{'it' if len(missing) == 1 else 'them'} to [inputs]"
        )
    return {
        keys[name]: _resolve_input(source, keys[name].type, base_dir, f"{where} {name}")
        for name, source in inputs.items()
    }


def input_identity(
    inputs: Mapping[str, InputSource], graph: Any, base_dir: pathlib.Path
) -> dict[Any, Any]:
    """What stands for each path input in the run's input fingerprint (see
    :meth:`~durable_core.durable.Runtime.run`, ``input_identity``).

    A ``{ path = … }`` input (or a ``--input`` override of a ``Path`` key) whose absolute path
    lies under ``base_dir`` is fingerprinted as its path relative to ``base_dir``, written with
    ``/`` (``"data/prices.csv"``; ``"."`` for ``base_dir`` itself), so that moving or
    re-cloning the folder keeps the fingerprint. The graph still receives the absolute path.
    ``..`` segments are normalized first; symbolic links are not followed. Paths outside
    ``base_dir``, literal values and file inputs are fingerprinted as their values are, and are
    not in the result.

    Args:
        inputs: the inputs by key name, as written (already checked by
            :func:`resolve_inputs`).
        graph: the graph (``graph.inputs``: its root input keys).
        base_dir: the configuration's folder.

    Returns:
        ``{key: relative path}`` (a ``str``, or a ``pathlib.Path`` for a ``Path`` key) for the
        path inputs under ``base_dir``.
    """
    keys = {key.name: key for key in graph.inputs}
    base = pathlib.Path(os.path.normpath(base_dir.absolute()))
    out: dict[Any, Any] = {}
    for name, source in inputs.items():
        if not isinstance(source, PathInput) or name not in keys:
            continue
        resolved = pathlib.Path(os.path.normpath(resolve_path(source.path, base_dir)))
        if not resolved.is_relative_to(base):
            continue
        relative = resolved.relative_to(base).as_posix()
        key = keys[name]
        if key.type is pathlib.Path or key.type is pathlib.PurePath:
            out[key] = pathlib.Path(relative)
        else:
            out[key] = relative
    return out


def parse_input_override(text: str, graph: Any, base_dir: pathlib.Path) -> tuple[str, InputSource]:
    """One ``--input`` option: ``key=value`` or ``key=@file``, typed by the graph's input key.

    - ``key=@file`` reads the file when the run starts: a ``str`` key gets its UTF-8 text, a
      ``bytes`` key its bytes, any other key the JSON document it holds;
    - ``key=value`` for a ``str`` key is the text as written; for a ``Path`` key the path;
      for any other key, a JSON value (``n=42``, ``ratio=0.5``, ``ok=true``,
      ``words=["a","b"]``).

    Relative paths resolve against ``base_dir`` (the current directory for the command line).
    The value is checked against the key's type here, so that a mistake names ``--input key``.

    Returns:
        ``(key name, source)``, to replace that key's entry of ``[inputs]``.

    Raises:
        ConfigError: no ``=``, a key that is not a root input of the graph, a value that is not
            JSON where JSON is needed, an unreadable file, or a value of the wrong type.
    """
    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise ConfigError(f"--input {text!r}: expected KEY=VALUE or KEY=@FILE")
    keys = {key.name: key for key in graph.inputs}
    if name not in keys:
        raise ConfigError(
            f"--input {name}: not an input of graph {_graph_name(graph)!r}; its inputs are: "
            f"{quote_names(sorted(keys)) or 'none'}"
        )
    key_type = keys[name].type
    source: InputSource
    if raw.startswith("@"):
        file = str(resolve_path(raw[1:], base_dir))
        as_: Literal["text", "bytes", "json"] = (
            "text" if key_type is str else "bytes" if key_type is bytes else "json"
        )
        source = FileInput(file=file, as_=as_)
    elif key_type is str:
        source = LiteralInput(raw)
    elif key_type in (pathlib.Path, pathlib.PurePath):
        source = PathInput(str(resolve_path(raw, base_dir)))
    else:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"--input {name}: the key has type {type_name(key_type)}; give a JSON value "
                f"(for example {name}=42 or {name}='[1, 2]'), found {raw!r} ({exc})"
            ) from None
        source = LiteralInput(value)
    _resolve_input(source, key_type, base_dir, f"--input {name}")  # check it now
    return name, source


def _graph_name(graph: Any) -> str:
    return str(getattr(graph, "name", "?"))


def _resolve_input(source: InputSource, key_type: Any, base_dir: pathlib.Path, where: str) -> Any:
    if isinstance(source, PathInput):
        resolved = resolve_path(source.path, base_dir)
        if key_type is pathlib.Path or key_type is pathlib.PurePath:
            return resolved
        value: Any = str(resolved)
    elif isinstance(source, FileInput):
        file = resolve_path(source.file, base_dir)
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"{where}: cannot read the input file {file}: {exc.strerror or exc}"
            ) from exc
        if source.as_ == "bytes":
            value = data
        else:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"{where}: the input file {file} is not UTF-8 text ({exc}); read it with "
                    f'as = "bytes"'
                ) from None
            if source.as_ == "json":
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise ConfigError(
                        f"{where}: the input file {file} is not valid JSON: {exc}"
                    ) from None
            else:
                value = text
    else:
        value = source.value
    try:
        return _value_converter(base_dir).structure(value, key_type)
    except Exception as exc:
        detail = "" if isinstance(exc, Invalid) else f" ({explain(exc, top='value')})"
        hint = f"; {exc.hint}" if isinstance(exc, Invalid) and exc.hint else ""
        raise ConfigError(
            f"{where}: the graph's input key has type {type_name(key_type)}, found "
            f"{describe_value(value)}{detail}{hint}"
        ) from None


def _value_converter(base_dir: pathlib.Path) -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, strict(str, "a string"))
    conv.register_structure_hook(int, strict(int, "an integer"))
    conv.register_structure_hook(bool, strict(bool, "a boolean"))
    conv.register_structure_hook(float, float_hook)
    conv.register_structure_hook(bytes, bytes_hook)
    conv.register_structure_hook(datetime.datetime, strict(datetime.datetime, "a date-time"))
    conv.register_structure_hook(datetime.date, strict(datetime.date, "a date"))
    conv.register_structure_hook(datetime.time, strict(datetime.time, "a time"))
    conv.register_structure_hook_func(lambda t: t is Any or t is object, passthrough)

    def path_hook(value: Any, _type: Any) -> pathlib.Path:
        if isinstance(value, pathlib.PurePath):
            return pathlib.Path(value)
        if isinstance(value, str):
            return resolve_path(value, base_dir)
        raise Invalid(f"expected a path (a string), found {describe_value(value)}")

    conv.register_structure_hook(pathlib.Path, path_hook)
    return conv
