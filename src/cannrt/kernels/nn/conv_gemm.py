"""Convolution as BLAS products in numba, its items on a thread team (team.py).

Layout: x (N, C, S) with S the input's spatial extent, w (G, Mg, K) with K = Cg * taps, y (N, M,
P) with P = OD * OH * OW, all C-contiguous and of one float dtype; a 1-D or 2-D window is a 3-D
one of extent 1 along the missing axes. An output row is one (od, oh): OW pixels. `geometry` is
the int tuple (D, H, W, kd, kh, kw, sd, sh, sw, dd, dh, dw, pd, ph, pw, OD, OH, OW, G, Cg, Mg).
conv_plan.py cuts the items; every loop gives the same numbers whichever thread runs an item.

Products call a BLAS ?gemm (gemm_library.py: oneMKL's, else SciPy's OpenBLAS) with
row pitches, so a band's product is written into y itself, a pointwise band reads x in place, and
the per-tap products of a unit-stride window read shifted views of one padded slab and add up in
BLAS (beta 1). The products run where numpy's float status cannot see them: each item's last
pass over its outputs reports whether any was inf or nan (`status`), for the device's overflow
detection (conv.py raises numpy's flag from it). Index arithmetic is unsigned in the copy loops:
numba's wraparound test on signed indices keeps LLVM from vectorising them (a 1.8 MB im2col
matrix: 0.52 -> 0.15 ms).
"""

from __future__ import annotations

from typing import Any

import llvmlite.binding
import numba
import numpy as np
from numba import prange, types

from cannrt.kernels.nn import gemm_library
from cannrt.kernels.nn.team import team_loop

Geometry = tuple[int, ...]
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # x (N, C, S), w (G, Mg, K), bias (M,), y (N, M, P)

# by name, so that numba's disk cache stays valid across processes (and whichever library)
llvmlite.binding.add_symbol("cannrt_sgemm", gemm_library.LIBRARY.sgemm)
llvmlite.binding.add_symbol("cannrt_dgemm", gemm_library.LIBRARY.dgemm)
_GEMM_SIGNATURE = types.void(*([types.uintp] * 13))  # Fortran ?gemm: every argument by address
_sgemm: Any = types.ExternalFunction("cannrt_sgemm", _GEMM_SIGNATURE)
_dgemm: Any = types.ExternalFunction("cannrt_dgemm", _GEMM_SIGNATURE)
_NO = 78  # 'N': BLAS's no-transpose


@numba.njit(cache=True, nogil=True)
def _gemm(a: int, b: int, c: int, m: int, n: int, k: int, pitches: Any, accumulate: bool, itemsize: int) -> int:
    """C (+)= A @ B for row-major operands at addresses a (m x k), b (k x n), c (m x n) with row
    pitches (lda, ldb, ldc) in elements: BLAS's column-major C^T = B^T A^T. Returns a value read
    from the argument block after the call, which keeps the block alive until BLAS returns."""
    block = np.empty(8, np.int32)  # n, m, k, ldb, lda, ldc, 'N' and the two scalars' room
    block[0], block[1], block[2], block[3], block[4], block[5] = n, m, k, pitches[1], pitches[0], pitches[2]
    block[6] = 0
    block.view(np.uint8)[24] = _NO  # a char, whatever the byte order
    scalars = np.empty(2, np.float64)
    i, s, size = block.ctypes.data, scalars.ctypes.data, 4
    f = i + 6 * size
    if itemsize == 4:
        narrow = scalars.view(np.float32)
        narrow[0], narrow[1] = 1, 1 if accumulate else 0
        _sgemm(f, f, i, i + size, i + 2 * size, s, b, i + 3 * size, a, i + 4 * size, s + 4, c, i + 5 * size)
    else:
        scalars[0], scalars[1] = 1, 1 if accumulate else 0
        _dgemm(f, f, i, i + size, i + 2 * size, s, b, i + 3 * size, a, i + 4 * size, s + 8, c, i + 5 * size)
    return int(block[6]) + int(scalars[0] != 0)


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
def _slab(xs: np.ndarray, g: Geometry, c0: int, c1: int, r0: int, rows: int, pitch: int, slab: np.ndarray) -> None:
    """slab[(c - c0) * rows * pitch + rr * pitch + pc] = the zero-padded input of a unit-stride
    2-D window at padded row r0 + rr and padded column pc, channels [c0, c1) (the rest 0)."""
    height, width, ph, pw = g[1], g[2], g[13], g[14]
    x, out = xs.reshape(-1), slab.reshape(-1)
    zero = out.dtype.type(0)
    count = min(width, pitch - pw)
    for c in range(c0, c1):
        for rr in range(rows):
            at = ((c - c0) * rows + rr) * pitch
            h = r0 + rr - ph
            if h < 0 or h >= height:
                _fill(out, at, pitch, zero)
                continue
            _fill(out, at, pw, zero)
            source, target = np.uint64((c * height + h) * width), np.uint64(at + pw)
            for q in range(np.uint64(count)):
                out[target + q] = x[source + q]
            _fill(out, at + pw + count, pitch - pw - count, zero)
    _fill(out, (c1 - c0) * rows * pitch, out.size - (c1 - c0) * rows * pitch, zero)


