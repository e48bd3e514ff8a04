"""2-D max pooling as one numba pass over the input (the CANN MaxPoolV3 kernel's vector loop).

numpy's separable reduction (Window.reduce) makes a pass per kernel offset and axis over strided
views, about 1 ms for 64 x 111 x 111 -> 55 x 55, memory-bound; this pass reads each input row
while it is in cache: 0.44-0.49 against 0.83-0.92 ms there, 0.35-0.38 against 0.41-0.44 ms at
128 x 55 x 55 (same runs). On narrower planes its per-row steps cost more than they save
(256 x 27 x 27: 0.30 against 0.20 ms), so the kernel takes it from MIN_WIDTH columns. Pads and
the ceil-mode edge never take part (their taps are skipped), NaN propagates as np.maximum
propagates it, and of equal values the later tap wins, as np.maximum keeps its second operand
(the numpy path combines a padded window's taps in another order: there a tied zero's sign may
differ). Its planes run on the thread team (team.py), in halves of at least TEAM_PLANE_ELEMENTS
input elements each. pool.py imports this module (and numba) at its first max pooling.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import prange

from cannrt.kernels.nn.jit import LOOP_DTYPES
from cannrt.kernels.nn.team import team_loop

MIN_WIDTH = 48  # input columns from which maxpool_into beats the separable numpy reduction
TEAM_PLANE_ELEMENTS = 1 << 16  # input elements per part of the planes a team thread takes


@numba.njit(cache=True, nogil=True)
def _maxpool_planes(x: np.ndarray, y: np.ndarray, geometry: Any, p0: int, p1: int) -> None:
    """y[p, oh, ow] = the max over the window taps (i, j) inside x of
    x[p, oh * sh + i * dh - ph, ow * sw + j * dw - pw], -inf where no tap is inside; x is
    (planes, H, W), y (planes, OH, OW), both C-contiguous. Per output row: the max over the
    window's input rows (row_max, contiguous), then per column tap a contiguous run of it (for
    stride 2 of its even or odd elements, split first: numba does not vectorise a strided read).
    Planes [p0, p1)."""
    kh, kw, sh, sw, dh, dw, ph, pw = geometry
    height, width = x.shape[1], x.shape[2]
    out_h, out_w = y.shape[1], y.shape[2]
    row_max = np.empty(width, dtype=x.dtype)
    evens = np.empty((width + 1) // 2, dtype=x.dtype)
    odds = np.empty(width // 2, dtype=x.dtype)
    half = width // 2
    for p in range(p0, p1):
        plane = x[p]
        for oh in range(out_h):
            target = y[p, oh]
            i0 = 0
            while i0 < kh and not (0 <= oh * sh + i0 * dh - ph < height):
                i0 += 1
            if i0 == kh:
                for o in range(out_w):
                    target[o] = -np.inf
                continue
            first = plane[oh * sh + i0 * dh - ph]
            for w in range(width):
                row_max[w] = first[w]
            for i in range(i0 + 1, kh):
                ih = oh * sh + i * dh - ph
                if ih < height and ih >= 0:
                    src = plane[ih]
                    for w in range(width):
                        a = row_max[w]
                        b = src[w]
                        row_max[w] = a if (a > b or a != a) else b
            for o in range(out_w):
                target[o] = -np.inf
            if sw == 2:
                for q in range(half):
                    evens[q] = row_max[2 * q]
                    odds[q] = row_max[2 * q + 1]
                if width % 2:
                    evens[half] = row_max[width - 1]
            for j in range(kw):
                shift = j * dw - pw
                lo = 0 if shift >= 0 else min(out_w, (sw - 1 - shift) // sw)
                hi = 0 if width - 1 - shift < 0 else min(out_w, (width - 1 - shift) // sw + 1)
                if hi <= lo:
                    continue
                if sw <= 2:
                    if sw == 1:
                        src, off = row_max, shift
                    elif shift % 2 == 0:
                        src, off = evens, shift // 2
                    else:
                        src, off = odds, shift // 2
                    into = target[lo:hi]
                    runs = src[lo + off : hi + off]
                    for o in range(hi - lo):
                        a = into[o]
                        b = runs[o]
                        into[o] = a if (a > b or a != a) else b
                else:
                    for o in range(lo, hi):
                        a = target[o]
                        b = row_max[o * sw + shift]
                        target[o] = a if (a > b or a != a) else b


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
    bounds = np.linspace(0, planes, parts + 1).astype(np.int64)
    _maxpool_parts(float(x.size * kh * kw), x, y, (kh, kw, sh, sw, dh, dw, ph, pw), bounds)
