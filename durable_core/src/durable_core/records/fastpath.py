"""The quick paths generated from the field table: a reader, a shape check and text writers.

Each is Python source written from :mod:`durable_core.records.fields`' table at import and
compiled once: ``_quick_<Class>`` reads a parsed record, ``_shape_<Class>`` checks that a record
can be written, ``_text_<Class>`` and ``_field_<Class>_<attribute>`` write the canonical text of
a record object or of one field. Each accepts only what the exact reader or writer accepts and
raises :class:`_Slow` (or returns False) at anything else, so the exact path decides and names
the problem (R-REC-4).

The source of every generated function is registered in :mod:`linecache` under a unique name
(``<durable-records-quick-readers>``, …) before it is compiled, so tracebacks, ``inspect`` and
pdb show its lines.
"""

from __future__ import annotations

import binascii
import enum
import json
import linecache
import types
import typing
from collections.abc import Callable
from typing import Any

import attrs

from durable_core.records import model as r
from durable_core.records.fields import (
    _LONE_SURROGATE,
    _MISSING,
    _SPECS,
    INT_MAX,
    UINT64_MAX,
    _Field,
)

__all__: list[str] = []


def _linecache_and_compile(source: str, name: str, names: dict[str, Any]) -> None:
    """Register ``source`` in :mod:`linecache` under a unique ``<durable-records-{name}>`` and
    execute it in ``names``, so tracebacks and pdb show the generated lines (as attrs does)."""
    base = f"<durable-records-{name}"
    filename = base + ">"
    count = 1
    while True:
        entry = (len(source), None, source.splitlines(True), filename)
        if linecache.cache.setdefault(filename, entry) == entry:
            break
        filename = f"{base}-{count}>"  # another source under that name: reloaded, or a copy
        count += 1
    exec(compile(source, filename, "exec"), names)


class _Slow(Exception):
    """The quick reader met something it does not handle; the exact reader takes over."""


def _quick_bytes(raw: Any) -> bytes:
    if raw is None or raw == "":
        return b""
    if type(raw) is not str:
        raise _Slow
    try:
        data = binascii.a2b_base64(raw, strict_mode=True)
    except (binascii.Error, ValueError):
        raise _Slow from None
    if binascii.b2a_base64(data, newline=False) != raw.encode("ascii"):
        raise _Slow  # not the canonical spelling
    return data


def _plain_class(cls: type, fields: Any) -> bool:
    """Whether storing ``fields`` (in order) one by one on ``object.__new__(cls)`` builds the
    object ``cls(*values)`` builds: a slotted attrs class that is not frozen, whose slots are
    exactly its fields, in the order of ``fields``, none with a validator or converter, and
    without init hooks (each record class, checked when the readers are made)."""
    if not attrs.has(cls) or "__slots__" not in cls.__dict__:
        return False
    declared = attrs.fields(cls)
    return (
        cls.__setattr__ is object.__setattr__
        and not hasattr(cls, "__attrs_pre_init__")
        and not hasattr(cls, "__attrs_post_init__")
        and {slot for slot in cls.__dict__["__slots__"] if slot != "__weakref__"}
        == {a.name for a in declared}
        and [a.name for a in declared] == [field.attr for field in fields]
        and all(a.validator is None and a.converter is None and a.init for a in declared)
    )


_CONSTANTS = frozenset({type(None), bool, int, str})
"""Types of a field's default that the generated readers may share (immutable, no call)."""


