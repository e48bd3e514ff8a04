"""3x3 convolutions of unit stride by Winograd's minimal filtering F(2x2, 3x3), on the team.

Each 2x2 tile of outputs comes from a 4x4 tile of the (zero-padded) input d and the 3x3
weights g as Y = A^T [(G g G^T) * (B^T d B)] A (Lavin and Gray, "Fast Algorithms for
Convolutional Neural Networks", 2016; cuDNN's and oneDNN's WINOGRAD algorithms): 16
multiplications per output tile and input channel where the im2col product takes 36, so the
products are 16 BLAS products (M x C) @ (C x tiles), one per position in the 4x4 tile, that
take 4/9 of the direct products' flops. A compiled model's weights come transformed (ge does it
once, `transform_weights`: a quarter of a 13 x 13 convolution's time went into the transform);
other weights are transformed per call (device memory, which may be rewritten between calls),
and a convolution whose weights outweigh its tiles (conv_plan.winograd) keeps the direct
products. Rounding differs from the direct sum (a few ulp of the largest term; the light models
stay within 1e-5 of onnxruntime), and where the direct sum overflows to inf the transforms give
inf - inf = NaN: conv.py computes a convolution whose status reports a non-finite value again
with the direct products.

Layout as conv_gemm's: x (N, C, H*W), w (1, M, C*9), y (N, M, OH*OW), geometry as there. Four
team loops: the weights' transform U (16, M, C) in parts of output channels, the input's V (16,
C, N*tiles) in parts of channels, the 16 products, and the output transform (bias, relu and the
non-finite check as conv_gemm._finish does) in parts of output channels, the first skipped when
the weights come transformed (u (16, M * C), its planes unpadded); the items and their
order never depend on which thread runs them, so the team and its serial twin agree bit for bit.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import numba
import numpy as np
from numba import prange

from cannrt.kernels.builtins import compute_dtype
from cannrt.kernels.nn.conv_gemm import Arrays, Geometry, _gemm, _row_pass
from cannrt.kernels.nn.team import team_loop

PARTS = 8  # items of each transform loop (the team takes them one at a time)
_scratch = threading.local()


@numba.njit(cache=True, nogil=True)
def _pitch(size: int) -> int:
    """A plane's pitch for size elements: not a multiple of 4 KiB of floats, whose 16 planes
    would share the cache's sets (the weights' transform of 256 x 256 channels: 3.1 -> 0.34 ms)."""
    pitch = size + 48
    return pitch + 32 if pitch % 1024 == 0 else pitch


@numba.njit(cache=True, nogil=True, inline="always")
def _rows(a: Any, b: Any, c: Any, d: Any) -> tuple[Any, Any, Any, Any]:
    """B^T applied to (a, b, c, d)."""
    return a - c, b + c, c - b, b - d


@numba.njit(cache=True, nogil=True, inline="always")
def _g(a: Any, b: Any, c: Any, half: Any) -> tuple[Any, Any, Any, Any]:
    """G applied to (a, b, c)."""
    return a, (a + b + c) * half, (a - b + c) * half, c


@numba.njit(cache=True, nogil=True, inline="always")
def _out(a: Any, b: Any, c: Any, d: Any) -> tuple[Any, Any]:
    """A^T applied to (a, b, c, d)."""
    return a + b + c, b - c - d


@numba.njit(cache=True, nogil=True)
def _weights(w3: np.ndarray, m0: int, m1: int, cg: int, uf: np.ndarray, pitch: int) -> None:
    """U = G g G^T of output channels [m0, m1): uf[k * pitch + m * cg + c], k the tile position."""
    half, plane = w3.dtype.type(0.5), np.uint64(pitch)
    for m in range(m0, m1):
        row = w3[0, m]
        for c in range(cg):
            k = c * 9
            a0, a1, a2, a3 = _g(row[k], row[k + 3], row[k + 6], half)  # G g, by its columns
            b0, b1, b2, b3 = _g(row[k + 1], row[k + 4], row[k + 7], half)
            c0, c1, c2, c3 = _g(row[k + 2], row[k + 5], row[k + 8], half)
            at = np.uint64(m * cg + c)
            uf[at], uf[at + plane], uf[at + 2 * plane], uf[at + 3 * plane] = _g(a0, b0, c0, half)
            uf[at + 4 * plane], uf[at + 5 * plane], uf[at + 6 * plane], uf[at + 7 * plane] = _g(a1, b1, c1, half)
            uf[at + 8 * plane], uf[at + 9 * plane], uf[at + 10 * plane], uf[at + 11 * plane] = _g(a2, b2, c2, half)
            uf[at + 12 * plane], uf[at + 13 * plane], uf[at + 14 * plane], uf[at + 15 * plane] = _g(a3, b3, c3, half)


@numba.njit(cache=True, nogil=True)
def _inputs(xs: np.ndarray, g: Geometry, c0: int, c1: int, col0: int, cols: int, vf: np.ndarray, pitch: int) -> None:
    """V = B^T d B of channels [c0, c1) of one image xs (C, H*W), its tiles from column col0 of
    vf[k * pitch + c * cols + col]: per row of tiles, the four zero-padded input rows, B^T down
    their columns (contiguous), then B along each tile's four columns."""
    height, width, ph, pw, oh, ow = g[1], g[2], g[13], g[14], g[16], g[17]
    across, down = (ow + 1) // 2, (oh + 1) // 2
    span = 2 * across + 2
    rows = np.zeros((4, span), xs.dtype)
    r = np.empty((4, span), xs.dtype)
    zero, plane = xs.dtype.type(0), np.uint64(pitch)
    inside = max(0, min(width, span - pw))
    for c in range(c0, c1):
        src = xs[c]
        for ty in range(down):
            for i in range(4):
                h, row = 2 * ty - ph + i, rows[i]
                row[:] = zero
                if 0 <= h < height:
                    base, into = np.uint64(h * width), np.uint64(pw)
                    for q in range(np.uint64(inside)):
                        row[into + q] = src[base + q]
            for q in range(np.uint64(span)):
                r[0, q], r[1, q], r[2, q], r[3, q] = _rows(rows[0, q], rows[1, q], rows[2, q], rows[3, q])
            at = np.uint64(c * cols + col0 + ty * across)
            for i in range(4):
                ri, o = r[i], at + np.uint64(4 * i) * plane
                for tx in range(np.uint64(across)):
                    q = 2 * tx
                    vf[o + tx], vf[o + plane + tx], vf[o + 2 * plane + tx], vf[o + 3 * plane + tx] = _rows(
                        ri[q], ri[q + 1], ri[q + 2], ri[q + 3]
                    )


