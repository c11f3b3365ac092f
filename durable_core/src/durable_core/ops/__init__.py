"""The operator library: what the operator commands of the ``durable`` CLI do with stored runs.

``maintenance`` (delete, prune, migrate, and the optional store capabilities they need),
``runinfo`` (what ``inspect`` and ``list`` show of a record), ``outputs`` (a confirmed node's
stored outputs read back as values, for ``show``) and ``nodeview`` (each node's state, joined
from the record and the run's history, for ``inspect --nodes``). It sits above the durable
layer and below the CLI: it may import the durable layer, the graph, the store, the codecs and
the records, never the CLI. Each module is imported by name; this package imports none of them.
"""
