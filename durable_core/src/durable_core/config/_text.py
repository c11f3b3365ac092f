"""What every part of the configuration shares: the "wrong value" error, value and type
descriptions for messages, path resolution, redaction, and turning cattrs errors into
"[table] key: problem" phrases."""

from __future__ import annotations

import pathlib
import re
import types
import typing
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cattrs


class Invalid(TypeError):
    """A value of the wrong type; the message is shown as is, ``hint`` says what to do."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def strict(expected: type, label: str) -> Callable[[Any, Any], Any]:
    """A structure hook accepting only ``expected`` (never a bool for a number)."""

    def hook(value: Any, _type: Any) -> Any:
        if isinstance(value, expected) and not (expected is not bool and isinstance(value, bool)):
            return value
        raise Invalid(f"expected {label}, found {describe_value(value)}")

    return hook


def float_hook(value: Any, _type: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise Invalid(f"expected a number, found {describe_value(value)}")


def bytes_hook(value: Any, _type: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    raise Invalid(
        f"expected bytes, found {describe_value(value)}",
        hint='read bytes from a file with { file = "…", as = "bytes" }',
    )


def passthrough(value: Any, _type: Any) -> Any:
    return value


# -- messages ---------------------------------------------------------------------------------


def format_exception(exc: BaseException, _type: Any) -> str:
    if isinstance(exc, Invalid):
        return f"!{exc}"
    if isinstance(exc, KeyError):
        return "!missing"
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return "!unknown:" + ",".join(sorted(exc.extra_fields))
    if isinstance(exc, TypeError) and "not iterable" in str(exc):
        return "!expected a list"
    if isinstance(exc, AttributeError) and "items" in str(exc):
        return "!expected a table"
    return f"!{type(exc).__name__}: {exc}"


PATH_TOKEN = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]")

ATTRIBUTE_KEYS = {"as_": "as"}
"""Attribute names spelled differently in TOML."""


def explain(
    exc: BaseException, top: str = "", table_keys: Mapping[str, Sequence[str]] | None = None
) -> str:
    """Turn a cattrs error into "table key: problem" phrases joined by "; ".

    Args:
        exc: what the converter raised.
        top: names the value being checked (an input's value) instead of the TOML document.
        table_keys: the allowed keys of each table (``""`` for the top level), shown after an
            unknown key.
    """
    if isinstance(exc, (Invalid, KeyError)):
        return format_exception(exc, None).removeprefix("!")
    if not isinstance(exc, cattrs.BaseValidationError):
        return f"{type(exc).__name__}: {exc}"
    phrases = []
    for line in cattrs.transform_error(exc, path="$", format_exception=format_exception):
        message, _, path = line.rpartition(" @ ")
        parts = [
            ATTRIBUTE_KEYS.get(m.group(1), m.group(1)) or m.group(2) or m.group(3)
            for m in PATH_TOKEN.finditer(path.lstrip("$"))
        ]
        message = message.removeprefix("!")
        if message.startswith("unknown:"):
            names = message.removeprefix("unknown:").split(",")
            allowed = None if top else (table_keys or {}).get(".".join(parts))
            hint = f" (allowed keys: {', '.join(allowed)})" if allowed else ""
            plural = "s" if len(names) > 1 else ""
            phrases.append(
                f"{where(parts, top)}unknown key{plural} {', '.join(map(repr, names))}{hint}"
            )
        elif message == "missing" and parts:
            phrases.append(f"{where(parts[:-1], top)}missing required key {parts[-1]!r}")
        elif message.startswith("missing required key"):  # raised by a table's own hook
            phrases.append(f"{where(parts, top)}{message}")
        else:
            phrases.append(f"{where(parts, top, has_key=True)}{message}")
    return "; ".join(phrases)


def where(parts: list[str], top: str, *, has_key: bool = False) -> str:
    """Render a path as ``[table] key: `` (document) or ``value[2].name: `` (a value)."""
    if top:
        path = top + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in parts)
        return "" if path == top else f"{path}: "
    if not has_key or not parts:
        return f"[{'.'.join(parts)}]: " if parts else "top level: "
    # the key is the last name plus any list indexes after it: codecs[1]
    cut = len(parts)
    while cut > 0 and parts[cut - 1].isdigit():
        cut -= 1
    cut = max(cut - 1, 0)
    tables, key_parts = parts[:cut], parts[cut:]
    key = key_parts[0] + "".join(f"[{p}]" for p in key_parts[1:])
    if tables:
        return f"[{'.'.join(tables)}] {key}: "
    return f"top level, key {key!r}: "


def quote_names(names: list[str]) -> str:
    """``'a', 'b'``."""
    return ", ".join(repr(n) for n in names)


def type_name(tp: Any) -> str:
    """A short readable spelling of a type: ``list[Record]``, ``int | None``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join("None" if a is type(None) else type_name(a) for a in args)
    if origin is not None and args:
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in args)
        return f"{getattr(origin, '__name__', repr(origin))}[{inner}]"
    if isinstance(tp, type):
        return tp.__name__
    return repr(tp).replace("typing.", "")


def describe_value(value: Any) -> str:
    kinds = {
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a float",
        list: "a list",
        dict: "a table",
        bytes: "bytes",
    }
    kind = kinds.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} ({text})" if not isinstance(value, (list, dict)) else kind


def resolve_path(value: str, base_dir: pathlib.Path) -> pathlib.Path:
    path = pathlib.Path(value).expanduser()
    return path if path.is_absolute() else (base_dir / path).absolute()


def redact(text: str) -> str:
    """Hide the password of a URL-shaped DSN (``postgres://u:secret@h/db`` -> ``u:***@h``)."""
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError:
        return "***"
    if parts.scheme and parts.password is not None:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    if "password" in text.lower():
        return re.sub(r"(?i)(password\s*=\s*)(\S+)", r"\1***", text)
    return text
