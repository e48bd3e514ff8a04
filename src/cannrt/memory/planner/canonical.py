"""Canonical-order branch and bound (the MiniMalloc search, Moffitt, ASPLOS 2023), compiled.

Buffers are placed one at a time in nondecreasing (offset, preorder) order, each at its lowest
offset: the top of the highest placed buffer it shares a time section with, rounded up to its
alignment. Pruning, all sound (the search is complete):

* canonical only: a child below the last placement in that order is skipped;
* dominance: a child at or above the lowest top of any unplaced buffer leaves a gap that buffer
  fits in; "hatless": when a failed child touched no unplaced buffer, its siblings fail too;
* section inference: in every section max(floor, last offset) + unplaced bytes <= capacity, with
  a section's floor raised to the lowest offset of its unplaced buffers;
* dynamic decomposition: once no unplaced buffer crosses a section boundary the two sides are
  independent problems.

The preorders WAT, TAW and TWA (width, area, fullest section; descending) run round robin with a
node limit doubling each round. The search itself is numba code (canonical_jit.py), compiled on
first use and cached next to the source (or in numba's user cache when that is read-only).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from cannrt.memory.planner.buffers import Arrays, IntArray, per_section, section_index
from cannrt.memory.planner.buffers import SearchResult as Result

HEURISTICS = 3
MAX_MEMBERSHIPS = 20_000_000
"""Above this many (buffer, section) or (buffer, overlapping buffer) pairs the search is skipped."""


def available() -> bool:
    """True when the compiled search can be loaded: numba imports and has somewhere to cache
    (next to the source, or its user-wide cache when the install is read-only)."""
    try:
        from cannrt.memory.planner import canonical_jit  # noqa: F401
    except (ImportError, RuntimeError, OSError):  # pragma: no cover - numba is a dependency
        return False
    return True


def fits_in_memory(arrays: Arrays) -> bool:
    """True when the overlap and section tables stay under MAX_MEMBERSHIPS entries."""
    live = arrays.size > 0
    lower, upper = arrays.lower[live], arrays.upper[live]
    _, first, last = section_index(lower, upper)
    return int((last - first).sum()) <= MAX_MEMBERSHIPS and _overlap_pairs(lower, upper) <= MAX_MEMBERSHIPS


def _overlap_pairs(lower: IntArray, upper: IntArray) -> int:
    """Ordered pairs of distinct buffers whose lifetimes intersect."""
    starts = np.sort(lower)
    ends = np.sort(upper)
    # for each buffer: started before its end, minus ended by its start, minus itself
    count = np.searchsorted(starts, upper, "left") - np.searchsorted(ends, lower, "right") - 1
    return int(count.sum())


def warm_up() -> float:
    """Compile (or load from the cache) the search; the seconds it took."""
    began = time.monotonic()
    one = np.ones(2, np.int64)
    tiny = Arrays(np.array([0, 1], np.int64), np.array([2, 3], np.int64), one, one)
    search(tiny, 2, time.monotonic() + 60.0)
    return time.monotonic() - began


_compiled = False


def compiled() -> bool:
    """True once the search was compiled or loaded in this process."""
    return _compiled


def search(
    arrays: Arrays,
    capacity: int,
    deadline: float,
    node_limit: int | None = None,
) -> Result:
    """A packing with every buffer below `capacity`, searched until `deadline` (monotonic).

    The first call in a process compiles or loads the search (see warm_up); callers that must
    not charge that to their deadline call warm_up first.
    """
    global _compiled
    _compiled = True
    from cannrt.memory.planner import canonical_jit as jit

    n = len(arrays)
    offsets = np.zeros(n, np.int64)
    live = np.flatnonzero(arrays.size > 0)
    if live.shape[0] == 0:
        return Result(offsets, False, 0)
    g, st, partitions = _problem(arrays, live, capacity, deadline)
    if int(st[3].max(initial=0)) > capacity:
        return Result(None, True, 0)
    fresh = tuple(array.copy() for array in st)
    counters = st[7]
    limit = live.shape[0]
    nodes = 0
    while True:
        limit = 2 * limit if node_limit is None else min(2 * limit, node_limit)
        for heuristic in range(HEURISTICS):
            for array, initial in zip(st, fresh, strict=True):
                array[:] = initial
            counters[0] = limit
            counters[1] = nodes
            status = jit.OK
            for part, lo, hi in partitions:
                status = jit.run(g, st, part, lo, hi, heuristic)
                if status != jit.OK:
                    break
            nodes = int(counters[1])
            if status == jit.OK:
                offsets[live] = st[5]
                return Result(offsets, False, nodes)
            if status == jit.NOT_FOUND:
                return Result(None, True, nodes)
            if status == jit.TIMEOUT or time.monotonic() > deadline:
                return Result(None, False, nodes)
        if node_limit is not None and limit >= node_limit:
            return Result(None, False, nodes)


def _problem(arrays: Arrays, live: IntArray, capacity: int, deadline: float) -> tuple[Any, Any, Any]:
    """The compiled search's inputs: buffers as section runs, overlaps and section members."""
    lower, upper = arrays.lower[live], arrays.upper[live]
    size = arrays.size[live]
    align = arrays.alignment[live]
    times, first, last = section_index(lower, upper)
    k = live.shape[0]
    S = max(len(times) - 1, 1)
    ov_ptr, ov_buf = _overlaps(first, last)
    sec_ptr, sec_buf = _section_members(first, last, S)
    total = per_section(first, last, size, S)
    # cuts[s]: buffers crossing the boundary between sections s and s + 1
    spans = last - first > 1
    cuts = per_section(first[spans], last[spans] - 1, np.ones(int(spans.sum()), np.int64), S)
    width = upper - lower
    area = size * width
    limits = (np.int64(capacity), float(deadline))
    g = (first, last, size, align, area, width, ov_ptr, ov_buf, sec_ptr, sec_buf, *limits)
    st = (
        np.full(k, -1, np.int64),  # offset (-1: unplaced)
        np.zeros(k, np.int64),  # lowest offset
        np.zeros(S, np.int64),  # floor
        total,  # unplaced bytes per section
        cuts,
        np.zeros(k, np.int64),  # solution
        np.zeros(S, np.int64),  # stamp
        np.zeros(3, np.int64),  # nodes left, nodes visited, placements
    )
    return g, st, _partitions(first, last, cuts, S)


