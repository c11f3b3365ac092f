"""Moved to :mod:`durable_core.plugins.builtins`; this import path stays for one release."""

import sys

from durable_core.plugins import builtins

sys.modules[__name__] = builtins
