"""The Store conformance kit: every clause of the Store/Session contract as its own test.

One module per group of clauses; :class:`StoreConformance` gathers them all, and a backend runs
the kit by subclassing it (see :mod:`durable_core.testing`):

- :mod:`~durable_core.testing.conformance.cas`: compare-and-swap saves (R-STORE-3);
- :mod:`~durable_core.testing.conformance.encoding`: copies, the caller's encoding, deltas,
  UTF-8 (R-STORE-2, R-REC-4, B-FILE-5);
- :mod:`~durable_core.testing.conformance.integrity`: corrupt records kept, looks write
  nothing (E-1, E-2);
- :mod:`~durable_core.testing.conformance.lifecycle`: close, context managers, reopening
  (R-STORE-4);
- :mod:`~durable_core.testing.conformance.ownership`: exclusive ownership in one process
  (R-STORE-1);
- :mod:`~durable_core.testing.conformance.processes`: the same across killed processes;
- :mod:`~durable_core.testing.conformance.capabilities`: the optional capabilities, run for
  what the store declares; a declared capability that is not implemented fails the kit;
- :mod:`~durable_core.testing.conformance.inbox`: the clauses of ``Capability.INBOX``.

Ownership and compare-and-swap are never optional: every clause outside ``capabilities`` runs
for every store. The kit needs pytest (``pip install "durable-core[testing]"``).
"""

from __future__ import annotations

from durable_core.testing.conformance.base import (
    BUSY_LIMIT,
    KitFixtures,
    RawRecords,
    StoreSpec,
    acquire_after_release,
)
from durable_core.testing.conformance.capabilities import CAPABILITY_CLAUSES, CapabilityClauses
from durable_core.testing.conformance.cas import CasClauses
from durable_core.testing.conformance.encoding import EncodingClauses
from durable_core.testing.conformance.inbox import InboxClauses
from durable_core.testing.conformance.integrity import IntegrityClauses
from durable_core.testing.conformance.lifecycle import LifecycleClauses
from durable_core.testing.conformance.ownership import OwnershipClauses
from durable_core.testing.conformance.processes import ProcessClauses

__all__ = [
    "BUSY_LIMIT",
    "CAPABILITY_CLAUSES",
    "RawRecords",
    "StoreConformance",
    "StoreSpec",
]


class StoreConformance(
    LifecycleClauses,
    CasClauses,
    EncodingClauses,
    IntegrityClauses,
    OwnershipClauses,
    ProcessClauses,
    CapabilityClauses,
    InboxClauses,
    KitFixtures,
):
    """Subclass this (as ``Test…``) and define the fixtures ``durable_store_factory`` and
    ``durable_raw_records``.

    ``durable_store_factory`` returns either a :class:`StoreSpec` or a bare zero-argument
    callable (then taken as ``StoreSpec(factory=callable)``). It must give a fresh, empty storage
    per test (use ``tmp_path``, a new database, a new schema …), and every call of the factory
    must return a store over that same storage.
    """

    @staticmethod
    def _acquire_after_release(store: object, run_id: str, spec: StoreSpec) -> object:
        """Acquire ``run_id`` once the store noticed its killed owner is gone (for backends'
        own tests; see :func:`~durable_core.testing.conformance.base.acquire_after_release`)."""
        return acquire_after_release(store, run_id, spec)  # type: ignore[arg-type]
