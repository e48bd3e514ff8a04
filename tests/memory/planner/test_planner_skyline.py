"""The skyline branch and bound: valid packings, and complete (never refutes a feasible capacity)."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st
from planner_strategies import buffer_lists

from cannrt.memory.planner import Buffer, greedy, lower_bound, validate
from cannrt.memory.planner.buffers import Arrays
from cannrt.memory.planner.skyline import search

TRICKY = [Buffer("0", 2, 5, 3), Buffer("1", 1, 4, 3), Buffer("2", 2, 4, 3), Buffer("3", 4, 7, 4)]


def _offsets(buffers: list[Buffer], capacity: int, **kw: object) -> list[int] | None:
    result = search(Arrays.of(buffers), capacity, time.monotonic() + 30, **kw)  # type: ignore[arg-type]
    return None if result.offsets is None else [int(x) for x in result.offsets]


def test_the_skyline_closes_the_gap_greedy_leaves() -> None:
    offsets = _offsets(TRICKY, 9)
    assert offsets is not None
    assert validate(TRICKY, offsets, 9) == 9


def test_a_capacity_below_the_optimum_is_refuted() -> None:
    result = search(Arrays.of(TRICKY), 8, time.monotonic() + 30)
    assert result.offsets is None and result.exhausted


@settings(max_examples=60, deadline=None)
@given(buffer_lists(max_buffers=14), st.sampled_from(["size", "area", "length"]), st.booleans(), st.booleans())
def test_any_capacity_greedy_meets_is_met_and_the_packing_validates(
    buffers: list[Buffer], order: str, infer: bool, by_section: bool
) -> None:
    capacity = greedy(buffers).peak
    deadline = time.monotonic() + 30
    kw = {"order": order, "infer": infer, "by_section": by_section, "node_limit": 20_000}
    result = search(Arrays.of(buffers), capacity, deadline, **kw)  # type: ignore[arg-type]
    assert result.offsets is not None or not result.exhausted, "a feasible capacity was refuted"
    if result.offsets is not None:
        assert validate(buffers, [int(x) for x in result.offsets], capacity) <= capacity


@settings(max_examples=40, deadline=None)
@given(buffer_lists(max_buffers=10, aligned=False))
def test_refuting_the_lower_bound_means_greedy_is_above_it(buffers: list[Buffer]) -> None:
    bound = lower_bound(buffers)
    result = search(Arrays.of(buffers), bound, time.monotonic() + 30)
    if result.offsets is not None:
        assert validate(buffers, [int(x) for x in result.offsets], bound) <= bound
    else:
        assert result.exhausted
        assert greedy(buffers).peak > bound


def test_zero_sizes_and_alignment() -> None:
    buffers = [Buffer("z", 0, 9, 0), Buffer("a", 0, 4, 3), Buffer("b", 0, 4, 8, 8), Buffer("c", 2, 6, 5, 4)]
    offsets = _offsets(buffers, 24)
    assert offsets is not None
    validate(buffers, offsets, 24)
