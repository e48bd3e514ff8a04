"""2-D max pooling as one numba pass over the input (the CANN MaxPoolV3 kernel's vector loop).

numpy's separable reduction (Window.reduce) makes a pass per kernel offset and axis over strided
views, memory-bound; this pass reads each input row while it is in cache, the rows of a window
merged in one pass and its columns in another, both vectorised. One thread, against numpy:
64 x 111 x 111 -> 55 x 55 (3x3/2) 0.17 ms against 0.83-0.92, 128 x 55 x 55 0.095, 256 x 27 x 27
0.07-0.08 against 0.14, 512 x 14 x 14 0.045-0.05 against 0.10, 192 x 28 x 28 (3x3/1, pad 1) 0.13
against 0.39, 1 x 47 x 47 9 against 19 us: it takes every width (MIN_WIDTH, which tests raise to
compare with numpy). Pads and the ceil-mode edge never take part (their taps are skipped), NaN
propagates as np.maximum propagates it, and of equal values the later tap wins, as np.maximum
keeps its second operand (the numpy path combines a padded window's taps in another order:
there a tied zero's sign may differ). Its planes run on the thread team (team.py), in halves of
at least TEAM_PLANE_ELEMENTS input elements each. pool.py imports this module (and numba) at its
first max pooling.
"""

from __future__ import annotations

import functools
from typing import Any

import numba
import numpy as np
from numba import prange

from cannrt.kernels.nn.jit import LOOP_DTYPES
from cannrt.kernels.nn.team import team_loop

MIN_WIDTH = 1  # input columns from which maxpool_into takes a pooling (every width is faster)
TEAM_PLANE_ELEMENTS = 1 << 16  # input elements per part of the planes a team thread takes


ONE, TWO = np.uint64(1), np.uint64(2)  # unsigned index arithmetic: no wraparound test in the loops


@numba.njit(inline="always")
def _max(a: Any, b: Any) -> Any:
    """np.maximum(a, b): a NaN wins (the earlier one), and of equal values the later, b."""
    return a if (a > b or a != a) else b


@numba.njit(inline="always")
def _edge(row_max: np.ndarray, start: int, kw: int, dw: int) -> Any:
    """The max of row_max over the taps start + j * dw that lie in it, -inf if none does."""
    best = -np.inf
    for j in range(kw):
        col = start + j * dw
        if 0 <= col < row_max.size:
            best = _max(best, row_max[col])
    return best


