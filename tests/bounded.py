"""A bound on how long a test waits for a call that must not wait for anything.

"Busy at once" is checked without timing it: the owner holds the run for the whole call, so
an implementation that waited for the owner would never return. The bound turns that hang into
a failure; it is far longer than any machine needs, so speed never decides the outcome.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

HANG = 60.0
"""Seconds after which a call that should not wait for anything counts as hung."""


def returns_within(call: Callable[[], Any], seconds: float = HANG) -> Any:
    """Run ``call`` in a daemon thread; return its result or raise its exception.

    Raises:
        AssertionError: ``call`` did not return within ``seconds`` (it keeps running, a daemon).
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="bounded-call", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"the call waited more than {seconds:g} s: {call}")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
