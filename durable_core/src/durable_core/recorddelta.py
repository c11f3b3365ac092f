"""Moved to :mod:`durable_core.records.delta`; this path re-exports it for one release."""

from durable_core.records.delta import *  # noqa: F403
