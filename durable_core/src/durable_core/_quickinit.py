"""Building many instances of an attrs class quickly.

attrs' ``__init__`` of a frozen slotted class stores each field through ``object.__setattr__``
bound anew for every instance, about twice the cost of storing through each slot's own
descriptor. For a class that is not frozen, plain attribute stores, without the call of
``__init__`` and its keyword arguments, cost less than half of what attrs' ``__init__`` does
(and a third of the descriptors' calls). A resume builds such objects for every confirmed node
(its restored outputs and its attempt), and every save builds a few (the proposal's record, the
node and attempt records), so those places build them with a constructor from
:func:`quick_init`: the same object, every field stored once, without attrs' generic path.

It accepts only classes for which the two are the same object: slotted attrs classes whose
fields take no validator, converter or factory default and that have no ``__attrs_pre_init__``
or ``__attrs_post_init__``; anything else is refused when the constructor is made (at import).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["quick_init"]


def quick_init(cls: type, *names: str) -> Callable[..., Any]:
    """A constructor of ``cls`` taking the fields ``names`` positionally, in that order.

    Every other field gets its default. ``quick_init(C, "a", "b")(1, 2)`` equals
    ``C(a=1, b=2)`` field by field, and is as frozen.

    Args:
        cls: a slotted attrs class (frozen or not).
        names: the fields the constructor takes, each once; every field without a default
            must be among them.

    Returns:
        The constructor.

    Raises:
        TypeError: ``cls`` is not such a class, a field has a validator, a converter or a
            factory default, a name is not a field (or is given twice), or a field without a
            default is not named.
    """
    if not attrs.has(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a slotted attrs class")
    if hasattr(cls, "__attrs_pre_init__") or hasattr(cls, "__attrs_post_init__"):
        raise TypeError(f"{cls.__name__} has an __attrs_pre_init__ or __attrs_post_init__")
    fields = attrs.fields(cls)
    slots = {slot for slot in cls.__dict__["__slots__"] if slot != "__weakref__"}
    if slots != {f.name for f in fields}:
        raise TypeError(f"{cls.__name__} has slots that are not its fields: {sorted(slots)}")
    known = {f.name for f in fields}
    if len(set(names)) != len(names) or not set(names) <= known:
        raise TypeError(f"{names} are not distinct fields of {cls.__name__}")
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    lines = [f"def make({', '.join(names)}):", "    o = _new(_cls)"]
    # A class that keeps object's own __setattr__ (not frozen) takes plain attribute stores,
    # the interpreter's quickest; a frozen one refuses them, so its slots' own descriptors
    # store each field.
    plain = cls.__setattr__ is object.__setattr__
    for index, f in enumerate(fields):
        if f.validator is not None or f.converter is not None or not f.init:
            raise TypeError(f"field {f.name!r} of {cls.__name__} is not a plain field")
        if f.name in names:
            value = f.name
        elif f.default is attrs.NOTHING or isinstance(f.default, attrs.Factory):  # type: ignore[arg-type]
            raise TypeError(f"field {f.name!r} of {cls.__name__} needs a value or a plain default")
        else:
            value = f"_default{index}"
            scope[value] = f.default
        if plain:
            lines.append(f"    o.{f.name} = {value}")
        else:
            setter = f"_set{index}"
            scope[setter] = cls.__dict__[f.name].__set__
            lines.append(f"    {setter}(o, {value})")
    lines.append("    return o")
    exec(compile("\n".join(lines), f"<quick init of {cls.__name__}>", "exec"), scope)
    make: Callable[..., Any] = scope["make"]
    make.__qualname__ = make.__name__ = f"quick_{cls.__name__}"
    return make
