"""The Store conformance kit: prove that a backend keeps the Store/Session contract.

Every clause of the contract (seed 000 "Store 与 Session", seed 001 §4; SPEC R-STORE-1…5,
B-FILE-5) is one test method of :class:`StoreConformance`. A backend — Durable's own or a third
party's — runs the whole kit by subclassing it in a test module and giving two fixtures:
``durable_store_factory``, returning a zero-argument callable making a store over a fresh,
empty storage, and ``durable_raw_records``, returning a :class:`RawRecords` that reads and
writes the stored bytes past the store (the kit uses it to plant a corrupt record, which the
store must refuse to load and never overwrite)::

    # tests/test_my_store.py
    import functools

    import pytest

    from durable_core.testing import StoreConformance
    from my_package import MyStore


    class MyRawRecords:
        def __init__(self, path):
            self.path = path

        def read(self, run_id):
            ...  # the bytes stored as run_id's record, or None

        def write(self, run_id, data, revision):
            ...  # store data as run_id's record (and revision beside it, if kept)


    class TestMyStore(StoreConformance):
        @pytest.fixture
        def durable_store_factory(self, tmp_path):
            return functools.partial(MyStore, path=str(tmp_path / "runs.db"))

        @pytest.fixture
        def durable_raw_records(self, tmp_path):
            return MyRawRecords(tmp_path / "runs.db")

Rules for the factory:

- Each test gets a fresh storage (build it from ``tmp_path``, a new database or schema …).
- Every call returns a Store over the *same* storage: the kit calls it again to "reopen" the
  store and to have two store objects compete for one run.
- The kit re-creates the store in child processes (real ``subprocess`` children, killed with
  SIGKILL in some clauses), so the factory must be picklable: a module-level function or class,
  or ``functools.partial`` of one, with picklable arguments. The child gets the parent's
  ``sys.path``, so a factory defined in a test module or ``conftest.py`` works.
- A store that is in-process only returns ``StoreSpec(factory, cross_process=False,
  reason=...)`` instead: the cross-process clauses (and only those) are skipped with that
  reason. ``StoreSpec.release_timeout`` bounds how long a store may take to notice that a killed
  owner process is gone (default 10 s).

The kit needs pytest, declared as the extra ``durable-core[testing]``; only this package imports
it. The kit is a package, :mod:`durable_core.testing.conformance`, one module per group of
clauses. It runs the clauses of the optional capabilities a store declares (the ClassVar
``capabilities``, see :mod:`durable_core.store.capabilities`): a store declaring
``Capability.LIST_RUNS`` gets its ``list_runs`` checked, and a store that declares a capability
it does not implement fails the kit. Backend-specific tests can reuse :func:`sample_record` (a
record using every field) and :class:`StoreProcess` (drive a store from a child process).
"""

try:
    import pytest
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "durable_core.testing needs pytest, an extra of durable-core: install it with "
        'pip install "durable-core[testing]"'
    ) from exc

# Plain asserts in the kit report their values like the user's own tests do.
pytest.register_assert_rewrite("durable_core.testing.conformance")

from durable_core.testing.conformance import (  # noqa: E402
    BUSY_LIMIT,
    RawRecords,
    StoreConformance,
    StoreSpec,
)
from durable_core.testing.process import ChildReply, StoreProcess  # noqa: E402
from durable_core.testing.records import record_delta, sample_record  # noqa: E402

__all__ = [
    "BUSY_LIMIT",
    "ChildReply",
    "RawRecords",
    "StoreConformance",
    "StoreProcess",
    "StoreSpec",
    "record_delta",
    "sample_record",
]
