"""Registers the numpy array codec with Durable (entry point group ``durable``)."""

from __future__ import annotations

from typing import Any

from durable_core import hookimpl


@hookimpl
def durable_register_codecs(codecs: Any) -> None:
    """Placeholder: the numpy codec is registered here once implemented."""
