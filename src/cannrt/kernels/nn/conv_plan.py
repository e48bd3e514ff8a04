"""How a convolution is cut into items for the host threads (kernels/nn/conv.py runs them).

An item is one product: an image, a group, a band of output rows, a part of the output channels
and a part of the input channels. Large products are cut into row bands of about BAND_BYTES of
im2col (the band's matrix stays in L2 while its product reads it), and for the two host threads
into an even number of bands, or halves of the channels, whether or not blas.parallel_for shares
them at the moment (the numbers must not depend on the host's load).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from cannrt.kernels.nn import blas

BAND_BYTES = 2 << 20  # im2col bytes per band: a band's matrix stays in L2 while its product reads it
SINGLE_BANDS = 2  # at least this many bands when there is one image and group
MIN_BAND_PIXELS = 128  # bands narrower than this make thin products: split the channels instead
MIN_CHANNEL_PART = 32  # output channels per part when a pointwise convolution's channels are split


@dataclass(frozen=True)
class Item:
    """One product of a convolution: image n, group g, output rows [r0, r1) of the first spatial
    axis, output channels [m0, m1) and input channels [c0, c1) of the group (an input-channel
    part computes a partial sum, added to the other parts' when all are done)."""

    n: int
    g: int
    r0: int
    r1: int
    m0: int
    m1: int
    c0: int
    c1: int


def plan(
    n: int,
    group: int,
    mg: int,
    cg: int,
    out: tuple[int, ...],
    taps: int,
    itemsize: int,
    pointwise: bool,
    by_taps: bool,
) -> tuple[Item, ...]:
    """`_cut` of these arguments and the current tunables, remembered per distinct tuple (every
    launch of a model's convolution plans the same items)."""
    tunables = (blas.SPLIT_FLOPS, BAND_BYTES, SINGLE_BANDS, MIN_BAND_PIXELS, MIN_CHANNEL_PART)
    return _cut((n, group, mg, cg, out, taps, itemsize, pointwise, by_taps), tunables)


Conv = tuple[int, int, int, int, tuple[int, ...], int, int, bool, bool]  # plan's arguments


@functools.lru_cache(maxsize=1024)
def _cut(conv: Conv, tunables: tuple[float, int, int, int, int]) -> tuple[Item, ...]:
    """The items of a convolution. Large products are cut into row bands (of about BAND_BYTES
    of im2col, two for the per-tap products; when shared with the helper thread, an even count
    when there is one image and group, so both host threads get the same share); when such
    bands would be thinner than MIN_BAND_PIXELS, into two halves of the output channels
    (pointwise: the im2col matrix is x) or of the input channels (each half builds its own
    im2col rows; partial sums). The cuts do not depend on whether
    parallel_for shares them at the moment (a crowded host backs off): the channel halves' partial
    sums round differently, and a model's numbers must not depend on the host's load."""
    n, group, mg, cg, out, taps, itemsize, pointwise, by_taps = conv
    split_flops, band_bytes, single_bands, min_band_pixels, min_channel_part = tunables
    rest = math.prod(out[1:])
    pixels = out[0] * rest
    depth = cg * taps
    rows, m_parts, c_parts = max(1, out[0]), 1, 1
    if 2.0 * n * group * mg * depth * pixels >= split_flops:
        single = n * group == 1
        bands = 1 if by_taps else -(-pixels * depth * itemsize // band_bytes)
        bands = max(single_bands if single else 1, bands)
        bands += bands % 2 if single else 0
        rows = -(-out[0] // min(bands, out[0]))
        if single and (rows * rest < min_band_pixels or rows == out[0]):
            if pointwise and mg >= 2 * min_channel_part:
                rows, m_parts = out[0], 2
            elif not pointwise and cg >= 2:
                rows, c_parts = out[0], 2
    m_half, c_half = -(-mg // m_parts), -(-cg // c_parts)
    return tuple(
        Item(i, g, r0, min(r0 + rows, out[0]), m0, min(m0 + m_half, mg), c0, min(c0 + c_half, cg))
        for i in range(n)
        for g in range(group)
        for r0 in range(0, out[0], rows)
        for m0 in range(0, mg, m_half)
        for c0 in range(0, cg, c_half)
    )
