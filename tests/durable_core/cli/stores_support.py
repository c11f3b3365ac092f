"""Helpers shared by the CLI tests (importable by name: not a conftest)."""

from __future__ import annotations

import urllib.parse


def postgres_url(dsn: str) -> str:
    """A ``postgresql://`` URL for a libpq keyword/value DSN (``--store`` takes URLs)."""
    from psycopg.conninfo import conninfo_to_dict

    parts = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    user = urllib.parse.quote(parts.get("user", ""), safe="")
    password = parts.get("password")
    auth = user + (f":{urllib.parse.quote(password, safe='')}" if password else "")
    host = parts.get("host", "localhost")
    netloc = f"{auth}@{host}" if auth else host
    if "port" in parts:
        netloc += f":{parts['port']}"
    return f"postgresql://{netloc}/{urllib.parse.quote(parts.get('dbname', ''), safe='')}"
