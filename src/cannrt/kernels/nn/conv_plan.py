"""How a convolution is cut into items for the thread team (kernels/nn/conv_gemm.py runs them).

Three ways, chosen per convolution shape (the cuts depend on the shape alone, never on the
host's load, so a model's numbers do not either; the rules are per-shape timings of the three
on the light models' convolutions, `benchmarks/conv.py`):
- taps: a unit-stride window over at least TAPS_MIN_CHANNELS input channels takes per-tap
  products, in bands of output rows (two; four for at most TAPS_FEW_OUTPUTS output channels over
  at least 16 rows). No im2col matrix: per band one zero-padded slab, and per kernel offset one
  product over the slab shifted by the offset. Not when the output channels could be cut in
  parts and a band's products would be thinner than TAPS_MIN_WIDTH columns (a 14 x 14 image).
- parts: when the whole im2col matrix of an image is small (PARTS_MAX_BYTES, it stays in L2) or
  is x itself (a pointwise window), and there are many output channels (PARTS_MIN_OUTPUTS, or
  more than half as many as the image has pixels), the matrix is built once, its rows cut by input channels,
  and the product is cut by output channels: each part writes its rows of y directly.
- bands: otherwise bands of output rows of about BAND_BYTES of im2col each (a band's matrix
  stays in L2 while its product reads it; a pointwise band reads x in place), at least two for a
  single image and group, an even number when there are two threads; with OpenBLAS, a product
  over an inner dimension of at most SMALL_MAX_DEPTH that up to SMALL_MAX_BANDS bands bring down
  to SMALL_PRODUCT multiply-adds each is cut that fine (its small-matrix kernels).
Kernels below team.TEAM_MIN_FLOPS are one item. A 3x3 window of unit strides and dilations over
many channels and tiles takes none of these: Winograd's F(2x2, 3x3) (conv_winograd.py, `winograd`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from cannrt.kernels.nn import gemm_library, team

BAND_BYTES = 1 << 20  # im2col bytes per band
PARTS_MAX_BYTES = 4 << 20  # im2col matrices (all images and groups) up to this are built whole
MIN_PART_ROWS = 32  # output channels per part of a product cut by output channels
PARTS_MIN_OUTPUTS = 256  # output channels from which parts beat bands whatever the image's size
TAPS_MIN_CHANNELS = 16  # input channels per group from which per-tap products beat im2col
TAPS_MIN_WIDTH = 128  # columns of a band's per-tap products below which parts are better
TAPS_FEW_OUTPUTS = 64  # output channels up to which per-tap products take four bands
# products of up to SMALL_MAX_BANDS bands of at most SMALL_PRODUCT multiply-adds each
# (OpenBLAS's small-matrix kernels on AVX-512, used up to 1e6, do not pack: 128 x 32 x 729 in
# two bands on the team took 61 us, in four 26 us; 64 x 64 x 3136 in two 116 us, in 14-16 85 us;
# squeezenet's 3 -> 64 3x3/2 stem, 64 x 27 x 12321, 0.39 ms in two bands, 0.29 in 32)
# over an inner dimension of at most SMALL_MAX_DEPTH (512 -> 64 over 13 x 13: 70 us in two bands,
# 104 in seven). oneMKL packs small products too: there bands of BAND_BYTES are faster (224 -> 128
# over 28 x 28: 0.16-0.17 ms in two or four bands, 0.20 in 28), so only OpenBLAS takes them.
SMALL_PRODUCTS = gemm_library.LIBRARY.name == "openblas"
SMALL_PRODUCT = 1_000_000
SMALL_MAX_BANDS = 32
SMALL_MAX_DEPTH = 256
# Winograd when its transforms cost little beside the flops it saves, per output tile and
# input-output channel pair: the input transform about 1/M of them, the output transform 1/C,
# the weights' transform 1/tiles; so when 1/C + 1/M + 1/tiles <= WINOGRAD_MAX_OVERHEAD (fitted on
# the light models in a model's run, caches as they are there: 64 -> 64 over 56 x 56, 128 -> 128
# over 28 x 28 and 256 -> 256 over 14 x 14 gain, resnet50 51.0 -> 49.3 ms; squeezenet's 32 -> 128
# over 27 x 27 and 48 -> 192, 64 -> 256 over 13 x 13 lose, 6.5 -> 6.8 ms, though alone they gained
# 3-9 %; 512 -> 512 over 7 x 7: 2.0-2.2 against 1.3 ms)
WINOGRAD_MAX_OVERHEAD = 1 / 28
# With the weights transformed ahead (ge, at compile time) the weights' term goes, but the model
# then reads them transformed, 16/9 of their bytes, on every execute (and keeps both): up to
# WINOGRAD_AHEAD_MAX_BYTES of them (resnet50: 102 -> 127 MB of weights). In a model's run:
# resnet50 -5..-8 % (256 -> 256 over 14 x 14: 1.42 -> 0.89 ms alone), squeezenet -3 % (64 -> 256
# over 13 x 13: 0.42 -> 0.28 ms alone); not 512 -> 512 over 7 x 7 (16 MiB for 1.94 -> 1.82 ms
# alone); overheads above WINOGRAD_MAX_OVERHEAD gained alone but not in the models (squeezenet's
# 32 -> 128, densenet's 128 -> 32: 1/32 + 1/128)
WINOGRAD_AHEAD_MAX_BYTES = 4 << 20


@dataclass(frozen=True)
class Plan:
    """The items of a convolution: bands (n, g, r0, r1) (per-tap products when by_taps), or
    builds (n, g, c0, c1) of the whole im2col matrices then parts (n, g, m0, m1) of the
    products; flops of the products."""

    bands: np.ndarray | None
    builds: np.ndarray
    parts: np.ndarray
    flops: float
    by_taps: bool = False


def _items(rows: list[tuple[int, int, int, int]]) -> np.ndarray:
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def _halves(extent: int, count: int) -> list[tuple[int, int]]:
    step = -(-extent // count)
    return [(start, min(start + step, extent)) for start in range(0, extent, step)]


def _bands(n: int, group: int, rows: int, count: int) -> np.ndarray:
    """Per image and group, `count` bands of output rows (at most one a row)."""
    return _items(
        [(i, g, r0, r1) for i in range(n) for g in range(group) for r0, r1 in _halves(rows, min(count, rows))]
    )


@functools.lru_cache(maxsize=1024)
def winograd(
    group: int,
    mg: int,
    cg: int,
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    dilations: tuple[int, ...],
    out: tuple[int, ...],
) -> bool:
    """Whether a convolution takes Winograd's F(2x2, 3x3): a 2-D 3x3 window of unit strides and
    dilations, one group, and transforms that cost little beside the saving
    (WINOGRAD_MAX_OVERHEAD)."""
    if not winograd_window(group, kernel, strides, dilations, out):
        return False
    tiles = ((out[0] + 1) // 2) * ((out[1] + 1) // 2)
    return 1 / cg + 1 / mg + 1 / tiles <= WINOGRAD_MAX_OVERHEAD


def winograd_window(
    group: int, kernel: tuple[int, ...], strides: tuple[int, ...], dilations: tuple[int, ...], out: tuple[int, ...]
) -> bool:
    """Whether Winograd's F(2x2, 3x3) computes this window: 2-D, 3x3, unit strides and dilations, one group."""
    return group == 1 and kernel == (3, 3) and strides == (1, 1) and dilations == (1, 1) and len(out) == 2