def _build_quick_readers() -> Callable[[Any, list[int]], Any]:
    """Generate one ``_quick_<Class>(raw, n)`` per record class from the field table.

    For text without surrogate escapes and of valid UTF-8 (every record Durable writes), each
    builds exactly the object the exact reader builds, or raises :class:`_Slow` at the first
    thing it does not handle (a wrong type, an unknown or missing field, a duplicate key,
    non-canonical base64, …): the exact reader then reads the whole record again and names
    the problem. Each adds the number of keys of every JSON object it reads (its own and its
    maps') to ``n[0]``, which is how :func:`record_from_json` knows no key occurred twice.
    """
    names: dict[str, Any] = {
        "_Slow": _Slow,
        "_bytes": _quick_bytes,
        "_a2b": binascii.a2b_base64,
        "_b2a": binascii.b2a_base64,
        "_B64Error": binascii.Error,
        "INT_MAX": INT_MAX,
        "UINT64_MAX": UINT64_MAX,
        "RECORD_FORMAT": r.RECORD_FORMAT,
        "M": _MISSING,
    }
    special = {
        (r.RunRecord, "revision"): "if not (type(v) is int and 1 <= v <= UINT64_MAX): raise _Slow",
        (r.RunRecord, "format"): "if not (type(v) is int and 1 <= v <= RECORD_FORMAT): raise _Slow",
    }

    def item_expression(tp: Any) -> str:
        """An expression reading ``x`` as ``tp`` (objects only: scalars in lists do not occur)."""
        if isinstance(tp, type) and tp in _SPECS:
            return f"_quick_{tp.__name__}(x, n)"
        raise TypeError(f"record list or map item type {tp!r} has no quick reader")

    def statements(tp: Any, target: str) -> list[str]:
        """Statements reading ``v`` (present) into ``target``."""
        if tp is str:
            return ["if type(v) is not str: raise _Slow", f"{target} = v"]
        if tp is int:
            return ["if not (type(v) is int and 0 <= v <= INT_MAX): raise _Slow", f"{target} = v"]
        if tp is bool:
            return ["if type(v) is not bool: raise _Slow", f"{target} = v"]
        if tp is bytes:  # _quick_bytes inline for the usual non-empty text: no call
            return [
                "if type(v) is str and v:",
                f"    try: {target} = _a2b(v, strict_mode=True)",
                "    except (_B64Error, ValueError): raise _Slow from None",
                f"    if _b2a({target}, newline=False) != v.encode('ascii'): raise _Slow",
                f"else: {target} = _bytes(v)",
            ]
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            members = f"_members_{tp.__name__}"
            names[members] = {member.value: member for member in tp}
            return [
                f"{target} = {members}.get(v) if type(v) is str else None",
                f"if {target} is None: raise _Slow",
            ]
        if isinstance(tp, type) and tp in _SPECS:
            return [f"{target} = _quick_{tp.__name__}(v, n)"]
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is list:  # one item (a node's one output) read without a comprehension
            item = item_expression(args[0])
            return [
                "if v is None: " + f"{target} = []",
                "elif type(v) is list:",
                f"    if len(v) == 1: x = v[0]; {target} = [{item}]",
                f"    else: {target} = [{item} for x in v]",
                "else: raise _Slow",
            ]
        if origin is dict and args[0] is str:
            return [
                "if v is None: " + f"{target} = {{}}",
                "elif type(v) is dict:",
                "    n[0] += len(v)",
                f"    {target} = {{k: {item_expression(args[1])} for k, x in v.items()}}",
                "else: raise _Slow",
            ]
        if origin in (types.UnionType, typing.Union) and len(args) == 2 and type(None) in args:
            inner = next(a for a in args if a is not type(None))
            body = statements(inner, target)
            return [f"if v is None: {target} = None", "else:", *("    " + line for line in body)]
        raise TypeError(f"record field type {tp!r} has no quick reader")

    lines: list[str] = []
    for cls, spec in _SPECS.items():
        names[cls.__name__] = cls
        hints = typing.get_type_hints(cls)
        # No unknown key: every key present is a field read below. Without optional fields
        # the object has exactly the required keys; with them, ``k`` counts down one per
        # optional field present and ends at the number of required fields.
        required = sum(1 for field in spec.fields if field.absent is None)
        optional = len(spec.fields) - required
        lines.append(f"def _quick_{cls.__name__}(raw, n):")
        if optional:
            lines.append("    if type(raw) is not dict: raise _Slow")
            lines.append("    k = len(raw)")
            lines.append("    n[0] += k")
            lines.append("    g = raw.get")
        else:
            lines.append(f"    if type(raw) is not dict or len(raw) != {required}: raise _Slow")
            lines.append(f"    n[0] += {required}")
        lines.append("    try:")
        for index, field in enumerate(spec.fields):
            target = f"a{index}"
            if field.absent is None:  # required: a missing key is a KeyError
                lines.append(f"        v = raw[{field.key!r}]")
                body = (
                    [special[(cls, field.attr)], f"{target} = v"]
                    if (cls, field.attr) in special
                    else statements(hints[field.attr], target)
                )
                lines.extend("        " + line for line in body)
            else:
                absent = f"_absent_{cls.__name__}_{index}"
                default = field.absent()
                if default is field.absent() and type(default) in _CONSTANTS:
                    names[absent] = default  # the same immutable default each time: no call
                    lines.append(f"        v = g({field.key!r}, M)")
                    lines.append(f"        if v is M: {target} = {absent}")
                else:  # a new list or dict each time
                    names[absent] = field.absent
                    lines.append(f"        v = g({field.key!r}, M)")
                    lines.append(f"        if v is M: {target} = {absent}()")
                lines.append("        else:")
                lines.append("            k -= 1")
                lines.extend(
                    "            " + line for line in statements(hints[field.attr], target)
                )
        lines.append("    except KeyError:")
        lines.append("        raise _Slow from None")
        if optional:
            lines.append(f"    if k != {required}: raise _Slow")
        if _plain_class(cls, spec.fields):  # the fields stored as __init__ would, no call
            lines.append(f"    o = _new({cls.__name__})")
            lines.extend(f"    o.{f.attr} = a{index}" for index, f in enumerate(spec.fields))
            lines.append("    return o")
        else:
            arguments = ", ".join(f"a{index}" for index in range(len(spec.fields)))
            lines.append(f"    return {cls.__name__}({arguments})")
    names["_new"] = object.__new__
    _linecache_and_compile("\n".join(lines) + "\n", "quick-readers", names)
    return names["_quick_RunRecord"]  # type: ignore[no-any-return]