def _overlaps(first: IntArray, last: IntArray) -> tuple[IntArray, IntArray]:
    """For each buffer, the buffers sharing a section with it (CSR, rows in buffer order)."""
    k = first.shape[0]
    cols: list[IntArray] = []
    ptr = np.zeros(k + 1, np.int64)
    step = max(1, 4_000_000 // max(k, 1))
    for lo in range(0, k, step):
        rows = np.arange(lo, min(lo + step, k))
        hit = (first[None, :] < last[rows, None]) & (first[rows, None] < last[None, :])
        hit[np.arange(rows.shape[0]), rows] = False
        i, j = np.nonzero(hit)
        np.add.at(ptr, rows[i] + 1, 1)
        cols.append(j.astype(np.int64))
    j = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    return np.cumsum(ptr), j


def _section_members(first: IntArray, last: IntArray, S: int) -> tuple[IntArray, IntArray]:
    """For each section, the buffers living in it (CSR)."""
    spans = last - first
    buf = np.repeat(np.arange(first.shape[0], dtype=np.int64), spans)
    starts = np.repeat(np.cumsum(spans) - spans, spans)
    sec = np.repeat(first, spans) + (np.arange(buf.shape[0]) - starts)
    order = np.argsort(sec, kind="stable")
    ptr = np.zeros(S + 1, np.int64)
    np.add.at(ptr, sec + 1, 1)
    return np.cumsum(ptr), buf[order]


def _partitions(first: IntArray, last: IntArray, cuts: IntArray, S: int) -> list[tuple[IntArray, int, int]]:
    """Independent groups of buffers: (members, first section, end section)."""
    out = []
    lo = 0
    for hi in [*(np.flatnonzero(cuts[:-1] == 0) + 1).tolist(), S]:
        members = np.flatnonzero((first < hi) & (last > lo)).astype(np.int64)
        if members.shape[0]:
            out.append((members, lo, hi))
        lo = hi
    return out
