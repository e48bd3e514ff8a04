"""Convolution as im2col + one BLAS product per item, in numba, on a thread team (team.py).

Layout: x (N, C, S) with S the input's spatial extent, w (G, Mg, K) with K = Cg * taps, y (N, M,
P) with P = OD * OH * OW, all C-contiguous and of one float dtype; a 1-D or 2-D window is a 3-D
one of extent 1 along the missing axes. An output row is one (od, oh): OW pixels. `geometry` is
the int tuple (D, H, W, kd, kh, kw, sd, sh, sw, dd, dh, dw, pd, ph, pw, OD, OH, OW, G, Cg, Mg).
conv_plan.py cuts the items; both loops give the same numbers whichever thread runs an item.
Index arithmetic is unsigned in the copy loops: numba's wraparound test on signed indices keeps
LLVM from vectorising them (a 1.8 MB im2col matrix: 0.52 -> 0.15 ms).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import prange

from cannrt.kernels.nn.team import team_loop

Geometry = tuple[int, ...]


@numba.njit(cache=True, nogil=True)
def _fill(flat: np.ndarray, at: int, count: int, value: Any) -> None:
    start = np.uint64(at)
    for q in range(np.uint64(count)):
        flat[start + q] = value


@numba.njit(cache=True, nogil=True)
def _im2col(xs: np.ndarray, g: Geometry, c0: int, c1: int, r0: int, r1: int, cols: np.ndarray) -> None:
    """cols[(c - c0) * taps + tap, (r - r0) * OW + q] = the padded input under tap of output
    pixel q of row r, for channels [c0, c1) of xs (C, S) and output rows [r0, r1)."""
    depth, height, width, kd, kh, kw = g[0], g[1], g[2], g[3], g[4], g[5]
    sd, sh, sw, dd, dh, dw = g[6], g[7], g[8], g[9], g[10], g[11]
    pd, ph, pw, oh, ow = g[12], g[13], g[14], g[16], g[17]
    x, out = xs.reshape(-1), cols.reshape(-1)
    n = (r1 - r0) * ow
    zero = out.dtype.type(0)
    row = 0
    for c in range(c0, c1):
        for a in range(kd):
            for i in range(kh):
                for j in range(kw):
                    base = row * n
                    row += 1
                    w0 = j * dw - pw  # input column of output pixel 0
                    lo = min(-(w0 // sw), ow) if w0 < 0 else 0  # pixels [lo, hi) read inside the row
                    hi = max(min(ow, (width - w0 + sw - 1) // sw), lo)
                    for r in range(r0, r1):
                        at = base + (r - r0) * ow
                        d = (r // oh) * sd - pd + a * dd
                        h = (r % oh) * sh - ph + i * dh
                        if d < 0 or d >= depth or h < 0 or h >= height:
                            _fill(out, at, ow, zero)
                            continue
                        _fill(out, at, lo, zero)
                        source = np.uint64(((c * depth + d) * height + h) * width + w0 + lo * sw)
                        target = np.uint64(at + lo)
                        if sw == 1:
                            for q in range(np.uint64(hi - lo)):
                                out[target + q] = x[source + q]
                        else:
                            step = np.uint64(sw)
                            for q in range(np.uint64(hi - lo)):
                                out[target + q] = x[source + q * step]
                        _fill(out, at + hi, ow - hi, zero)


@numba.njit(cache=True, nogil=True)
def _finish(source: np.ndarray, yn: np.ndarray, m_first: int, p_first: int, bias: np.ndarray, flags: Any) -> None:
    """yn[m_first + m, p_first + p] = relu?(source[m, p] + bias[m_first + m]) (source (rows,
    width), yn (M, P)); the add only when biased, as numpy adds (NaN kept, -0.0 -> 0.0 by the
    relu as np.maximum(., 0) makes it). source may be yn's own rows (p_first 0, full width)."""
    biased, relu = flags[0], flags[1]
    rows, width = source.shape[0], source.shape[1]
    src, dst = source.reshape(-1), yn.reshape(-1)
    pixels = yn.shape[1]
    zero = dst.dtype.type(0)
    for m in range(rows):
        add = bias[m_first + m] if biased else zero
        s = np.uint64(m * width)
        t = np.uint64((m_first + m) * pixels + p_first)
        for p in range(np.uint64(width)):
            v = src[s + p] + add if biased else src[s + p]
            if relu:
                v = v if (v > 0 or v != v) else zero
            dst[t + p] = v


@team_loop
def conv_bands(
    x3: np.ndarray, w3: np.ndarray, bias: np.ndarray, y3: np.ndarray, g: Geometry, items: np.ndarray, flags: Any
) -> None:
    """Items (n, g, r0, r1): per band its im2col matrix, one product, bias and relu into y."""
    cg, mg, ow = g[19], g[20], g[17]
    k = w3.shape[2]
    for t in prange(items.shape[0]):
        n, gi, r0, r1 = items[t, 0], items[t, 1], items[t, 2], items[t, 3]
        cols = np.empty((k, (r1 - r0) * ow), x3.dtype)
        _im2col(x3[n], g, gi * cg, (gi + 1) * cg, r0, r1, cols)
        band = np.empty((mg, (r1 - r0) * ow), x3.dtype)
        np.dot(w3[gi], cols, band)
        _finish(band, y3[n], gi * mg, r0 * ow, bias, flags)


@team_loop
def conv_parts(
    x3: np.ndarray,
    w3: np.ndarray,
    bias: np.ndarray,
    y3: np.ndarray,
    g: Geometry,
    builds: np.ndarray,
    items: np.ndarray,
    cols: np.ndarray,
    flags: Any,
) -> None:
    """Builds (n, g, c0, c1): rows of the whole im2col matrix of (n, g) into cols[n * G + g]
    (none for a pointwise window: the matrix is x's channels); then items (n, g, m0, m1): weight
    rows [m0, m1) times that matrix straight into y's rows, bias and relu in place."""
    groups, cg, mg, rows = g[18], g[19], g[20], g[15] * g[16]
    taps = g[3] * g[4] * g[5]
    pointwise = flags[2]
    for t in prange(builds.shape[0]):
        n, gi, c0, c1 = builds[t, 0], builds[t, 1], builds[t, 2], builds[t, 3]
        _im2col(x3[n], g, gi * cg + c0, gi * cg + c1, 0, rows, cols[n * groups + gi][c0 * taps : c1 * taps])
    for t in prange(items.shape[0]):
        n, gi, m0, m1 = items[t, 0], items[t, 1], items[t, 2], items[t, 3]
        source = x3[n][gi * cg : (gi + 1) * cg] if pointwise else cols[n * groups + gi]
        out = y3[n][gi * mg + m0 : gi * mg + m1]
        np.dot(w3[gi][m0:m1], source, out)
        if flags[0] or flags[1]:
            _finish(out, y3[n], gi * mg + m0, 0, bias, flags)