_QUICK_RUN = _build_quick_readers()


def _QUICK_READ(tree: Any) -> r.RunRecord:
    """The quick reader of a parsed record (raises :class:`_Slow` for the exact reader)."""
    return _QUICK_RUN(tree, [0])  # type: ignore[no-any-return]


# JSON text that the quick path may parse without watching for duplicate keys: see


def _build_shape_checks() -> Callable[[Any], bool]:
    """Generate one ``_shape_<Class>(value) -> bool`` per record class from the field table.

    Each returns True only when the writing pass would accept the value: the exact type of
    every object, list and map (the writer accepts subclasses too: they take the slow path),
    the ranges of the integer fields, valid Unicode of every string and map key, enum members
    of string enums. It never raises and builds nothing.
    """
    names: dict[str, Any] = {
        "_lone": _LONE_SURROGATE.search,
        "INT_MAX": INT_MAX,
        "UINT64_MAX": UINT64_MAX,
        "RECORD_FORMAT": r.RECORD_FORMAT,
    }
    lines: list[str] = []
    special = {
        (r.RunRecord, "revision"): "(type({v}) is int and 1 <= {v} <= UINT64_MAX)",
        (r.RunRecord, "format"): "(type({v}) is int and 1 <= {v} <= RECORD_FORMAT)",
    }

    def scalar(tp: Any) -> str | None:
        if tp is str:
            return "(type({v}) is str and ({v}.isascii() or _lone({v}) is None))"
        if tp is int:
            return "(type({v}) is int and 0 <= {v} <= INT_MAX)"
        if tp is bool:
            return "(type({v}) is bool)"
        if tp is bytes:
            return "(type({v}) is bytes)"
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            names[tp.__name__] = tp
            # the writer takes a str that is a member's value: a str enum's own members pass
            return f"(type({{v}}) is {tp.__name__})" if issubclass(tp, str) else "False"
        return None

    def fields(cls: type, value: str, depth: int, out: list[str], indent: str) -> None:
        """Append the checks of every field of the object ``value`` of class ``cls``."""
        hints = typing.get_type_hints(cls)
        v = f"v{depth}" if depth else "v"
        for field in _SPECS[cls].fields:
            out.append(f"{indent}{v} = {value}.{field.attr}")
            fixed = special.get((cls, field.attr))
            if fixed is not None:
                out.append(f"{indent}if not {fixed.format(v=v)}: return False")
            else:
                check(hints[field.attr], v, depth + 1, out, indent)

    def check(tp: Any, v: str, depth: int, out: list[str], indent: str) -> None:
        """Append statements that ``return False`` unless ``v`` is acceptable as ``tp``."""
        expression = scalar(tp)
        if expression is not None:
            out.append(f"{indent}if not {expression.format(v=v)}: return False")
            return
        if isinstance(tp, type) and tp in _SPECS:  # inline: no call per object
            out.append(f"{indent}if type({v}) is not {tp.__name__}: return False")
            fields(tp, v, depth, out, indent)
            return
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        item = f"x{depth}"
        if origin is list:
            out.append(f"{indent}if type({v}) is not list: return False")
            out.append(f"{indent}for {item} in {v}:")
            check(args[0], item, depth + 1, out, indent + "    ")
            return
        if origin is dict and args[0] is str:
            key = f"k{depth}"
            out.append(f"{indent}if type({v}) is not dict: return False")
            out.append(f"{indent}for {key}, {item} in {v}.items():")
            key_check = scalar(str)
            assert key_check is not None
            out.append(f"{indent}    if not {key_check.format(v=key)}: return False")
            check(args[1], item, depth + 1, out, indent + "    ")
            return
        if origin in (types.UnionType, typing.Union) and len(args) == 2 and type(None) in args:
            inner = next(a for a in args if a is not type(None))
            out.append(f"{indent}if {v} is not None:")
            check(inner, v, depth, out, indent + "    ")
            return
        raise TypeError(f"record field type {tp!r} has no shape check")

    for cls in _SPECS:
        names[cls.__name__] = cls
        lines.append(f"def _shape_{cls.__name__}(value):")
        lines.append(f"    if type(value) is not {cls.__name__}: return False")
        fields(cls, "value", 0, lines, "    ")
        lines.append("    return True")
    _linecache_and_compile("\n".join(lines) + "\n", "shape-checks", names)
    return names["_shape_RunRecord"]  # type: ignore[no-any-return]