@numba.njit(cache=True, nogil=True, fastmath={"reassoc"}, inline="always")
def _row_pass(src: np.ndarray, s: Any, dst: np.ndarray, t: Any, count: int, add: Any, relu: bool, same: bool) -> Any:
    """dst[t + q] = relu?(src[s + q] + add) for q < count, `same` when that is dst's own place
    (then one array is read and written: an overlap check would send the loop to its scalar
    version); returns the sum of value * 0 over them. add is -0.0 for no bias (x + -0.0 is x,
    -0.0 too, as numpy leaves a value it adds nothing to); the sum's order is free ("reassoc":
    0, or NaN whatever the order), so the loops vectorise (0.5 -> 0.2 ns an element in L2)."""
    zero = dst.dtype.type(0)
    check = zero
    if same:
        for q in range(np.uint64(count)):
            v = dst[t + q] + add
            check += v * zero
            dst[t + q] = v if (v > 0 or v != v or not relu) else zero
    else:
        for q in range(np.uint64(count)):
            v = src[s + q] + add
            check += v * zero
            dst[t + q] = v if (v > 0 or v != v or not relu) else zero
    return check


@numba.njit(cache=True, nogil=True, fastmath={"reassoc"})
def _finish(
    src: np.ndarray,
    s0: int,
    s_steps: Any,
    dst: np.ndarray,
    d0: int,
    d_steps: Any,
    shape: Any,
    bias: np.ndarray,
    b0: int,
    flags: Any,
) -> float:
    """dst[d0 + m * dm + r * dr + q] = relu?(src[s0 + m * sm + r * sr + q] + bias[b0 + m]) over
    shape (channels, rows, columns) of flat src and dst (dst may be src, at the same places); the
    add only when biased, as numpy adds (NaN kept, -0.0 -> 0.0 by the relu as np.maximum makes it).
    Returns 0 when every value before the relu was finite, else NaN (the sum of value * 0)."""
    biased, relu = flags[0], flags[1]
    check = dst.dtype.type(0)
    same = src.ctypes.data == dst.ctypes.data and s0 == d0 and s_steps[0] == d_steps[0] and s_steps[1] == d_steps[1]
    for m in range(shape[0]):
        add = bias[b0 + m] if biased else dst.dtype.type(-0.0)
        for r in range(shape[1]):
            s = np.uint64(s0 + m * s_steps[0] + r * s_steps[1])
            t = np.uint64(d0 + m * d_steps[0] + r * d_steps[1])
            check += _row_pass(src, s, dst, t, shape[2], add, relu, same)
    return float(check)


@team_loop
def conv_bands(arrays: Arrays, g: Geometry, items: np.ndarray, flags: Any, status: np.ndarray) -> None:
    """Items (n, g, r0, r1): per band its im2col matrix (a pointwise window reads x in place),
    one product into y's band, then the bias and relu over it (status[t]: _finish's check)."""
    x3, w3, bias, y3 = arrays
    cg, mg, ow, pointwise = g[19], g[20], g[17], flags[2]
    k, pixels, size = w3.shape[2], y3.shape[2], x3.itemsize
    yf = y3.reshape(-1)
    for t in prange(items.shape[0]):
        n, gi, r0, r1 = items[t, 0], items[t, 1], items[t, 2], items[t, 3]
        width = (r1 - r0) * ow
        target = (n * y3.shape[1] + gi * mg) * pixels + r0 * ow
        weights = w3[gi].ctypes.data
        if pointwise:
            band = x3[n].ctypes.data + ((gi * cg) * x3.shape[2] + r0 * ow) * size
            _gemm(weights, band, yf.ctypes.data + target * size, mg, width, k, (k, x3.shape[2], pixels), False, size)
        else:
            cols = np.empty((k, width), x3.dtype)
            _im2col(x3[n], g, gi * cg, (gi + 1) * cg, r0, r1, cols)
            _gemm(
                weights, cols.ctypes.data, yf.ctypes.data + target * size, mg, width, k, (k, width, pixels), False, size
            )
        status[t] = _finish(yf, target, (pixels, 0), yf, target, (pixels, 0), (mg, 1, width), bias, gi * mg, flags)


