"""Moved to :mod:`durable_core.ops.nodeview`; this import path stays for one release."""

import sys

from durable_core.ops import nodeview as _moved

sys.modules[__name__] = _moved
