"""Moved to :mod:`durable_core.ops.maintenance`; this import path stays for one release."""

import sys

from durable_core.ops import maintenance as _moved

sys.modules[__name__] = _moved
