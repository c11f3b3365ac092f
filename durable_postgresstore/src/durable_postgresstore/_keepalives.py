"""TCP keepalives of the store's connections: how soon a vanished host loses its runs (X-HOST).

A run's advisory lock lives as long as the server session of its owner's connection. When the
owner's host drops off the network (power loss, a cut cable, a partition), nothing ends that
session until the server's TCP stack gives up on the peer, which with the operating system's
defaults takes about two hours. So every connection of the store asks for keepalives on both
ends:

* on the **server**, ``tcp_keepalives_idle``, ``tcp_keepalives_interval``,
  ``tcp_keepalives_count`` and ``tcp_user_timeout`` (set with ``set_config`` right after
  connecting): the server ends the session of a peer that stopped answering, which releases
  its advisory locks, and another host can take the run over;
* on the **client**, libpq's ``keepalives``, ``keepalives_idle``, ``keepalives_interval``,
  ``keepalives_count`` and ``tcp_user_timeout``: the old owner's socket fails at about the same
  time, so its session finds its connection gone before it saves again (it fails closed).

With the defaults (10 s idle, then a probe every 5 s, 3 probes, 25 s for unacknowledged data)
a vanished host's runs are free within about 25 s (bounded by ``idle + interval × count``, and
by ``user_timeout`` while data is unacknowledged). Values are whole seconds on the wire (the
user timeout whole milliseconds); they are rounded up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from durable_core.errors import ConfigError

__all__ = ["DEFAULT_KEEPALIVES", "Keepalives", "keepalives_from"]


@dataclass(frozen=True)
class Keepalives:
    """TCP keepalive settings for both ends of every store connection (X-HOST).

    Attributes:
        idle: seconds (>= 1) a connection may be silent before the first probe.
        interval: seconds (>= 1) between unanswered probes.
        count: unanswered probes (>= 1) after which the peer is declared gone.
        user_timeout: seconds (> 0) sent data may stay unacknowledged before the connection is
            dropped; ``0`` leaves the operating system's default.
    """

    idle: int = 10
    interval: int = 5
    count: int = 3
    user_timeout: float = 25.0

    @property
    def bound(self) -> float:
        """Seconds after which a silent peer is declared gone at the latest (the server ends its
        session): ``idle + interval × count``, or less when ``user_timeout`` cuts it short."""
        probes = float(self.idle + self.interval * self.count)
        return min(probes, self.user_timeout) if self.user_timeout else probes

    def libpq(self) -> dict[str, Any]:
        """The libpq connection parameters (client side)."""
        params: dict[str, Any] = {
            "keepalives": 1,
            "keepalives_idle": self.idle,
            "keepalives_interval": self.interval,
            "keepalives_count": self.count,
        }
        if self.user_timeout:
            params["tcp_user_timeout"] = math.ceil(self.user_timeout * 1000)
        return params

    def server(self) -> list[str]:
        """The server settings' values, in the order of ``sql.KEEPALIVES``."""
        return [
            str(self.idle),
            str(self.interval),
            str(self.count),
            str(math.ceil(self.user_timeout * 1000)),
        ]


DEFAULT_KEEPALIVES = Keepalives()
"""A vanished host's runs are free within about 25 s."""

_UNSET: Any = object()


def _number(name: str, value: object, *, whole: bool, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        unit = "a number of probes" if name == "keepalives_count" else "a number of seconds"
        raise ConfigError(f"{name} must be {unit}, found {value!r}")
    number = float(value)
    if math.isnan(number) or math.isinf(number) or number < 0 or (number == 0 and not allow_zero):
        least = "0 or more" if allow_zero else "more than 0"
        raise ConfigError(f"{name} must be {least}, found {value!r}")
    return float(math.ceil(number)) if whole else number


def _from_dsn(dsn_get: Any, key: str, scale: float = 1.0) -> float | None:
    raw = dsn_get(key)
    if raw is None or raw == "":
        return None
    try:
        return float(raw) / scale
    except ValueError:
        raise ConfigError(
            f"the DSN's {key}={raw!r} is not a number; see the libpq documentation, "
            "'Parameter Key Words'"
        ) from None


def keepalives_from(
    dsn_get: Any,
    *,
    keepalives: Any = _UNSET,
    idle: Any = _UNSET,
    interval: Any = _UNSET,
    count: Any = _UNSET,
    user_timeout: Any = _UNSET,
) -> Keepalives | None:
    """The settings a store uses: an option given to the store wins, then the same libpq
    parameter in the DSN (``keepalives_idle=…`` in a ``postgresql://…?…`` URL; its
    ``tcp_user_timeout`` is in milliseconds), then :data:`DEFAULT_KEEPALIVES`.

    Args:
        dsn_get: returns a DSN parameter's value or ``None`` (``Dsn.get``).
        keepalives: ``False`` sets none (libpq's and the server's own defaults stay).

    Returns:
        The settings, or ``None`` when keepalives are turned off.

    Raises:
        ConfigError: a value is not a number, is out of range, or ``keepalives`` is no bool.
    """
    if keepalives is _UNSET:
        raw = dsn_get("keepalives")
        keepalives = raw is None or raw.strip() != "0"
    elif not isinstance(keepalives, bool):
        raise ConfigError(f"keepalives must be true or false, found {keepalives!r}")
    if not keepalives:
        return None
    default = DEFAULT_KEEPALIVES
    picked: dict[str, float] = {}
    for name, value, key, scale, fallback in (
        ("keepalives_idle", idle, "keepalives_idle", 1.0, default.idle),
        ("keepalives_interval", interval, "keepalives_interval", 1.0, default.interval),
        ("keepalives_count", count, "keepalives_count", 1.0, default.count),
        ("tcp_user_timeout", user_timeout, "tcp_user_timeout", 1000.0, default.user_timeout),
    ):
        if value is _UNSET:
            value = _from_dsn(dsn_get, key, scale)
            if value is None:
                value = fallback
        whole = name != "tcp_user_timeout"
        picked[name] = _number(name, value, whole=whole, allow_zero=not whole)
    return Keepalives(
        idle=int(picked["keepalives_idle"]),
        interval=int(picked["keepalives_interval"]),
        count=int(picked["keepalives_count"]),
        user_timeout=picked["tcp_user_timeout"],
    )
