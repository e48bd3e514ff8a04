"""How a convolution is cut into items for the thread team (kernels/nn/conv_gemm.py runs them).

Two ways, chosen per convolution shape (the cuts depend on the shape alone, never on the host's
load, so a model's numbers do not either):
- parts: when the whole im2col matrix of an image is small (PARTS_MAX_BYTES, it stays in L2) or
  is x itself (a pointwise window), it is built once, its rows cut by input channels among the
  team, and the product is cut by output channels (parts of at least MIN_PART_ROWS rows): each
  part writes its rows of y directly.
- bands: larger matrices are cut into bands of output rows of about BAND_BYTES of im2col each
  (a band's matrix stays in L2 while its product reads it), at least two for a single image and
  group, each band one product into a buffer, then the bias and relu into y. A pointwise window
  with few output channels takes bands too (its im2col is a copy of the band).
Kernels below team.TEAM_MIN_FLOPS are one item.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from cannrt.kernels.nn import team

BAND_BYTES = 2 << 20  # im2col bytes per band
PARTS_MAX_BYTES = 4 << 20  # im2col matrices (all images and groups) up to this are built whole
MIN_PART_ROWS = 32  # output channels per part of a product cut by output channels
TAPS_MAX_CHANNELS = 64  # per-tap products (no im2col) for at most this many output channels per group
TAPS_MIN_CHANNELS = 64  # ... and at least this many input channels per group (each product's depth)


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
    matrices = 0 if pointwise else n * group * depth * pixels * itemsize
    few_rows = mg < 2 * MIN_PART_ROWS
    wide = shared and single and rows > 1 and (few_rows or pixels > mg)  # bands read less than parts
    if matrices <= PARTS_MAX_BYTES and not wide:
        m_cuts = _halves(mg, 2 if shared and single and not few_rows else 1)
        c_cuts = [] if pointwise else _halves(cg, 2 if shared and single and cg > 1 else 1)
        builds = [(i, g, c0, c1) for i in range(n) for g in range(group) for c0, c1 in c_cuts]
        parts = [(i, g, m0, m1) for i in range(n) for g in range(group) for m0, m1 in m_cuts]
        return Plan(None, _items(builds), _items(parts), flops)
    by_taps = unit and taps > 1 and mg <= TAPS_MAX_CHANNELS and cg >= TAPS_MIN_CHANNELS
    count = max(math.ceil(depth * pixels * itemsize / BAND_BYTES), 2 if shared and single else 1)
    bands = [(i, g, r0, r1) for i in range(n) for g in range(group) for r0, r1 in _halves(rows, min(count, rows))]
    return Plan(_items(bands), _items([]), _items([]), flops, by_taps)
