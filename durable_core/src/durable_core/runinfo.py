"""Moved to :mod:`durable_core.ops.runinfo`; this import path stays for one release."""

import sys

from durable_core.ops import runinfo as _moved

sys.modules[__name__] = _moved
