"""The article before a name in messages ("an int", never "a int")."""

import pytest

from durable_core._words import a


@pytest.mark.parametrize(
    ("name", "phrase"),
    [
        ("int", "an int"),
        ("str", "a str"),
        ("AttemptRecord", "an AttemptRecord"),
        ("ScopeRecord", "a ScopeRecord"),
        ("UUID", "a UUID"),
        ("unique index", "a unique index"),
        ("index", "an index"),
        ("ndarray", "an ndarray"),
        ("list[int]", "a list[int]"),
    ],
)
def test_the_article_follows_the_sound_of_the_name(name, phrase):
    assert a(name) == phrase
