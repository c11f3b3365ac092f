"""The error family: every public error derives from DurableError and the helpful builtin."""

import pickle

import pytest

import durable_core
from durable_core import errors


# covers: E-1
@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_is_a_durable_error_exported_from_the_package(name):
    cls = getattr(errors, name)
    assert issubclass(cls, errors.DurableError)
    assert getattr(durable_core, name) is cls


# covers: E-1, R-STORE-2
def test_builtin_bases_help_callers_catching_them():
    assert issubclass(errors.NotFoundError, LookupError)
    assert issubclass(errors.AcquireTimeoutError, TimeoutError)
    assert issubclass(errors.CorruptRecordError, ValueError)
    assert issubclass(errors.UndeclaredKeyError, KeyError)
    assert str(errors.UndeclaredKeyError("node 'a' touched key 'x'")) == "node 'a' touched key 'x'"
    for mismatch in ("DefinitionMismatchError", "VersionMismatchError", "InputsMismatchError"):
        assert issubclass(getattr(errors, mismatch), errors.MismatchError)


def _tree() -> dict[str, str | None]:
    """The hierarchy drawn in the module docstring: class name -> the name it is drawn under."""
    lines = errors.__doc__.split("::\n", 1)[1].split("\n\n", 1)[0].splitlines()
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in lines:
        if not line.strip():
            continue
        name = line.lstrip(" │├└─").split()[0]
        depth = len(line) - len(line.lstrip(" │├└─"))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if not name.startswith("("):  # a class of another distribution, named in brackets
            parents[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    return parents


# covers: E-1
def test_the_docstring_draws_every_error_under_its_base():
    classes = {
        name: cls
        for name, cls in vars(errors).items()
        if isinstance(cls, type) and issubclass(cls, BaseException)
    }
    tree = _tree()
    assert sorted(tree) == sorted(classes)
    assert sorted(tree) == sorted(errors.__all__)
    for name, parent in tree.items():
        durable_bases = [b for b in classes[name].__bases__ if issubclass(b, errors.DurableError)]
        assert [b.__name__ for b in durable_bases] == ([parent] if parent else []), name


# covers: E-1, R-RT-2
def test_a_store_error_says_whether_the_operation_may_have_taken_effect():
    assert issubclass(errors.StoreError, errors.DurableError)
    assert not issubclass(errors.StoreError, OSError)
    plain = errors.StoreError("saving run 'r' failed")
    assert plain.uncertain is False
    assert str(plain) == "saving run 'r' failed"
    unsure = errors.StoreError("saving run 'r' failed", uncertain=True)
    assert unsure.uncertain is True
    copy = pickle.loads(pickle.dumps(unsure))
    assert type(copy) is errors.StoreError
    assert (str(copy), copy.uncertain) == ("saving run 'r' failed", True)


# covers: E-1
def test_an_invariant_error_asks_to_report_it_and_survives_pickling():
    assert issubclass(errors.InvariantError, errors.DurableError)
    error = errors.InvariantError("scope 'a' has two parents")
    assert error.detail == "scope 'a' has two parents"
    assert str(error).startswith("scope 'a' has two parents. This is a bug in Durable")
    assert "please report it" in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is errors.InvariantError
    assert (str(copy), copy.detail) == (str(error), error.detail)  # not reported twice


def test_pickling_keeps_the_attributes_of_errors_that_have_them():
    busy = pickle.loads(pickle.dumps(errors.BusyError("busy", run_id="r")))
    assert (str(busy), busy.owner, busy.run_id) == ("busy", None, "r")
    failed = errors.MessageFailedError("m", "p", key="k", sequence=3, tries=2)
    copy = pickle.loads(pickle.dumps(failed))
    assert (str(copy), copy.path, copy.key, copy.sequence, copy.tries) == ("m", "p", "k", 3, 2)
