"""The compiled core of the canonical search (see canonical.py): numba, no Python objects.

Arrays hold buffers by index (0..n-1) and time sections by index (0..S-1). The search is an
explicit stack of frames (one int64 row each) so that it needs no recursion, which numba can
neither cache nor type across several functions.

g  = (first, last, size, align, area, width, ov_ptr, ov_buf, sec_ptr, sec_buf, cap, deadline)
st = (offset, lowest, floor, total, cuts, solution, stamp, counters)
counters = [nodes left, nodes visited, placements]
"""
# mypy: ignore-errors

from __future__ import annotations

import time

import numba
import numpy as np

OK, NOT_FOUND, ABORTED, TIMEOUT = 0, 1, 2, 3
INF = 2**62
CHECK_EVERY = 1023  # nodes between two reads of the clock (a power of two, minus one)
SEARCH, SPLIT = 0, 1
# frame fields
KIND, PRE, PLEN, SLO, SHI, ORD, U, J, MINOFF, MINP, MINH, BUF = range(12)
OVTOP, FLTOP, TOP_PRE, TOP_ORD, CUT, NCUT, C, TMAX, HATLESS = range(12, 21)
FIELDS = 21


@numba.njit(cache=True)
def now():
    """time.monotonic() from compiled code."""
    with numba.objmode(t="float64"):
        t = time.monotonic()
    return t


@numba.njit(cache=True)
def preorder(bufs, heuristic, width, area, first, last, total):
    """`bufs` by the heuristic's keys, each descending, ties by index.

    0 = WAT, 1 = TAW, 2 = TWA: W = lifetime width, A = area, T = the largest unplaced total
    among the buffer's sections.
    """
    m = bufs.shape[0]
    vals = np.empty((3, m), np.int64)
    for j in range(m):
        b = bufs[j]
        vals[0, j] = width[b]
        vals[1, j] = area[b]
        t = 0
        for s in range(first[b], last[b]):
            t = max(t, total[s])
        vals[2, j] = t
    order = (0, 1, 2) if heuristic == 0 else ((2, 1, 0) if heuristic == 1 else (2, 0, 1))
    n = width.shape[0] + 1
    composite = bufs.copy()
    scale = np.int64(n)
    for pos in range(2, -1, -1):  # least significant key last: ranks times growing scales
        row = vals[order[pos]]
        uniq = np.unique(row)
        for j in range(m):
            composite[j] += (uniq.shape[0] - 1 - np.searchsorted(uniq, row[j])) * scale
        scale *= n
    return bufs[np.argsort(composite)]


@numba.njit(cache=True)
def members(part, offset, first, last, lo, hi):
    """Unplaced buffers of `part` living in sections [lo, hi)."""
    sub = np.empty(part.shape[0], np.int64)
    m = 0
    for o in part:
        if offset[o] < 0 and first[o] < hi and lo < last[o]:
            sub[m] = o
            m += 1
    return sub[:m]


@numba.njit(cache=True)
def grow(pool, need):
    """`pool` with room for `need` entries (doubled when full)."""
    if need <= pool.shape[0]:
        return pool
    out = np.empty(max(need, 2 * pool.shape[0]), pool.dtype)
    out[: pool.shape[0]] = pool
    return out


@numba.njit(cache=True)
def grow_log(log, need):
    """`log` (rows of two) with room for `need` rows (doubled when full)."""
    if need <= log.shape[0]:
        return log
    out = np.empty((max(need, 2 * log.shape[0]), 2), log.dtype)
    out[: log.shape[0]] = log
    return out


@numba.njit(cache=True)
def push_search(frames, d, pre, plen, lo, hi, ordering, u, min_offset, min_pidx, pre_top, ord_top):
    """Frame d: a search of a partition, not entered yet."""
    f = frames[d]
    f[KIND] = SEARCH
    f[PRE] = pre
    f[PLEN] = plen
    f[SLO] = lo
    f[SHI] = hi
    f[ORD] = ordering
    f[U] = u
    f[J] = -1
    f[MINOFF] = min_offset
    f[MINP] = min_pidx
    f[BUF] = -1
    f[TOP_PRE] = pre_top
    f[TOP_ORD] = ord_top


