"""A three-node pricing graph for docs/operations.md: it fails while the file ``broken`` exists
next to this module, so that a run can fail for good and be continued by ``durable fork``; it
waits while the file ``hold`` exists, so that a running run can be watched and canceled."""

import pathlib
import time

import attrs

from durable_core import hookimpl
from durable_core.graph import Graph, Key


@attrs.frozen
class Money:
    """An amount in cents (a value of the graph's own class, with its own JSON codec)."""

    cents: int


QUANTITY = Key("quantity", int)
UNIT_CENTS = Key("unit_cents", int)
SUBTOTAL = Key("subtotal", Money)
TAX = Key("tax", Money)
INVOICE = Key("invoice", str)

graph = Graph("pricing", inputs=[QUANTITY, UNIT_CENTS])

BROKEN = pathlib.Path(__file__).with_name("broken")
HOLD = pathlib.Path(__file__).with_name("hold")
HOLD_SECONDS = 600.0
"""``subtotal`` waits at most this long for ``hold`` to go."""


@graph.node("subtotal", requires=[QUANTITY, UNIT_CENTS], provides=[SUBTOTAL])
def subtotal(rc):
    deadline = time.monotonic() + HOLD_SECONDS
    while HOLD.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    rc.set(SUBTOTAL, Money(rc.get(QUANTITY) * rc.get(UNIT_CENTS)))


@graph.node("tax", requires=[SUBTOTAL], provides=[TAX])
def tax(rc):
    rc.set(TAX, Money(rc.get(SUBTOTAL).cents * 20 // 100))


@graph.node("invoice", requires=[QUANTITY, SUBTOTAL, TAX], provides=[INVOICE])
def invoice(rc):
    if BROKEN.exists():
        raise RuntimeError(f"the invoice printer is broken (delete {BROKEN} to fix it)")
    total = rc.get(SUBTOTAL).cents + rc.get(TAX).cents
    rc.set(INVOICE, f"{rc.get(QUANTITY)} items: {total / 100:.2f}")


@hookimpl
def durable_register_codecs(codecs):
    codecs.register_json(Money)
