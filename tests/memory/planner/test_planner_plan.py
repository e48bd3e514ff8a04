"""`plan`: fits within a capacity or says why not, and never returns an invalid packing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from planner_strategies import buffer_lists

from cannrt.memory.planner import (
    Buffer,
    DoesNotFitError,
    InvalidBufferError,
    NotFoundError,
    lower_bound,
    plan,
    validate,
)


@settings(max_examples=40, deadline=None)
@given(buffer_lists(), st.sampled_from([0.0, 0.01, 0.2]))
def test_plan_never_returns_an_invalid_packing_under_any_time_limit(buffers: list[Buffer], time_limit: float) -> None:
    packing = plan(buffers, time_limit=time_limit)
    assert validate(packing.buffers, packing.offsets) == packing.peak
    assert packing.peak >= lower_bound(buffers)


@settings(max_examples=25, deadline=None)
@given(buffer_lists(max_buffers=12), st.integers(0, 64))
def test_with_a_capacity_plan_fits_or_raises_a_planner_error(buffers: list[Buffer], slack: int) -> None:
    capacity = lower_bound(buffers) + slack
    try:
        packing = plan(buffers, capacity=capacity, time_limit=0.2)
    except NotFoundError as exc:
        assert exc.best.peak > capacity
        validate(exc.best.buffers, exc.best.offsets)
    else:
        assert validate(packing.buffers, packing.offsets, capacity) <= capacity


def test_a_capacity_below_the_bound_does_not_fit() -> None:
    buffers = [Buffer("a", 0, 2, 6), Buffer("b", 1, 3, 6)]
    with pytest.raises(DoesNotFitError, match="does not fit: lower bound 12 > capacity 11"):
        plan(buffers, capacity=11)


# The greedy orders all leave a gap here (peak 10), while the optimum sits at the bound of 9.
TRICKY = [Buffer("0", 2, 5, 3), Buffer("1", 1, 4, 3), Buffer("2", 2, 4, 3), Buffer("3", 4, 7, 4)]


def test_without_search_time_a_packing_at_the_capacity_is_not_found() -> None:
    with pytest.raises(NotFoundError, match=r"no packing found within 0 s \(best: 10\)"):
        plan(TRICKY, capacity=9, time_limit=0)


def test_the_search_closes_the_gap_greedy_leaves() -> None:
    packing = plan(TRICKY, capacity=9, time_limit=5)
    assert validate(packing.buffers, packing.offsets, 9) == 9


def test_duplicate_ids_are_rejected_before_planning() -> None:
    with pytest.raises(InvalidBufferError, match="duplicate"):
        plan([Buffer("a", 0, 1, 1), Buffer("a", 0, 1, 1)])


def test_alignment_is_respected() -> None:
    buffers = [Buffer("a", 0, 4, 3), Buffer("b", 0, 4, 8, alignment=8), Buffer("c", 2, 6, 5, 4)]
    packing = plan(buffers)
    assert all(o % b.alignment == 0 for b, o in zip(packing.buffers, packing.offsets, strict=True))
    validate(packing.buffers, packing.offsets)