@team_loop
def conv_taps(arrays: Arrays, g: Geometry, items: np.ndarray, flags: Any, status: np.ndarray) -> None:
    """Items (n, g, r0, r1) of a unit-stride window: the weights laid out per kernel offset (G,
    taps, Mg, Cg) first, in parts of output channels; then per band the padded input rows as
    one slab, and per kernel offset one product over the slab shifted by the offset (its rows
    read at the padded width, whose last columns are dropped), added up in BLAS; bias and relu
    into y."""
    x3, w3, bias, y3 = arrays
    kh, kw, dh, dw, ow, groups, cg, mg = g[4], g[5], g[10], g[11], g[17], g[18], g[19], g[20]
    taps, pitch = kh * kw, ow + (kw - 1) * dw
    pixels, size = y3.shape[2], x3.itemsize
    yf = y3.reshape(-1)
    wt = np.empty((groups, taps, mg, cg), w3.dtype)
    parts = min(mg, 8)
    for t in prange(groups * parts):
        gi, part = t // parts, t % parts
        for m in range(part * mg // parts, (part + 1) * mg // parts):
            row = w3[gi, m]
            for tap in range(taps):
                into = wt[gi, tap, m]
                for c in range(cg):
                    into[c] = row[c * taps + tap]
    for t in prange(items.shape[0]):
        n, gi, r0, r1 = items[t, 0], items[t, 1], items[t, 2], items[t, 3]
        rows = r1 - r0 + (kh - 1) * dh
        plane, width = rows * pitch, (r1 - r0) * pitch
        slab = np.empty(cg * plane + (kw - 1) * dw, x3.dtype)
        _slab(x3[n], g, gi * cg, (gi + 1) * cg, r0, rows, pitch, slab)
        out = np.empty(mg * width, x3.dtype)
        for i in range(kh):
            for j in range(kw):
                shift = slab.ctypes.data + (i * dh * pitch + j * dw) * size
                tap = wt[gi, i * kw + j].ctypes.data
                _gemm(tap, shift, out.ctypes.data, mg, width, cg, (cg, plane, width), i + j > 0, size)
        target = (n * y3.shape[1] + gi * mg) * pixels + r0 * ow
        status[t] = _finish(out, 0, (width, pitch), yf, target, (pixels, ow), (mg, r1 - r0, ow), bias, gi * mg, flags)


@team_loop
def conv_parts(
    arrays: Arrays, g: Geometry, builds: np.ndarray, items: np.ndarray, cols: np.ndarray, flags: Any, status: np.ndarray
) -> None:
    """Builds (n, g, c0, c1): rows of the whole im2col matrix of (n, g) into cols[n * G + g]
    (none for a pointwise window: the matrix is x's channels); then items (n, g, m0, m1): weight
    rows [m0, m1) times that matrix straight into y's rows, bias and relu in place."""
    x3, w3, bias, y3 = arrays
    groups, cg, mg, rows = g[18], g[19], g[20], g[15] * g[16]
    taps = g[3] * g[4] * g[5]
    k, pixels, size, pointwise = w3.shape[2], y3.shape[2], x3.itemsize, flags[2]
    yf = y3.reshape(-1)
    for t in prange(builds.shape[0]):
        n, gi, c0, c1 = builds[t, 0], builds[t, 1], builds[t, 2], builds[t, 3]
        _im2col(x3[n], g, gi * cg + c0, gi * cg + c1, 0, rows, cols[n * groups + gi][c0 * taps : c1 * taps])
    for t in prange(items.shape[0]):
        n, gi, m0, m1 = items[t, 0], items[t, 1], items[t, 2], items[t, 3]
        source = x3[n].ctypes.data + gi * cg * x3.shape[2] * size if pointwise else cols[n * groups + gi].ctypes.data
        target = (n * y3.shape[1] + gi * mg + m0) * pixels
        weights = w3[gi].ctypes.data + m0 * k * size
        _gemm(weights, source, yf.ctypes.data + target * size, m1 - m0, pixels, k, (k, pixels, pixels), False, size)
        shape = (m1 - m0, 1, pixels)
        status[t] = _finish(yf, target, (pixels, 0), yf, target, (pixels, 0), shape, bias, gi * mg + m0, flags)
