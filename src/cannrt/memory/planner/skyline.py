"""Skyline branch and bound: canonical packings built from the lowest point upwards.

Time is cut into sections (between consecutive distinct event times); each section has a
*floor*, the top of the highest buffer placed in it. Buffers are placed in nondecreasing offset
order, so an unplaced buffer can only go at or above the floors of its sections, and the unplaced
buffers of a section must stack above its floor: `floor + demand <= capacity` in every section.

A node takes the lowest *segment* (maximal run of sections at the minimum floor `m` among those
with demand left) and branches on

* each unplaced buffer whose lifetime lies inside the segment, placed at `m` (siblings after it
  may no longer use offset `m` for it: each packing is explored once), then
* a gap: the segment rises to its lower neighbour (no unplaced buffer can rest lower, as every
  buffer lies at 0 or on top of another in a pushed-down packing).

Placing a buffer keeps `floor + demand` unchanged; a gap raises it, which is where the bound
prunes. Identical buffers are placed in index order. All per-node bookkeeping is numpy.
"""

from __future__ import annotations

import time

import numpy as np

from cannrt.memory.planner.buffers import Arrays, IntArray, per_section, section_index, unit_of
from cannrt.memory.planner.buffers import SearchResult as Result

INF = np.int64(2**62)


def search(
    arrays: Arrays,
    capacity: int,
    deadline: float,
    order: str = "size",
    infer: bool = True,
    by_section: bool = False,
    node_limit: int | None = None,
) -> Result:
    """Depth-first search for a packing with every buffer below `capacity` (bytes)."""
    unit = unit_of(arrays, capacity)
    times, first, last = section_index(arrays.lower, arrays.upper)
    cap = capacity // unit
    n = len(arrays)
    live = np.flatnonzero(arrays.size > 0)
    offsets = np.zeros(n, np.int64)
    if live.shape[0] == 0:
        return Result(offsets, False, 0)
    first, last = first[live], last[live]
    size = arrays.size[live] // unit
    align = np.where(arrays.alignment[live] > 1, arrays.alignment[live] // unit, 1)
    k = live.shape[0]
    S = max(len(times) - 1, 0)
    demand = per_section(first, last, size, S)
    if int(demand.max()) > cap:
        return Result(None, True, 0)
    floor = np.zeros(S, np.int64)
    unplaced = np.ones(k, bool)
    forbid = np.full(k, -1, np.int64)
    off = np.zeros(k, np.int64)
    has_align = bool((align > 1).any())
    # identical buffers: only the first unplaced one of a group is a candidate
    key = np.lexsort((align, size, last, first))
    twin = np.full(k, -1, np.int64)
    same = (
        (first[key][1:] == first[key][:-1])
        & (last[key][1:] == last[key][:-1])
        & (size[key][1:] == size[key][:-1])
        & (align[key][1:] == align[key][:-1])
    )
    twin[key[1:][same]] = key[:-1][same]
    has_twin = twin >= 0
    twin_c = np.where(has_twin, twin, 0)
    if order == "size":
        rank = np.lexsort((-(last - first), -size))
    elif order == "length":
        rank = np.lexsort((-size, -(last - first)))
    else:  # area
        rank = np.lexsort((-size, -(last - first) * size))
    prio = np.empty(k, np.int64)
    prio[rank] = np.arange(k)
    first_l, last_l, size_l = first.tolist(), last.tolist(), size.tolist()
    # range-maximum queries over the floor (sparse table), for each buffer's lowest offset
    length = last - first
    lvl = np.zeros(k, np.int64)
    while True:
        more = (1 << (lvl + 1)) <= length
        if not more.any():
            break
        lvl += more
    second = last - (1 << lvl)
    # with alignment the effective-floor inference and the transposition table are not proven
    # sound (offsets round up), so they are switched off; the plain search stays complete
    lookahead = infer and not has_align
    levels = int(lvl.max()) + 1 if lookahead else 1
    table = np.zeros((levels, S), np.int64)
    cover = np.zeros((k if lookahead else 0, S), bool)  # k x S: only with the inference
    for i in range(cover.shape[0]):
        cover[i, first_l[i] : last_l[i]] = True
    window = k > 2000
    by_first = np.argsort(first, kind="stable")
    first_sorted = first[by_first]

    def dead(m: int) -> IntArray | None:
        """True when some section cannot hold its unplaced buffers above their lowest offsets."""
        table[0] = floor
        for j in range(1, levels):
            w = 1 << (j - 1)
            table[j, : S - w] = np.maximum(table[j - 1, : S - w], table[j - 1, w:])
        lo = np.maximum(table[lvl, first], table[lvl, second])
        lo = np.where((lo == m) & (forbid == m), m + 1, lo)
        idx = np.flatnonzero(unplaced)
        eff = np.where(cover[idx], lo[idx, None], INF).min(axis=0)
        eff = np.where(demand > 0, np.maximum(eff, floor), 0)
        if (eff + demand > cap).any():
            return None
        return eff

    nodes = 0
    failed: set[bytes] = set()
    # A frame: (m, a, b, candidates, next index, gap height, undo of the edge that led here)
    stack: list[list[object]] = []

    def expand() -> list[object] | None:
        """Frame for the current state, or None when every buffer is placed."""
        masked = np.where(demand > 0, floor, INF)
        s = int(masked.argmin())
        m = int(masked[s])
        if m >= INF:
            return None
        a, b = _segment(floor, s, m)
        if window:  # buffers starting in [a, b) as a slice of the start order
            w = by_first[np.searchsorted(first_sorted, a) : np.searchsorted(first_sorted, b)]
            okw = unplaced[w] & (last[w] <= b) & (forbid[w] != m)
            okw &= ~has_twin[w] | ~unplaced[twin_c[w]]
            ok = np.zeros(k, bool)
            ok[w[okw]] = True
        else:
            ok = unplaced & (first >= a) & (last <= b) & (forbid != m)
            ok &= ~has_twin | ~unplaced[twin_c]
        gap = min(int(floor[a - 1]) if a > 0 else int(INF), int(floor[b]) if b < S else int(INF))
        if has_align:
            mis = ok & (m % align != 0)
            if mis.any():
                ups = (-(-m // align[mis])) * align[mis]
                gap = min(gap, int(ups.min()))
            ok &= m % align == 0
        eff = dead(m) if lookahead else np.where(demand > 0, floor, 0)
        if eff is None:
            return [m, a, b, [], 1, int(INF), None, None]
        key = (
            b""
            if window or has_align
            else np.packbits(unplaced).tobytes() + eff.tobytes() + np.packbits(forbid == m).tobytes()
        )
        if key and key in failed:
            return [m, a, b, [], 1, int(INF), None, None]
        cands = np.flatnonzero(ok)
        if by_section and cands.shape[0] > 0:
            # branch on the tightest section of the segment that an allowed buffer can cover
            ones = np.ones(cands.shape[0], np.int64)
            coverable = per_section(first[cands] - a, last[cands] - a, ones, b - a) > 0
            slack = np.where(coverable, cap - eff[a:b] - demand[a:b], INF)
            t = a + int(slack.argmin())
            sel = (first[cands] <= t) & (last[cands] > t)
            if not sel.all():
                gap = -1  # the last branch: nothing at m over section t, same floors
            cands = cands[sel]
        cands = cands[np.argsort(prio[cands])]
        return [m, a, b, cands.tolist(), 0, gap, None, key]

    root = expand()
    if root is None:
        return Result(_scatter(n, live, off, unit), False, 0)
    stack.append(root)
    while stack:
        nodes += 1
        if nodes & 255 == 0 and (time.monotonic() >= deadline or (node_limit is not None and nodes > node_limit)):
            return Result(None, False, nodes)
        frame = stack[-1]
        m, a, b, cands, idx, gap, _, _ = frame
        assert isinstance(m, int) and isinstance(a, int) and isinstance(b, int)
        assert isinstance(cands, list) and isinstance(idx, int) and isinstance(gap, int)
        # undo the previous child of this frame
        undo = frame[6]
        if undo is not None:
            assert isinstance(undo, tuple)
            if undo[0] == "place":
                c, saved = undo[1], undo[2]
                floor[first_l[c] : last_l[c]] = saved
                demand[first_l[c] : last_l[c]] += size_l[c]
                unplaced[c] = True
                forbid[c] = m  # later siblings: not at m
            else:
                floor[a:b] = undo[1]
            frame[6] = None
        if idx < len(cands):
            c = cands[idx]
            frame[4] = idx + 1
            lo, hi = first_l[c], last_l[c]
            saved = floor[lo:hi].copy()
            floor[lo:hi] = m + size_l[c]
            demand[lo:hi] -= size_l[c]
            unplaced[c] = False
            off[c] = m
            frame[6] = ("place", c, saved)
        elif idx == len(cands):
            frame[4] = idx + 1
            if gap == -1:
                frame[6] = None
                child = expand()
                assert child is not None
                stack.append(child)
                continue
            if gap >= INF or gap > cap or int(demand[a:b].max()) + gap > cap:
                continue
            saved = floor[a:b].copy()
            floor[a:b] = gap
            frame[6] = ("gap", saved)
        else:
            # frame exhausted: restore forbids set on its candidates and pop
            for c in cands:
                if forbid[c] == m:
                    forbid[c] = -1
            stack.pop()
            if isinstance(frame[7], bytes) and frame[7]:
                if len(failed) > 2_000_000:
                    failed.clear()
                failed.add(frame[7])
            continue
        child = expand()
        if child is None:
            return Result(_scatter(n, live, off, unit), False, nodes)
        stack.append(child)
    return Result(None, True, nodes)


def _segment(floor: IntArray, s: int, m: int) -> tuple[int, int]:
    """Maximal run [a, b) around section `s` with floors at most `m` (searched outwards)."""
    S = floor.shape[0]
    a, b, step = s, s + 1, 16
    while a > 0:
        lo = max(a - step, 0)
        hit = np.flatnonzero(floor[lo:a] > m)
        if hit.shape[0]:
            a = lo + int(hit[-1]) + 1
            break
        a, step = lo, step * 4
    step = 16
    while b < S:
        hi = min(b + step, S)
        hit = np.flatnonzero(floor[b:hi] > m)
        if hit.shape[0]:
            b = b + int(hit[0])
            break
        b, step = hi, step * 4
    return a, b


def _scatter(n: int, live: IntArray, off: IntArray, unit: int) -> IntArray:
    """Offsets of all buffers in bytes (zero-size buffers at 0)."""
    out = np.zeros(n, np.int64)
    out[live] = off * unit
    return out