def winograd_ahead(mg: int, cg: int, itemsize: int = 4) -> bool:
    """Whether ge transforms the constant weights of a Winograd window (winograd_window) ahead,
    for the Winograd kernels: when the input and output transforms cost little (as in
    `winograd`, without the weights' term) and the transformed weights are at most
    WINOGRAD_AHEAD_MAX_BYTES."""
    return 1 / cg + 1 / mg <= WINOGRAD_MAX_OVERHEAD and 16 * mg * cg * itemsize <= WINOGRAD_AHEAD_MAX_BYTES


@functools.lru_cache(maxsize=1024)
def plan(
    n: int,
    group: int,
    mg: int,
    cg: int,
    taps: int,
    rows: int,
    row_width: int,
    itemsize: int,
    pointwise: bool,
    unit: bool,
) -> Plan:
    """The items of a convolution of n images, `group` groups of cg input and mg output
    channels, `taps` kernel offsets, `rows` output rows of row_width pixels; `unit`: a 1-D or
    2-D window of unit strides, which may take per-tap products (remembered per shape: every
    launch of a model's convolution plans the same items)."""
    pixels = rows * row_width
    depth = cg * taps
    flops = 2.0 * n * group * mg * depth * pixels
    shared = flops >= team.TEAM_MIN_FLOPS
    single = n * group == 1
    split = shared and single
    partable = mg >= 2 * MIN_PART_ROWS
    if unit and taps > 1 and cg >= TAPS_MIN_CHANNELS:
        count = (4 if mg <= TAPS_FEW_OUTPUTS and rows >= 16 else 2) if split else 1
        if not (partable and -(-rows // count) * row_width < TAPS_MIN_WIDTH):
            return Plan(_bands(n, group, rows, count), _items([]), _items([]), flops, True)
    matrices = 0 if pointwise else n * group * depth * pixels * itemsize
    if matrices <= PARTS_MAX_BYTES and (not split or (partable and (mg >= PARTS_MIN_OUTPUTS or pixels <= 2 * mg))):
        m_cuts = _halves(mg, 2 if split else 1)
        c_cuts = [] if pointwise else _halves(cg, 2 if split and cg > 1 else 1)
        builds = [(i, g, c0, c1) for i in range(n) for g in range(group) for c0, c1 in c_cuts]
        parts = [(i, g, m0, m1) for i in range(n) for g in range(group) for m0, m1 in m_cuts]
        return Plan(None, _items(builds), _items(parts), flops)
    inner = cg if pointwise else depth  # the products' inner dimension
    count = max(math.ceil(inner * pixels * itemsize / BAND_BYTES), 2 if split else 1)
    count += count % 2 if split else 0  # an odd count leaves one thread the last band alone
    if split and SMALL_PRODUCTS and inner <= SMALL_MAX_DEPTH:
        count = max(count, _small_products(mg, inner, rows, row_width))
    return Plan(_bands(n, group, rows, count), _items([]), _items([]), flops)


def _small_products(mg: int, inner: int, rows: int, row_width: int) -> int:
    """Bands (an even number) whose products are at most SMALL_PRODUCT multiply-adds, if at most
    SMALL_MAX_BANDS of them cover the rows; else 0."""
    per_band = SMALL_PRODUCT // (mg * inner * row_width)
    if per_band < 1:
        return 0
    count = -(-rows // per_band)
    count += count % 2
    return count if count <= SMALL_MAX_BANDS else 0
