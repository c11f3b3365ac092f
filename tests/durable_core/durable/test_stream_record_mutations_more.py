"""The other half of the ``slow`` mutated stream records of ``test_stream_record_mutations``:
the same cases, in a file of its own so that the suite's parallel workers share them (a file's
tests run on one worker)."""

# covers: S-1, S-2, S-3, S-4, S-5, S-7, S-9, S-10, R-RT-3

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.durable_core.durable.test_stream_record_mutations import (  # noqa: F401 (a fixture)
    check_one_case,
    world,
)


@pytest.mark.slow
@settings(max_examples=2600, database=None)
@given(data=st.data())
def test_more_mutated_records_are_refused_before_anything_runs_or_resume_to_the_full_result(
    world: dict[str, Any],  # noqa: F811 (the fixture imported above)
    data: st.DataObject,
) -> None:
    # covers: S-1, S-2, S-3, S-4, S-5, S-7, S-9, S-10
    check_one_case(world, data)
