"""The error family: every public error derives from DurableError and the helpful builtin."""

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
