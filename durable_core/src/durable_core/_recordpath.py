"""Moved to :mod:`durable_core.records.path`; this path re-exports it for one release."""

from durable_core.records.path import *  # noqa: F403
