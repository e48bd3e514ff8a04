"""Greedy packings: always valid, never below the bound, and good on easy shapes."""

from __future__ import annotations

from hypothesis import given, settings
from planner_strategies import buffer_lists

from cannrt.memory.planner import Buffer, greedy, greedy_by_size, lower_bound, validate
from cannrt.memory.planner.buffers import Arrays
from cannrt.memory.planner.greedy import ORDERS, conflicts, place


@settings(max_examples=60, deadline=None)
@given(buffer_lists())
def test_every_greedy_packing_validates_and_its_peak_is_at_least_the_bound(
    buffers: list[Buffer],
) -> None:
    packing = greedy(buffers)
    assert validate(packing.buffers, packing.offsets) == packing.peak
    assert packing.peak >= lower_bound(buffers)


@settings(max_examples=40, deadline=None)
@given(buffer_lists())
def test_keeping_the_best_order_is_never_worse_than_the_plain_baseline(
    buffers: list[Buffer],
) -> None:
    assert greedy(buffers).peak <= greedy_by_size(buffers).peak


@settings(max_examples=40, deadline=None)
@given(buffer_lists(aligned=False))
def test_the_conflict_graph_lists_exactly_the_pairs_live_together(buffers: list[Buffer]) -> None:
    graph = conflicts(Arrays.of(buffers))
    for i, a in enumerate(buffers):
        live_together = (j for j, b in enumerate(buffers) if a.lower < b.upper and b.lower < a.upper)
        expected = set(live_together) - {i}
        assert set(graph.of(i).tolist()) == expected


def test_buffers_with_disjoint_lifetimes_share_address_zero() -> None:
    buffers = [Buffer(str(i), i, i + 1, 100) for i in range(5)]
    packing = greedy(buffers)
    assert packing.offsets == (0, 0, 0, 0, 0)
    assert packing.peak == 100


def test_a_chain_of_overlapping_pairs_is_packed_at_the_bound() -> None:
    buffers = [Buffer(str(i), i, i + 2, 10 + i) for i in range(20)]
    assert greedy(buffers).peak == lower_bound(buffers)


def test_first_fit_takes_the_lowest_gap_and_best_fit_the_tightest() -> None:
    import numpy as np

    offs = np.array([10, 30], np.int64)  # occupied [10, 20) and [30, 32): gaps [0,10), [20,30)
    sizes = np.array([10, 2], np.int64)
    assert place(5, 1, offs, sizes, best_fit=False) == 0
    assert place(10, 1, offs, sizes, best_fit=True) == 0
    assert place(11, 1, offs, sizes, best_fit=True) == 32
    assert place(4, 8, offs, sizes, best_fit=False) == 0
    assert place(6, 8, offs, sizes, best_fit=False) == 0
    assert place(3, 8, np.array([0], np.int64), np.array([3], np.int64), best_fit=False) == 8


def test_every_named_order_is_a_permutation() -> None:
    arrays = Arrays.of([Buffer(str(i), i % 3, i % 3 + 1 + i % 2, i * 7 % 5) for i in range(9)])
    for order in ORDERS.values():
        assert sorted(order(arrays).tolist()) == list(range(9))


def test_greedy_of_nothing_is_an_empty_packing() -> None:
    assert greedy([]).peak == 0