@numba.njit(cache=True, nogil=True, fastmath={"reassoc"})
def _outputs(
    pf: np.ndarray, pitch: int, m0: int, m1: int, cols: int, g: Geometry, yf: np.ndarray, bias: np.ndarray, flags: Any
) -> Any:
    """Y = A^T M A of output channels [m0, m1) from pf[k * pitch + m * cols + col] into yf
    (N, M, OH*OW), bias and relu; returns the sum of value * 0 over them. Per row of tiles: its
    two output rows whole into a small buffer (no branch: the loop vectorises), then the bias,
    check and relu over the pixels that exist, contiguous."""
    oh, ow, channels = g[16], g[17], g[18] * g[20]
    across, down = (ow + 1) // 2, (oh + 1) // 2
    tiles, pixels, plane = across * down, oh * ow, np.uint64(pitch)
    biased, relu = flags[0], flags[1]
    zero = yf.dtype.type(0)
    pair = np.empty((2, 2 * across), yf.dtype)
    top_row, bottom_row = pair[0], pair[1]
    check = zero
    for m in range(m0, m1):
        add = bias[m] if biased else yf.dtype.type(-0.0)  # (_row_pass: -0.0 adds nothing)
        for col0 in range(0, cols, tiles):
            out = np.uint64(((col0 // tiles) * channels + m) * pixels)
            for ty in range(down):
                src = np.uint64(m * cols + col0 + ty * across)
                for tx in range(np.uint64(across)):
                    q = src + tx
                    a0, a1 = _out(pf[q], pf[q + 4 * plane], pf[q + 8 * plane], pf[q + 12 * plane])  # A^T M
                    b0, b1 = _out(pf[q + plane], pf[q + 5 * plane], pf[q + 9 * plane], pf[q + 13 * plane])
                    c0, c1 = _out(pf[q + 2 * plane], pf[q + 6 * plane], pf[q + 10 * plane], pf[q + 14 * plane])
                    d0, d1 = _out(pf[q + 3 * plane], pf[q + 7 * plane], pf[q + 11 * plane], pf[q + 15 * plane])
                    top_row[2 * tx], top_row[2 * tx + 1] = _out(a0, b0, c0, d0)
                    bottom_row[2 * tx], bottom_row[2 * tx + 1] = _out(a1, b1, c1, d1)
                for i in range(min(2, oh - 2 * ty)):
                    at = out + np.uint64((2 * ty + i) * ow)
                    check += _row_pass(pair[i], np.uint64(0), yf, at, ow, add, relu, False)
    return check


def transform_weights(w: np.ndarray) -> np.ndarray:
    """U = G g G^T of 3x3 weights w (M, C, 3, 3) in their compute dtype (fp64 stays, else fp32):
    (16, M, C), position k = 4 * row + column of the 4x4 tile; numpy's operations in _weights'
    order, so the same bits as the transform conv_winograd makes per call."""
    g = w.astype(compute_dtype(w))
    half = g.dtype.type(0.5)

    def apply(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> list[np.ndarray]:
        return [a, (a + b + c) * half, (a - b + c) * half, c]

    rows = apply(g[:, :, 0, :], g[:, :, 1, :], g[:, :, 2, :])  # G g: 4 of (M, C, 3)
    return np.stack([tile for r in rows for tile in apply(r[..., 0], r[..., 1], r[..., 2])])


def workspace(size: int, dtype: np.dtype) -> np.ndarray:
    """size elements of scratch for this thread's Winograd convolutions, reused from call to
    call (cuDNN's workspace): allocating the planes per call cost a page fault per 4 KiB once
    the allocator had given them back to the system (64@56 -> 64: 0.95 -> 2.6 ms)."""
    held: dict[np.dtype, np.ndarray] = _scratch.__dict__.setdefault("held", {})
    buffer = held.get(dtype)
    if buffer is None or buffer.size < size:
        buffer = held[dtype] = np.empty(size, dtype)
    return buffer[:size]


@functools.lru_cache(maxsize=1024)
def workspace_size(images: int, g: Geometry) -> int:
    """Elements of workspace a convolution of geometry g over `images` images takes, at most (with
    its weights given transformed, the first planes stay unused); remembered: _pitch is numba's,
    three calls from Python."""
    oh, ow, cg, mg = g[16], g[17], g[19], g[20]
    cols = images * ((oh + 1) // 2) * ((ow + 1) // 2)
    return 16 * (_pitch(mg * cg) + _pitch(cg * cols) + _pitch(mg * cols))


@team_loop
def conv_winograd(
    arrays: Arrays, g: Geometry, flags: Any, scratch: np.ndarray, status: np.ndarray, u: np.ndarray
) -> None:
    """y = relu?(conv3x3(x, w) + bias) for a unit-stride, undilated window of one group, its
    planes in scratch (workspace_size); the weights transformed here, or given transformed in u
    (16, M * C) when it is not empty. status[p]: 0, or NaN if a value of output part p was not
    finite before the relu."""
    x3, w3, bias, y3 = arrays
    oh, ow, cg, mg = g[16], g[17], g[19], g[20]
    images, size = x3.shape[0], x3.itemsize
    tiles = ((oh + 1) // 2) * ((ow + 1) // 2)
    cols = images * tiles
    given = u.size > 0
    room, v_pitch, p_pitch = 0 if given else _pitch(mg * cg), _pitch(cg * cols), _pitch(mg * cols)
    uf = u.reshape(-1) if given else scratch[: 16 * room]
    u_pitch = mg * cg if given else room
    vf = scratch[16 * room : 16 * (room + v_pitch)]
    pf = scratch[16 * (room + v_pitch) :]
    for p in prange(0 if given else PARTS):
        _weights(w3, p * mg // PARTS, (p + 1) * mg // PARTS, cg, uf, u_pitch)
    for t in prange(images * PARTS):
        n, p = t // PARTS, t % PARTS
        _inputs(x3[n], g, p * cg // PARTS, (p + 1) * cg // PARTS, n * tiles, cols, vf, v_pitch)
    for k in prange(16):  # the products, one per tile position
        a, v, out = uf.ctypes.data + k * u_pitch * size, vf.ctypes.data + k * v_pitch * size, pf.ctypes.data
        _gemm(a, v, out + k * p_pitch * size, mg, cols, cg, (cg, cols, cols), False, size)
    yf = y3.reshape(-1)
    for p in prange(PARTS):
        status[p] = _outputs(pf, p_pitch, p * mg // PARTS, (p + 1) * mg // PARTS, cols, g, yf, bias, flags)
