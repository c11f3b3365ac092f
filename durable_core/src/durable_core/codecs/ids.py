"""Reading a container codec's id back as the type form it was built for.

A container codec (``json:list[int]``, ``json:dict[str,optional[myapp.Cat]]``,
``json:tuple[int,...]``, ``json:union[int,str]``) is never registered by id: :meth:`Codecs.lookup`
builds it from a declared type. A stored value names only the id, so a reader without the
graph (``durable show --store``) turns the id back into the type form here and lets
``lookup`` build the codec again. Parts are named as in the id: a JSON codec without its
``json:`` prefix (``int``, ``myapp.Cat``), any other codec by its full id (``numpy:ndarray``).
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

__all__ = ["form_of_id"]

_CONTAINERS = ("list", "dict", "optional", "tuple", "union")


def form_of_id(codec_id: str, part_type: Callable[[str], Any]) -> Any:
    """The type form a container codec id was built for.

    Args:
        codec_id: a stored codec id starting with ``json:``.
        part_type: gives the type a registered codec serves, from that codec's full id;
            raises (any exception) when no codec has the id.

    Returns:
        ``list[int]`` for ``json:list[int]``, ``typing.Optional[Cat]`` for
        ``json:optional[myapp.Cat]``, and so on.

    Raises:
        ValueError: the id is not a container form (a plain or unknown id), or malformed.
        Whatever ``part_type`` raises for a part no registered codec serves.
    """
    if not codec_id.startswith("json:"):
        raise ValueError(f"{codec_id!r} is not a JSON container codec id")
    name = codec_id[len("json:") :]
    if _split_head(name) is None:
        raise ValueError(f"{codec_id!r} is not a container codec id")
    return _form(name, part_type)


def _split_head(name: str) -> tuple[str, str] | None:
    head, bracket, rest = name.partition("[")
    if not bracket or head not in _CONTAINERS or not rest.endswith("]"):
        return None
    return head, rest[:-1]


def _split_args(text: str) -> list[str]:
    """``int,dict[str,int]`` -> ``["int", "dict[str,int]"]``: commas at bracket depth 0."""
    args: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced brackets in {text!r}")
        elif ch == "," and depth == 0:
            args.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise ValueError(f"unbalanced brackets in {text!r}")
    args.append(text[start:])
    if any(not a for a in args):
        raise ValueError(f"an empty part in {text!r}")
    return args


def _form(name: str, part_type: Callable[[str], Any]) -> Any:
    split = _split_head(name)
    if split is None:  # a leaf: a JSON codec named without its prefix, else a full id
        return part_type(name if ":" in name else f"json:{name}")
    head, inner = split
    if head == "tuple" and inner == "()":
        return tuple[()]
    args = _split_args(inner)
    if head == "list" and len(args) == 1:
        return list[_form(args[0], part_type)]
    if head == "dict" and len(args) == 2 and args[0] == "str":
        return dict[str, _form(args[1], part_type)]
    if head == "optional" and len(args) == 1:
        return typing.Optional[_form(args[0], part_type)]  # noqa: UP045 - built at run time
    if head == "tuple" and len(args) == 2 and args[1] == "...":
        return tuple[_form(args[0], part_type), ...]
    if head == "tuple":
        return tuple[tuple(_form(a, part_type) for a in args)]
    if head == "union" and len(args) >= 2:
        return typing.Union[tuple(_form(a, part_type) for a in args)]  # noqa: UP007
    raise ValueError(f"{name!r} is not a container form Durable writes")
