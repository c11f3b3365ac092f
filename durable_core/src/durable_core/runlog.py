"""Moved to :mod:`durable_core.plugins.runlog`; this import path stays for one release."""

import sys

from durable_core.plugins import runlog

sys.modules[__name__] = runlog
