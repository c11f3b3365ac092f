"""Stores: the Store/Session contract, the kit every store is built on, and the memory store.

A :class:`Store` hands out one exclusive :class:`Session` per run id; the session loads and saves
the run's single record by compare-and-swap on its revision (seed 000 "Store 与 Session"; SPEC
R-STORE-1…5). The package holds:

- :mod:`~durable_core.store.protocol`: the contract (:class:`Store`, :class:`Session`,
  :class:`RunLister`, :class:`RunSummary`, :class:`EncodedRecord`);
- :mod:`~durable_core.store.capabilities`: the optional capabilities (:class:`Capability`, their
  protocols, and :func:`capabilities`, the one way to ask what a store or session can do);
- :mod:`~durable_core.store.kit`: :class:`BaseStore` and :class:`BaseSession`, the lifecycle and
  the template ``save`` every built-in store shares, and :class:`FoldingSession`, the
  fold-on-close template of stores that keep deltas; a backend implements only its medium;
- :mod:`~durable_core.store.deltas`: the one delta-fold policy (:data:`FOLD_RATIO`);
- :mod:`~durable_core.store.local`: helpers of stores on a local file system (cancel markers);
- :mod:`~durable_core.store.checks`: the checks all stores share (run ids, timeouts, saves,
  records read back, factory options);
- :mod:`~durable_core.store.locks`: per-run OS file locks and private directories, for stores
  on a local file system;
- :mod:`~durable_core.store.owner`: :class:`RunOwner`, who owns a run as a ``BusyError``
  names it, and how stores record it;
- :mod:`~durable_core.store.memory`: :class:`MemoryStore` (B-MEM).

The conformance kit in :mod:`durable_core.testing` proves a backend keeps the contract.
"""

from durable_core.store.capabilities import (
    CAPABILITY_SPECS,
    Capability,
    CapabilitySpec,
    capabilities,
)
from durable_core.store.checks import (
    check_options,
    check_path,
    decode_stored,
    summary_of,
    validate_loaded,
    validate_run_id,
    validate_save,
    validate_timeout,
)
from durable_core.store.deltas import FOLD_RATIO, fold_due
from durable_core.store.kit import Acquiring, BaseSession, BaseStore, FoldingSession
from durable_core.store.memory import MemorySession, MemoryStore, memory_store_factory
from durable_core.store.owner import (
    RunOwner,
    current_owner,
    owner_from_bytes,
    owner_from_tag,
    owner_tag,
    owner_to_bytes,
)
from durable_core.store.protocol import (
    MAX_REVISION,
    EncodedRecord,
    RunLister,
    RunSummary,
    Session,
    Store,
    sort_summaries,
)

__all__ = [
    "CAPABILITY_SPECS",
    "FOLD_RATIO",
    "MAX_REVISION",
    "Acquiring",
    "BaseSession",
    "BaseStore",
    "Capability",
    "CapabilitySpec",
    "EncodedRecord",
    "FoldingSession",
    "MemorySession",
    "MemoryStore",
    "RunLister",
    "RunOwner",
    "RunSummary",
    "Session",
    "Store",
    "capabilities",
    "check_options",
    "check_path",
    "current_owner",
    "decode_stored",
    "fold_due",
    "memory_store_factory",
    "owner_from_bytes",
    "owner_from_tag",
    "owner_tag",
    "owner_to_bytes",
    "sort_summaries",
    "summary_of",
    "validate_loaded",
    "validate_run_id",
    "validate_save",
    "validate_timeout",
]
