"""Fast greedy packings: several buffer orders times first-fit / best-fit, keep the best."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cannrt.memory.planner.buffers import Arrays, Buffer, IntArray, Packing, validate

INF = np.int64(2**62)


@dataclass(frozen=True)
class Conflicts:
    """Finds the buffers whose lifetimes intersect a given one, without storing the graph.

    Buffers are sorted by start; those live with buffer i lie in one window of that order:
    from the first whose running maximum end passes i's start, to the last starting before
    i's end. The window is filtered by end > i's start.
    """

    order: IntArray
    starts: IntArray
    ends: IntArray
    reach: IntArray
    lower: IntArray
    upper: IntArray

    def of(self, i: int) -> IntArray:
        """Indices of the buffers live at some time together with buffer `i`."""
        lo, up = self.lower[i], self.upper[i]
        first = int(np.searchsorted(self.reach, lo, side="right"))
        last = int(np.searchsorted(self.starts, up, side="left"))
        window = self.order[first:last]
        hits: IntArray = window[self.ends[first:last] > lo]
        others: IntArray = hits[hits != i]
        return others


def conflicts(arrays: Arrays) -> Conflicts:
    """Index the buffers by start time for `Conflicts.of` queries (O(n log n))."""
    order = np.argsort(arrays.lower, kind="stable")
    ends = arrays.upper[order]
    reach = np.maximum.accumulate(ends) if len(ends) else ends
    return Conflicts(order, arrays.lower[order], ends, reach, arrays.lower, arrays.upper)


def place(size: int, align: int, offs: IntArray, sizes: IntArray, best_fit: bool) -> int:
    """Lowest (or tightest) aligned offset for `size` bytes avoiding [offs, offs + sizes)."""
    if offs.shape[0] == 0:
        return 0
    order = np.argsort(offs, kind="stable")
    starts = offs[order]
    tops = np.maximum.accumulate(starts + sizes[order])
    gap_lo = np.concatenate(([0], tops))
    gap_hi = np.concatenate((starts, [INF]))
    cand = -(-gap_lo // align) * align
    fits = np.flatnonzero(cand + size <= gap_hi)
    if not best_fit:
        return int(cand[fits[0]])
    k = fits[np.argmin(gap_hi[fits] - gap_lo[fits])]
    return int(cand[k])


def pack_in_order(arrays: Arrays, graph: Conflicts, order: IntArray, best_fit: bool) -> IntArray:
    """Place buffers one by one in `order`, each against its already-placed neighbours."""
    n = len(arrays)
    offsets = np.zeros(n, np.int64)
    placed = np.zeros(n, bool)
    size, align = arrays.size, arrays.alignment
    for i in order.tolist():
        nb = graph.of(i)
        nb = nb[placed[nb] & (size[nb] > 0)]
        offsets[i] = place(int(size[i]), int(align[i]), offsets[nb], size[nb], best_fit)
        placed[i] = True
    return offsets


OrderFn = Callable[[Arrays], IntArray]


def _by(*keys: IntArray) -> IntArray:
    """Indices sorted by descending keys (first key most significant)."""
    return np.lexsort(tuple(-k for k in reversed(keys)))


ORDERS: dict[str, OrderFn] = {
    "size": lambda a: _by(a.size, a.upper - a.lower),
    "area": lambda a: _by(a.size * (a.upper - a.lower), a.size),
    "length": lambda a: _by(a.upper - a.lower, a.size),
    "start": lambda a: np.lexsort((-a.size, a.lower)),
}


def greedy(
    buffers: Sequence[Buffer],
    orders: Sequence[str] = tuple(ORDERS),
    rules: Sequence[bool] = (False, True),
) -> Packing:
    """Best validated packing over the given orders and placement rules (best_fit flags)."""
    arrays = Arrays.of(buffers)
    graph = conflicts(arrays)
    best: IntArray | None = None
    best_peak, best_name = 0, ""
    for name in orders:
        order = ORDERS[name](arrays)
        for best_fit in rules:
            offs = pack_in_order(arrays, graph, order, best_fit)
            peak = int((offs + arrays.size).max(initial=0))
            if best is None or peak < best_peak:
                best, best_peak = offs, peak
                best_name = f"greedy-{name}-{'best' if best_fit else 'first'}-fit"
    assert best is not None or not buffers
    offsets = tuple(int(x) for x in (best if best is not None else []))
    validate(buffers, offsets)
    return Packing(tuple(buffers), offsets, solver=best_name or "greedy")


def greedy_by_size(buffers: Sequence[Buffer]) -> Packing:
    """The plain baseline: largest buffer first, each at the lowest offset that fits."""
    return greedy(buffers, orders=("size",), rules=(False,))