_SHAPE_OK = _build_shape_checks()


_STR: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]


def _build_text_writers() -> tuple[
    dict[type, Callable[[Any], str]], dict[type, dict[str, Callable[[Any], str]]]
]:
    """Generate one ``_text_<Class>(value) -> str`` per record class from the field table, and
    one ``_field_<Class>_<attribute>(value) -> str`` per field (the text of a value, not None,
    of that field alone).

    Each writes the canonical JSON text of a record object directly (keys in sorted order, no
    whitespace, strings as the C encoder spells them with ``ensure_ascii`` off), exactly the
    text ``_DUMPS`` gives of the writing pass's tree, without building that tree. Each takes
    only the usual object (exact types throughout, integers in range, enum members of their
    own enum) and raises :class:`_Slow` at anything else: the writing pass then encodes the
    object, and names the path of a value it refuses. Strings are not checked for lone
    surrogates here, as in the writing pass without ``surrogates``: the UTF-8 encoding of the
    whole text refuses them, and :func:`check_shape` names the path.
    """
    names: dict[str, Any] = {
        "_Slow": _Slow,
        "_str": _STR,
        "_b64": binascii.b2a_base64,
        "INT_MAX": INT_MAX,
        "UINT64_MAX": UINT64_MAX,
        "RECORD_FORMAT": r.RECORD_FORMAT,
    }
    special = {
        (r.RunRecord, "revision"): "type(x) is int and 1 <= x <= UINT64_MAX",
        (r.RunRecord, "format"): "type(x) is int and 1 <= x <= RECORD_FORMAT",
    }

    def statements(tp: Any, x: str, target: str, depth: int) -> list[str]:
        """Statements that set ``target`` to the text of ``x`` (present) as ``tp``."""
        if tp is str:
            return [f"if type({x}) is not str: raise _Slow", f"{target} = _str({x})"]
        if tp is int:
            return [
                f"if not (type({x}) is int and 0 <= {x} <= INT_MAX): raise _Slow",
                f"{target} = int.__repr__({x})",
            ]
        if tp is bool:
            return [
                f"if type({x}) is not bool: raise _Slow",
                f'{target} = "true" if {x} else "false"',
            ]
        if tp is bytes:
            return [
                f"if type({x}) is not bytes: raise _Slow",
                f"{target} = '\"' + _b64({x}, newline=False).decode('ascii') + '\"'",
            ]
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            if not issubclass(tp, str):  # the writing pass refuses every member
                return ["raise _Slow"]
            table = f"_enum_{tp.__name__}"
            names[tp.__name__] = tp
            names[table] = {member: _STR(member.value) for member in tp}
            return [
                f"{target} = {table}.get({x}) if type({x}) is {tp.__name__} else None",
                f"if {target} is None: raise _Slow",
            ]
        if isinstance(tp, type) and tp in _SPECS:
            return [f"{target} = _text_{tp.__name__}({x})"]
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        item = f"y{depth}"
        if origin is list:
            if isinstance(args[0], type) and args[0] in _SPECS:  # a list of record objects
                return [
                    f"if type({x}) is not list: raise _Slow",
                    f'{target} = "[" + ",".join(map(_text_{args[0].__name__}, {x})) + "]"',
                ]
            inner = statements(args[0], item, "t", depth + 1)
            return [
                f"if type({x}) is not list: raise _Slow",
                f"p{depth} = []",
                f"for {item} in {x}:",
                *("    " + line for line in inner),
                f"    p{depth}.append(t)",
                f'{target} = "[" + ",".join(p{depth}) + "]"',
            ]
        if origin is dict and args[0] is str:
            key = f"k{depth}"
            inner = statements(args[1], item, "t", depth + 1)
            return [
                f"if type({x}) is not dict: raise _Slow",
                f"p{depth} = []",
                # sorted keys; the keys of a dict are distinct, so no value is compared
                f"for {key}, {item} in sorted({x}.items()):",
                f"    if type({key}) is not str: raise _Slow",
                *("    " + line for line in inner),
                f'    p{depth}.append(_str({key}) + ":" + t)',
                f'{target} = "{{" + ",".join(p{depth}) + "}}"',
            ]
        raise TypeError(f"record field type {tp!r} has no text writer")

    def value_statements(cls: type, field: _Field, tp: Any, target: str) -> list[str]:
        """Statements that set ``target`` to the text of the field's value ``x`` (not None)."""
        fixed = special.get((cls, field.attr))
        if fixed is not None:
            return [f"if not ({fixed}): raise _Slow", f"{target} = int.__repr__(x)"]
        if field.omit_none:
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        return statements(tp, "x", target, 0)

    lines: list[str] = []
    for cls, spec in _SPECS.items():
        names[cls.__name__] = cls
        hints = typing.get_type_hints(cls)
        for field in spec.fields:  # one field's value alone (a changed field of an object)
            lines.append(f"def _field_{cls.__name__}_{field.attr}(x):")
            body = value_statements(cls, field, hints[field.attr], "t")
            lines.extend("    " + line for line in body)
            lines.append("    return t")
        ordered = sorted(spec.fields, key=lambda f: f.key)
        lines.append(f"def _text_{cls.__name__}(v):")
        lines.append(f"    if type(v) is not {cls.__name__}: raise _Slow")
        pieces: list[str] = []  # f-string pieces, in key order
        for index, field in enumerate(ordered):
            target = f"a{index}"
            lines.append(f"    x = v.{field.attr}")
            body = value_statements(cls, field, hints[field.attr], target)
            separator = "," if pieces else ""
            prefix = (separator + _key_prefix(field.key)).replace("{", "{{").replace("}", "}}")
            if field.omit_none:  # Optional: the key is left out when the value is None
                if not pieces:
                    raise TypeError(f"{cls.__name__}: an optional field may not come first")
                lines.append(f'    if x is None: {target} = ""')
                lines.append("    else:")
                lines.extend("        " + line for line in body)
                lines.append(f"        {target} = {prefix!r} + {target}")
                pieces.append(f"{{{target}}}")
            else:
                lines.extend("    " + line for line in body)
                pieces.append(prefix + f"{{{target}}}")
        lines.append("    return f" + repr("{{" + "".join(pieces) + "}}"))
    _linecache_and_compile("\n".join(lines) + "\n", "text-writers", names)
    objects = {cls: names[f"_text_{cls.__name__}"] for cls in _SPECS}
    fields = {
        cls: {f.attr: names[f"_field_{cls.__name__}_{f.attr}"] for f in spec.fields}
        for cls, spec in _SPECS.items()
    }
    return objects, fields


def _key_prefix(key: str) -> str:
    return _STR(key) + ":"


_TEXT, _FIELD_TEXT = _build_text_writers()
