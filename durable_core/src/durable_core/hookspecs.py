"""Moved to :mod:`durable_core.plugins.hookspecs`; this import path stays for one release."""

import sys

from durable_core.plugins import hookspecs

sys.modules[__name__] = hookspecs