@numba.njit(cache=True)
def place(g, st, f, b, off, ov_log, ov_top, fl_log, fl_top):
    """Put `b` at `off`: raise its neighbours' lowest offsets and the floors. New log tops."""
    first, last, size, align = g[0], g[1], g[2], g[3]
    ov_ptr, ov_buf, sec_ptr, sec_buf = g[6], g[7], g[8], g[9]
    offset, lowest, floor, total, stamp, counters = st[0], st[1], st[2], st[3], st[6], st[7]
    offset[b] = off
    height = off + size[b]
    counters[2] += 1
    mark = counters[2]
    f[HATLESS] = 1
    for q in range(ov_ptr[b], ov_ptr[b + 1]):
        o = ov_buf[q]
        if offset[o] >= 0:
            continue
        f[HATLESS] = 0
        if lowest[o] >= height:
            continue
        ov_log[ov_top, 0] = o
        ov_log[ov_top, 1] = lowest[o]
        ov_top += 1
        rem = height % align[o]
        lowest[o] = height if rem == 0 else height + align[o] - rem
        for s in range(first[o], last[o]):
            stamp[s] = mark
    for s in range(first[b], last[b]):
        fl_log[fl_top, 0] = s
        fl_log[fl_top, 1] = floor[s]
        fl_top += 1
        floor[s] = height
        total[s] -= size[b]
    # a section's floor is at least the lowest offset of its unplaced buffers
    for s in range(f[SLO], f[SHI]):
        if stamp[s] != mark:
            continue
        low = INF
        for q in range(sec_ptr[s], sec_ptr[s + 1]):
            o = sec_buf[q]
            if offset[o] < 0 and lowest[o] < low:
                low = lowest[o]
                if low <= floor[s]:
                    break
        if low < INF and floor[s] < low:
            fl_log[fl_top, 0] = s
            fl_log[fl_top, 1] = floor[s]
            fl_top += 1
            floor[s] = low
    return ov_top, fl_top


@numba.njit(cache=True)
def undo(g, st, f, ov_log, ov_top, fl_log, fl_top):
    """Take back the placement of frame `f`. New log tops."""
    first, last, size = g[0], g[1], g[2]
    offset, lowest, floor, total, cuts = st[0], st[1], st[2], st[3], st[4]
    b = f[BUF]
    for s in range(first[b], last[b] - 1):
        cuts[s] += 1
    while fl_top > f[FLTOP]:
        fl_top -= 1
        floor[fl_log[fl_top, 0]] = fl_log[fl_top, 1]
    for s in range(first[b], last[b]):
        total[s] += size[b]
    while ov_top > f[OVTOP]:
        ov_top -= 1
        lowest[ov_log[ov_top, 0]] = ov_log[ov_top, 1]
    offset[b] = -1
    f[BUF] = -1
    return ov_top, fl_top


@numba.njit(cache=True)
def fits(st, f, off, cap):
    """Section inference: max(off, floor) + unplaced bytes within capacity everywhere."""
    floor, total = st[2], st[3]
    for s in range(f[SLO], f[SHI]):  # noqa: SIM110 - a plain loop compiles best
        if max(off, floor[s]) + total[s] > cap:
            return False
    return True


@numba.njit(cache=True)
def enter(st, f, pre_pool, ord_pool, ord_top, keys, size, cap):
    """Order the frame's unplaced buffers by (lowest offset, preorder); their count."""
    offset, lowest, total = st[0], st[1], st[3]
    pbase = f[PRE]
    npre = f[PLEN] + 1
    u = 0
    for j in range(f[U]):
        p = ord_pool[f[ORD] + j]
        b = pre_pool[pbase + p]
        if offset[b] < 0:
            ord_pool[ord_top + u] = p
            keys[u] = lowest[b] * npre + p
            u += 1
    if u == 0:
        return 0
    ord_pool[ord_top : ord_top + u] = ord_pool[ord_top : ord_top + u][np.argsort(keys[:u])]
    f[ORD] = ord_top
    f[U] = u
    lowest_top = cap + 1
    for j in range(u):
        b = pre_pool[pbase + ord_pool[ord_top + j]]
        lowest_top = min(lowest_top, lowest[b] + size[b])
    f[MINH] = lowest_top
    # placing at `off` keeps max(off, floor) + unplaced bytes of every section: a candidate
    # above capacity - (fullest section) fails, and so does every later one
    fullest = 0
    for s in range(f[SLO], f[SHI]):
        fullest = max(fullest, total[s])
    f[TMAX] = fullest
    f[J] = 0
    return u


