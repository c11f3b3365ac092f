"""The DSN, kept away from logs and messages (B-PG-3: the password is never shown).

A :class:`Dsn` parses the connection string once, remembers which substrings are secret
(``password``, ``sslpassword``, in plain and URL-encoded spelling) and offers :meth:`Dsn.scrub`
to remove them from any text before it reaches an error message, plus :meth:`Dsn.describe` for a
password-free description (host, port, database, user).
"""

from __future__ import annotations

import re
import urllib.parse

import psycopg
from psycopg.conninfo import conninfo_to_dict

from durable_core.errors import ConfigError

__all__ = ["REDACTED", "Dsn"]

REDACTED = "***"

_SECRET_KEYS = ("password", "sslpassword")

# Anything in a connection string that may carry a secret: a ``password=`` keyword or the
# ``user:password@`` part of a URI.
_MAY_HOLD_SECRET = re.compile(r"password|://[^/@]*:[^/@]*@", re.IGNORECASE)


class Dsn:
    """A parsed libpq connection string (keyword/value form or ``postgresql://`` URI).

    Args:
        dsn: the connection string. It is kept privately and never logged or shown.

    Raises:
        ConfigError: ``dsn`` is not a string or not a valid connection string. When the string
            may hold a password, the parser's detail is withheld (it can quote pieces of it).
    """

    def __init__(self, dsn: str) -> None:
        if not isinstance(dsn, str):
            raise ConfigError(
                f"the PostgreSQL DSN must be a string (a libpq connection string or a "
                f"postgresql:// URI), found {type(dsn).__name__}"
            )
        failure: ConfigError | None = None
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            if _MAY_HOLD_SECRET.search(dsn):
                detail = "the parser's detail is withheld because the DSN holds a password"
            else:
                detail = f"{exc}".strip()
            failure = ConfigError(
                f"the PostgreSQL DSN is not a valid libpq connection string or postgresql:// "
                f"URI ({detail}); see the libpq documentation, 'Connection Strings'"
            )
        if failure is not None:
            raise failure  # raised outside the except block: no chained parser message
        self._dsn = dsn
        self._params = {k: str(v) for k, v in params.items()}
        secrets: set[str] = set()
        for key in _SECRET_KEYS:
            value = self._params.get(key)
            if value:
                secrets.add(value)
                secrets.add(urllib.parse.quote(value, safe=""))
                secrets.add(urllib.parse.quote_plus(value, safe=""))
        # Longest first, so that a secret containing another is removed whole.
        self._secrets = sorted(secrets, key=len, reverse=True)

    @property
    def conninfo(self) -> str:
        """The connection string itself, for handing to psycopg only."""
        return self._dsn

    def get(self, key: str) -> str | None:
        """The value of one connection parameter given in the DSN, or ``None``."""
        return self._params.get(key)

    def scrub(self, text: str) -> str:
        """Return ``text`` with every secret of this DSN replaced by ``***``."""
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def describe(self) -> str:
        """A password-free description: ``host=… port=… dbname=… user=…`` (given parts only)."""
        parts = [
            f"{key}={self._params[key]}"
            for key in ("host", "hostaddr", "port", "dbname", "user")
            if self._params.get(key)
        ]
        return self.scrub(" ".join(parts)) or "(libpq defaults)"

    def __repr__(self) -> str:
        return f"Dsn({self.describe()!r})"
