"""Moved to :mod:`durable_core.ops.outputs`; this import path stays for one release."""

import sys

from durable_core.ops import outputs as _moved

sys.modules[__name__] = _moved
