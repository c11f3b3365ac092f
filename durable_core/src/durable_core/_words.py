"""English for messages: the indefinite article before a name (``an int``, ``a str``)."""

from __future__ import annotations

# Words spelled with a vowel but said with a consonant sound, and the reverse.
_SAID_WITH_A = ("uni", "use", "usa", "uuid", "eu", "one", "once")
_SAID_WITH_AN = ("hour", "honest", "html", "http", "sql", "xml", "ndarray", "mdarray")


def a(name: str) -> str:
    """``name`` with its indefinite article: ``a("int") == "an int"``, ``a("str") == "a str"``,
    ``a("AttemptRecord") == "an AttemptRecord"``, ``a("UUID") == "a UUID"``."""
    word = name.lstrip("`'\"(").lower()
    if word.startswith(_SAID_WITH_AN):
        return f"an {name}"
    if word[:1] in ("a", "e", "i", "o", "u") and not word.startswith(_SAID_WITH_A):
        return f"an {name}"
    return f"a {name}"
