"""Moved to :mod:`durable_core.records.integrity`; this path re-exports it for one release."""

from durable_core.records.integrity import *  # noqa: F403
