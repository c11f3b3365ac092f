"""What an operator needs to see of a failed try: where it failed and its traceback.

Neither is ever stored in the run record (automatically captured error text is not a business
value, R-REC-2); they travel on the ``ATTEMPT_FAILED`` recovery event to the run log, where
``durable log`` and ``durable inspect`` show them and ``durable --debug run`` prints them.
"""

from __future__ import annotations

import os
import sysconfig
import traceback

import attrs

__all__ = ["MAX_TRACEBACK_CHARS", "Failure", "failure_of"]

MAX_TRACEBACK_CHARS = 16_000
"""A formatted traceback longer than this keeps its first line and its last
``MAX_TRACEBACK_CHARS`` characters, where the innermost frames and the error are."""

_DURABLE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY = tuple(
    os.path.abspath(p) + os.sep
    for p in {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}
    if p
)


@attrs.frozen
class Failure:
    """A failed try, as an operator reads it.

    Attributes:
        where: ``"path/to/module.py:42 in body"``: the innermost frame of the traceback in
            the user's code (not Durable's, not the standard library's); the innermost frame
            when every frame is Durable's or the library's; ``""`` without a traceback.
        traceback: the formatted exception with its chain, at most about
            :data:`MAX_TRACEBACK_CHARS` characters; ``""`` without a traceback.
    """

    where: str = ""
    traceback: str = ""


def failure_of(error: BaseException | None) -> Failure:
    """The :class:`Failure` of ``error`` (an empty one for ``None`` or an error that was never
    raised). A node failure that wraps another (a Sub node's, whose child failed) is described
    by the error it wraps, its ``original``."""
    original = getattr(error, "original", None)
    if isinstance(original, BaseException):
        error = original
    if error is None or error.__traceback__ is None:
        return Failure()
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return Failure()
    chosen = frames[-1]
    for frame in reversed(frames):
        path = os.path.abspath(frame.filename)
        if not path.startswith(_DURABLE + os.sep) and not path.startswith(_LIBRARY):
            chosen = frame
            break
    text = "".join(traceback.format_exception(error))
    if len(text) > MAX_TRACEBACK_CHARS:
        first = text.split("\n", 1)[0]
        text = f"{first}\n  …\n{text[-MAX_TRACEBACK_CHARS:]}"
    return Failure(where=f"{chosen.filename}:{chosen.lineno} in {chosen.name}", traceback=text)