@numba.njit(cache=True)
def run(g, st, part, sec_lo, sec_hi, heuristic):
    """Depth-first search of one partition: OK, NOT_FOUND, ABORTED or TIMEOUT.

    Frames: SEARCH (try the canonical candidates one by one) and SPLIT (solve the independent
    pieces left after a placement, in turn). A popped frame hands `result` to the one below.
    """
    first, last, size, area, width, cap, deadline = g[0], g[1], g[2], g[4], g[5], g[10], g[11]
    offset, total, cuts, solution, counters = st[0], st[3], st[4], st[5], st[7]
    n = first.shape[0]
    frames = np.zeros((2 * n + 4, FIELDS), np.int64)
    pre_pool = np.empty(4 * n + 16, np.int64)
    ord_pool = np.empty(4 * n + 16, np.int64)
    cut_pool = np.empty(4 * n + 16, np.int64)
    ov_log = np.empty((4 * n + 16, 2), np.int64)
    fl_log = np.empty((4 * n + 16, 2), np.int64)
    keys = np.empty(n, np.int64)
    cut_top = ov_top = fl_top = 0
    pre = preorder(part, heuristic, width, area, first, last, total)
    m = pre.shape[0]
    pre_pool[:m] = pre
    ord_pool[:m] = np.arange(m)
    pre_top = ord_top = m
    push_search(frames, 0, 0, m, sec_lo, sec_hi, 0, m, 0, 0, 0, m)
    d = 0
    result = -1
    while d >= 0:
        f = frames[d]
        if f[KIND] == SPLIT:
            if result == -1 or result == OK:
                # the next non-empty piece, searched from scratch with its own preorder
                result = OK
                while f[C] < f[NCUT]:
                    lo = cut_pool[f[CUT] + f[C]]
                    hi = cut_pool[f[CUT] + f[C] + 1]
                    f[C] += 1
                    sub = members(pre_pool[f[PRE] : f[PRE] + f[PLEN]], offset, first, last, lo, hi)
                    if sub.shape[0] == 0:
                        continue
                    sub = preorder(sub, heuristic, width, area, first, last, total)
                    m = sub.shape[0]
                    pre_pool = grow(pre_pool, pre_top + m)
                    ord_pool = grow(ord_pool, ord_top + m)
                    pre_pool[pre_top : pre_top + m] = sub
                    ord_pool[ord_top : ord_top + m] = np.arange(m)
                    push_search(frames, d + 1, pre_top, m, lo, hi, ord_top, m, 0, 0, pre_top, ord_top)
                    pre_top += m
                    ord_top += m
                    result = -1
                    break
                if result == -1:
                    d += 1
                    continue
            cut_top = f[CUT]
            d -= 1
            continue
        if f[J] < 0:
            counters[0] -= 1
            if counters[0] < 0:
                return ABORTED
            counters[1] += 1
            if (counters[1] & CHECK_EVERY) == 0 and now() > deadline:
                return TIMEOUT
            ord_pool = grow(ord_pool, ord_top + f[U])
            u = enter(st, f, pre_pool, ord_pool, ord_top, keys, size, cap)
            if u == 0:  # a leaf: every buffer of the partition is placed
                result = OK
                pre_top, ord_top = f[TOP_PRE], f[TOP_ORD]
                d -= 1
                continue
            ord_top += u
            result = -1
        if f[BUF] >= 0:  # back from the child of the current placement
            ov_top, fl_top = undo(g, st, f, ov_log, ov_top, fl_log, fl_top)
            if result != NOT_FOUND:
                pre_top, ord_top = f[TOP_PRE], f[TOP_ORD]
                d -= 1
                continue
            if f[HATLESS]:
                f[J] = f[U]  # it touched no unplaced buffer: placing another first cannot help
        descended = False
        while f[J] < f[U]:
            p = ord_pool[f[ORD] + f[J]]
            f[J] += 1
            b = pre_pool[f[PRE] + p]
            off = st[1][b]
            if off < f[MINOFF] or (off == f[MINOFF] and p < f[MINP]):
                continue  # not canonical: this packing is reached in another order
            if off >= f[MINH] or off + f[TMAX] > cap:
                f[J] = f[U]  # dominated or over capacity, and so is every later candidate
                break
            f[BUF] = b
            f[OVTOP] = ov_top
            f[FLTOP] = fl_top
            ov_log = grow_log(ov_log, ov_top + g[6][b + 1] - g[6][b])
            fl_log = grow_log(fl_log, fl_top + last[b] - first[b] + f[SHI] - f[SLO])
            ov_top, fl_top = place(g, st, f, b, off, ov_log, ov_top, fl_log, fl_top)
            solution[b] = off
            # boundaries that no unplaced buffer crosses any more cut the rest into pieces
            cut_pool = grow(cut_pool, cut_top + last[b] - first[b] + 2)
            ncut = 1
            cut_pool[cut_top] = f[SLO]
            for s in range(first[b], last[b] - 1):
                cuts[s] -= 1
                if cuts[s] == 0:
                    cut_pool[cut_top + ncut] = s + 1
                    ncut += 1
            descended = True
            if not fits(st, f, off, cap):
                result = NOT_FOUND  # undone on the next turn of this frame
                break
            if ncut == 1:
                push_search(frames, d + 1, f[PRE], f[PLEN], f[SLO], f[SHI], f[ORD], f[U], off, p, pre_top, ord_top)
            else:
                cut_pool[cut_top + ncut] = f[SHI]
                child = frames[d + 1]
                child[KIND] = SPLIT
                child[PRE] = f[PRE]
                child[PLEN] = f[PLEN]
                child[CUT] = cut_top
                child[NCUT] = ncut
                child[C] = 0
                cut_top += ncut + 1
            d += 1
            result = -1
            break
        if descended:
            continue
        result = NOT_FOUND
        pre_top, ord_top = f[TOP_PRE], f[TOP_ORD]
        d -= 1
    return result