@numba.njit(inline="always")
def _column_bounds(width: int, out_w: int, kw: int, sw: int, dw: int, pw: int) -> tuple[int, int]:
    """The outputs [lo, hi) of a row whose column taps all lie in its width."""
    last = width - 1 - (kw - 1) * dw + pw  # the last such output: last // sw
    lo = min(out_w, (pw + sw - 1) // sw)
    return lo, (max(lo, min(out_w, last // sw + 1)) if last >= 0 else lo)


@numba.njit(inline="always")
def _columns(row_max: np.ndarray, target: np.ndarray, geometry: Any, inner_lo: int, inner_hi: int) -> None:
    """target[o] = the max of row_max over output o's column taps: in one pass for the outputs
    [inner_lo, inner_hi), whose taps all lie in the row, with the strides and tap counts of 3x3/2,
    3x3/1 and 2x2/2 windows spelled out (LLVM vectorises a read at a constant stride, not at a
    variable one; no slices: numba types a slice's layout as any), and tap by tap at the edges."""
    kw, sw, dw, pw = geometry[1], geometry[3], geometry[5], geometry[7]
    out_w = target.size
    n_inner, first = np.uint64(inner_hi - inner_lo), np.uint64(inner_lo)
    base, step = np.uint64(inner_lo * sw - pw), np.uint64(sw)
    for o in range(inner_lo):
        target[o] = _edge(row_max, o * sw - pw, kw, dw)
    for o in range(inner_hi, out_w):
        target[o] = _edge(row_max, o * sw - pw, kw, dw)
    if dw == 1 and kw == 3 and sw == 2:
        for o in range(n_inner):
            q = base + TWO * o
            target[first + o] = _max(_max(row_max[q], row_max[q + ONE]), row_max[q + TWO])
    elif dw == 1 and kw == 3 and sw == 1:
        for o in range(n_inner):
            q = base + o
            target[first + o] = _max(_max(row_max[q], row_max[q + ONE]), row_max[q + TWO])
    elif dw == 1 and kw == 2 and sw == 2:
        for o in range(n_inner):
            q = base + TWO * o
            target[first + o] = _max(row_max[q], row_max[q + ONE])
    else:
        for o in range(n_inner):
            target[first + o] = row_max[base + o * step]
        for j in range(1, kw):
            shift = base + np.uint64(j * dw)
            for o in range(n_inner):
                target[first + o] = _max(target[first + o], row_max[shift + o * step])


@numba.njit(cache=True, nogil=True)
def _row(x: np.ndarray, y: np.ndarray, p: int, oh: int, row_max: np.ndarray, geometry: Any, lo: int, hi: int) -> None:
    """Output row oh of plane p, its input rows merged one by one."""
    kh, sh, dh, ph = geometry[0], geometry[2], geometry[4], geometry[6]
    found = False
    for i in range(kh):
        ih = oh * sh + i * dh - ph
        if 0 <= ih < x.shape[1]:
            for w in range(np.uint64(x.shape[2])):
                row_max[w] = _max(row_max[w], x[p, ih, w]) if found else x[p, ih, w]
            found = True
    if found:
        _columns(row_max, y[p, oh], geometry, lo, hi)
    else:
        y[p, oh, :] = -np.inf


@numba.njit(cache=True, nogil=True)
def _maxpool_planes(x: np.ndarray, y: np.ndarray, geometry: Any, p0: int, p1: int) -> None:
    """y[p, oh, ow] = the max over the window taps (i, j) inside x of
    x[p, oh * sh + i * dh - ph, ow * sw + j * dw - pw], -inf where no tap is inside; x is
    (planes, H, W), y (planes, OH, OW), both C-contiguous. Per output row: the max over the
    window's input rows (row_max), then over its columns (_columns). The rows of a 2- or 3-row
    window that lie in x take one pass, in a loop of their own with its row views made on every path:
    a view made in a branch costs numba two atomic reference counts, and indexing x whole its
    index arithmetic (128 x 55 x 55: 0.09 ms here, 0.19 and 0.11 ms so). Planes [p0, p1)."""
    kh, kw, sh, sw, dh, dw, ph, pw = geometry
    height, width = x.shape[1], x.shape[2]
    out_h = y.shape[1]
    row_max = np.empty(width, dtype=x.dtype)
    n_w = np.uint64(width)
    col_lo, col_hi = _column_bounds(width, y.shape[2], kw, sw, dw, pw)
    row_lo, row_hi = _column_bounds(height, out_h, kh, sh, dh, ph)  # the rows alike
    if kh not in (2, 3):
        row_hi = row_lo
    for p in range(p0, p1):
        if kh == 3:
            for oh in range(row_lo, row_hi):
                r0, r1, r2, target = x[p, oh * sh - ph], x[p, oh * sh - ph + dh], x[p, oh * sh - ph + 2 * dh], y[p, oh]
                for w in range(n_w):
                    row_max[w] = _max(_max(r0[w], r1[w]), r2[w])
                _columns(row_max, target, geometry, col_lo, col_hi)
        else:
            for oh in range(row_lo, row_hi):
                r0, r1, target = x[p, oh * sh - ph], x[p, oh * sh - ph + dh], y[p, oh]
                for w in range(n_w):
                    row_max[w] = _max(r0[w], r1[w])
                _columns(row_max, target, geometry, col_lo, col_hi)
        for oh in range(row_lo):  # the others, tap by tap
            _row(x, y, p, oh, row_max, geometry, col_lo, col_hi)
        for oh in range(row_hi, out_h):
            _row(x, y, p, oh, row_max, geometry, col_lo, col_hi)


def takes(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether maxpool_into pools x (N, C, H, W) into y: one float dtype of LOOP_DTYPES, both
    C-contiguous, non-empty, at least MIN_WIDTH input columns."""
    return (
        x.ndim == y.ndim == 4
        and x.dtype == y.dtype
        and x.dtype in LOOP_DTYPES
        and x.shape[3] >= MIN_WIDTH
        and y.size > 0
        and x.flags.c_contiguous
        and y.flags.c_contiguous
    )


@team_loop
def _maxpool_parts(x: np.ndarray, y: np.ndarray, geometry: Any, bounds: np.ndarray) -> None:
    """_maxpool_planes over the parts [bounds[t], bounds[t + 1]) of the planes."""
    for t in prange(bounds.size - 1):
        _maxpool_planes(x, y, geometry, bounds[t], bounds[t + 1])


def maxpool_into(x: np.ndarray, y: np.ndarray, window: Any) -> None:
    """y = the 2-D max pooling of x over window (a Window of two spatial axes): x (planes, H, W)
    and y (planes, OH, OW), C-contiguous, of one float dtype."""
    (kh, kw), (sh, sw), (dh, dw) = window.kernel, window.strides, window.dilations
    ph, pw = window.pads_begin
    planes = x.shape[0]
    parts = max(1, min(2, planes, x.size // TEAM_PLANE_ELEMENTS))
    _maxpool_parts(float(x.size * kh * kw), x, y, (kh, kw, sh, sw, dh, dw, ph, pw), _bounds(planes, parts))


@functools.lru_cache(maxsize=256)
def _bounds(planes: int, parts: int) -> np.ndarray:
    """The planes' parts [bounds[t], bounds[t + 1]) (one array per pair: np.linspace cost 5-10 us a call)."""
    return np.array([planes * t // parts for t in range(parts + 1)], np.int64)
