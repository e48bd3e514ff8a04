"""The canonical branch and bound: exact (agrees with brute force), valid, and bounded in time."""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import given, settings
from planner_strategies import buffer_lists

from cannrt.memory.planner import Buffer, canonical, greedy, lower_bound, plan, validate
from cannrt.memory.planner.buffers import Arrays
from cannrt.memory.planner.canonical import search


@pytest.fixture(autouse=True, scope="module")
def _compiled() -> None:
    canonical.warm_up()  # the first search compiles (~16 s on a fresh machine): not on a deadline


TRICKY = [Buffer("0", 2, 5, 3), Buffer("1", 1, 4, 3), Buffer("2", 2, 4, 3), Buffer("3", 4, 7, 4)]


def _brute_force_peak(buffers: list[Buffer]) -> int:
    """Optimum by enumeration: every pushed-down packing is some order, each buffer on the
    highest top below it among the buffers placed before (rounded up to its alignment)."""
    best = greedy(buffers).peak
    for order in itertools.permutations(range(len(buffers))):
        tops: list[tuple[int, int, int]] = []  # (lower, upper, top)
        peak = 0
        for i in order:
            b = buffers[i]
            if b.size == 0:
                continue
            base = max((t for lo, up, t in tops if lo < b.upper and b.lower < up), default=0)
            base = -(-base // b.alignment) * b.alignment
            tops.append((b.lower, b.upper, base + b.size))
            peak = max(peak, base + b.size)
        best = min(best, peak)
    return best


def _search(buffers: list[Buffer], capacity: int, **kw: object) -> tuple[list[int] | None, bool]:
    result = search(Arrays.of(buffers), capacity, time.monotonic() + 30, **kw)  # type: ignore[arg-type]
    offsets = None if result.offsets is None else [int(x) for x in result.offsets]
    return offsets, result.exhausted


def test_the_optimum_is_found_and_one_byte_less_is_refuted() -> None:
    offsets, _ = _search(TRICKY, 9)
    assert offsets is not None and validate(TRICKY, offsets, 9) == 9
    assert _search(TRICKY, 8) == (None, True)


@settings(max_examples=80, deadline=None)
@given(buffer_lists(max_buffers=6))
def test_it_agrees_with_brute_force_on_the_optimum(buffers: list[Buffer]) -> None:
    optimum = _brute_force_peak(buffers)
    offsets, _ = _search(buffers, optimum)
    assert offsets is not None, f"the optimum {optimum} was not reached"
    assert validate(buffers, offsets, optimum) <= optimum
    if optimum > 0:
        assert _search(buffers, optimum - 1) == (None, True)


@settings(max_examples=60, deadline=None)
@given(buffer_lists(max_buffers=30))
def test_under_any_node_limit_a_returned_packing_validates(buffers: list[Buffer]) -> None:
    capacity = max(lower_bound(buffers), greedy(buffers).peak - 8)
    for limit in (1, 50, 5_000):
        offsets, exhausted = _search(buffers, capacity, node_limit=limit)
        if offsets is not None:
            assert validate(buffers, offsets, capacity) <= capacity
            assert not exhausted


def test_independent_stretches_of_time_are_solved_separately() -> None:
    left = [Buffer(f"l{i}", b.lower, b.upper, b.size) for i, b in enumerate(TRICKY)]
    right = [Buffer(f"r{i}", b.lower + 100, b.upper + 100, b.size) for i, b in enumerate(TRICKY)]
    bridge = [Buffer("long", 0, 200, 1)]
    offsets, _ = _search(left + right + bridge, 10)
    assert offsets is not None and validate(left + right + bridge, offsets, 10) == 10
    assert _search(left + right + bridge, 9) == (None, True)


def test_zero_sized_buffers_sit_at_zero() -> None:
    buffers = [Buffer("a", 0, 2, 0), Buffer("b", 0, 2, 4, 4), Buffer("c", 1, 3, 2, 4)]
    offsets, _ = _search(buffers, 8)
    assert offsets is not None and offsets[0] == 0
    assert validate(buffers, offsets, 8) == 6


def test_a_node_limit_too_small_gives_no_verdict() -> None:
    assert _search(TRICKY, 9, node_limit=1) == (None, False)  # a packing takes a node per buffer


def test_plan_reports_the_canonical_solver_when_it_wins() -> None:
    assert greedy(TRICKY).peak > 9
    packing = plan(TRICKY, capacity=9, time_limit=30)
    assert packing.peak == 9
    assert packing.solver == "canonical"
