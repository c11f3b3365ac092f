"""Public names bound on first use, for a package whose modules import heavy dependencies.

Every ``durable`` command loads the installed plugins; a store's or codec's package that binds
its names lazily lets a command that does not use it skip psycopg, numpy or distributed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["bind_lazily"]


def bind_lazily(
    package: str, exports: Mapping[str, str], names: list[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (PEP 562).

    Args:
        package: the package's ``__name__``.
        exports: each public name → the module that defines it.
        names: the package's ``__all__``.

    Returns:
        ``(__getattr__, __dir__)``: the first imports ``exports[name]`` on first use and keeps
        the value in the package; an unknown name raises ``AttributeError``.
    """
    namespace = importlib.import_module(package).__dict__

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(names))

    return getattr_, dir_
