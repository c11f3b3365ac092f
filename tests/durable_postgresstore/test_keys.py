"""Advisory-lock keys are stable across processes, hosts and versions (B-PG-1)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from durable_postgresstore import advisory_key


# covers: B-PG-1
def test_keys_are_pinned():
    # Processes of different Durable versions must agree on a run's key: never change these.
    assert advisory_key("r1") == -2293554248557722666
    assert advisory_key("x") == -3004609750506051759
    assert advisory_key("运行-🚀") == advisory_key("运行-🚀")


# covers: B-PG-1
@given(st.text(min_size=1))
def test_every_run_id_has_a_signed_64_bit_key(run_id):
    key = advisory_key(run_id)
    assert -(2**63) <= key < 2**63
    assert key == advisory_key(str(run_id))
