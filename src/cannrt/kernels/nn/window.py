"""Sliding windows over the spatial axes of N x C x spatial tensors (convolution and pooling).

Window parameters travel as flat int scalars: per spatial axis the kernel extent, the stride,
the dilation, then the leading pads and the trailing pads. The output extent along an axis is
the output tensor's, so ceil_mode and auto_pad are settled by the shapes the graph engine
inferred; the kernel pads the trailing edge as far as the last window reaches.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cannrt.abi import TensorArg
from cannrt.kernels.nn.half import F16, F32, widen
from cannrt.kernels.registry import KernelArgumentError


@dataclass(frozen=True)
class Window:
    """Window geometry over the spatial axes."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]

    @classmethod
    def parse(cls, name: str, nd: int, values: Sequence[object]) -> Window:
        """Window from 5 x nd int scalars; KernelArgumentError for a missing or bad value. Every
        kernel call parses its scalars, so plain-int ones are parsed once per distinct tuple
        (a Window is immutable)."""
        if not all(type(v) is int for v in values):  # bools and int subclasses: plain ints first
            if len(values) != 5 * nd or not all(isinstance(v, int) for v in values):
                raise KernelArgumentError(f"{name}: expected {5 * nd} int window scalars, got {list(values)}")
            values = [int(v) for v in values]  # type: ignore[call-overload]
        parsed = _parse_ints(nd, tuple(values))
        if isinstance(parsed, str):
            raise KernelArgumentError(f"{name}: {parsed}")
        return parsed

    def scalars(self) -> tuple[int, ...]:
        """The flat scalar form."""
        return (*self.kernel, *self.strides, *self.dilations, *self.pads_begin, *self.pads_end)

    def reach(self, axis: int, out: int) -> int:
        """Padded input extent the out windows along axis read."""
        return (out - 1) * self.strides[axis] + (self.kernel[axis] - 1) * self.dilations[axis] + 1

    def check(self, name: str, x: TensorArg, y: TensorArg, ceil_slack: bool) -> None:
        """The output spatial extents follow from the input's (floor, or ceil when allowed)."""
        for axis, (extent, out) in enumerate(zip(x.shape[2:], y.shape[2:], strict=True)):
            span = extent + self.pads_begin[axis] + self.pads_end[axis]
            span -= (self.kernel[axis] - 1) * self.dilations[axis] + 1
            floor = span // self.strides[axis] + 1
            ceil = -(-span // self.strides[axis]) + 1
            allowed = {floor, ceil} if ceil_slack else {floor}
            if span < 0 or out not in allowed:
                raise KernelArgumentError(
                    f"{name}: spatial axis {axis}: input {extent} with {self} gives {sorted(allowed)}, output has {out}"
                )

    def offsets(self) -> Iterator[tuple[int, ...]]:
        """Every kernel offset, row-major (the order of the weight's spatial axes)."""
        return itertools.product(*(range(k) for k in self.kernel))

    def taps(self, xp: np.ndarray, out: Sequence[int]) -> Iterator[np.ndarray]:
        """Per kernel offset the strided view of the padded input that offset reads."""
        for offset in self.offsets():
            index: tuple[Any, ...] = tuple(
                slice(o * d, o * d + (n - 1) * s + 1, s)
                for o, d, s, n in zip(offset, self.dilations, self.strides, out, strict=True)
            )
            yield xp[(Ellipsis, *index)]

    def unfold(self, xp: np.ndarray, out: Sequence[int]) -> np.ndarray:
        """(N, C, *kernel, *out) strided view of the padded input: every tap of every window."""
        lead, spatial = xp.strides[:2], xp.strides[2:]
        taps = tuple(st * d for st, d in zip(spatial, self.dilations, strict=True))
        steps = tuple(st * s for st, s in zip(spatial, self.strides, strict=True))
        shape = (*xp.shape[:2], *self.kernel, *out)
        return np.lib.stride_tricks.as_strided(xp, shape, (*lead, *taps, *steps), writeable=False)

    def reduce(self, x: np.ndarray, out: Sequence[int], combine: np.ufunc, fill: float) -> np.ndarray:
        """combine over every window of the unpadded x, one spatial axis after the other
        (separable: k taps per axis instead of the product of the kernel's extents). Each tap
        combines into the output positions whose input it reaches, so pads (and the ceil-mode
        edge) never take part; a position no tap reaches holds fill."""
        result = x
        for axis, n in enumerate(out):
            result = self._reduce_axis(result, axis, n, combine, fill)
        return result

    def _reduce_axis(self, x: np.ndarray, axis: int, n: int, combine: np.ufunc, fill: float) -> np.ndarray:
        d, s, k, p = self.dilations[axis], self.strides[axis], self.kernel[axis], self.pads_begin[axis]
        extent = x.shape[2 + axis]
        lead: tuple[Any, ...] = (slice(None),) * (2 + axis)
        taps = []  # (first output, end output, input view) per kernel offset reaching the input
        for o in range(k):
            start = o * d - p  # input index of output 0
            lo = max(0, -(start // s))  # first output whose input index is >= 0
            hi = min(n, (extent - 1 - start) // s + 1) if extent - 1 - start >= 0 else 0
            if hi > lo:
                first = lo * s + start
                taps.append((lo, hi, x[(*lead, slice(first, first + (hi - lo - 1) * s + 1, s))]))
        full = [t for t in taps if t[0] == 0 and t[1] == n]
        rest = [t for t in taps if not (t[0] == 0 and t[1] == n)]
        shape = list(x.shape)
        shape[2 + axis] = n
        if len(full) >= 2:
            result = combine(full[0][2], full[1][2])
            full = full[2:]
        elif full:
            result = full[0][2].copy()
            full = []
        else:
            result = np.full(shape, fill, dtype=x.dtype)
        for lo, hi, view in full + rest:
            target = result[(*lead, slice(lo, hi))]
            combine(target, view, out=target)
        return np.asarray(result)


@functools.lru_cache(maxsize=1024)
def _parse_ints(nd: int, ints: tuple[int, ...]) -> Window | str:
    """Window.parse of plain ints: the Window, or what is wrong with them."""
    if len(ints) != 5 * nd:
        return f"expected {5 * nd} int window scalars, got {list(ints)}"
    window = Window(*(ints[i * nd : (i + 1) * nd] for i in range(5)))
    if min(window.kernel + window.strides + window.dilations, default=1) < 1:
        return f"kernel, strides and dilations must be >= 1, got {list(ints)}"
    if min(window.pads_begin + window.pads_end, default=0) < 0:
        return f"pads must be >= 0, got {list(ints)}"
    return window


def padded(x: np.ndarray, window: Window, out: Sequence[int], fill: float, dtype: np.dtype) -> np.ndarray:
    """x in dtype, padded with fill on the leading pads and as far as the last window reaches."""
    if x.dtype == F16 and dtype == F32:
        x = widen(x)  # numba's conversion, then a plain fp32 copy into the padded frame
    return padded_rows(x, window, out, None, fill, dtype)


def padded_extents(x: np.ndarray, window: Window, out: Sequence[int]) -> list[int]:
    """The spatial extents of `padded`'s result."""
    spatial = x.shape[2:]
    return [max(window.reach(a, n), window.pads_begin[a] + spatial[a]) for a, n in enumerate(out)]


FILL_WHOLE_ELEMENTS = 1 << 14  # padded_rows fills smaller frames whole, then copies x in


def padded_rows(
    x: np.ndarray,
    window: Window,
    out: Sequence[int],
    rows: tuple[int, int] | None,
    fill: float,
    dtype: np.dtype,
    slack: int = 0,
) -> np.ndarray:
    """Rows [start, stop) (None: all) of the first spatial axis of `padded(x, ...)`, built from x alone (so
    that each band of a kernel pads its own rows): x itself (in dtype) where no pad reaches into
    them and slack is 0, else a fresh array with `slack` zero elements after it."""
    spatial = x.shape[2:]
    extents = padded_extents(x, window, out)
    start, stop = rows if rows is not None else (0, extents[0])
    lead = window.pads_begin[0]
    begin = min(max(0, lead - start), stop - start)  # the pad rows before x's first ...
    end = min(max(0, stop - lead - spatial[0]), stop - start - begin)  # ... and after its last
    inside = stop - start - begin - end
    first = start + begin - lead if inside else 0  # x's rows [first, first + inside) are inside
    pads = [
        (begin, end),
        *((window.pads_begin[a], extents[a] - window.pads_begin[a] - spatial[a]) for a in range(1, len(spatial))),
    ]
    framed = any(b or e for b, e in pads)
    if not slack and not framed:
        return x[:, :, first : first + inside].astype(dtype, copy=False)
    shape = (*x.shape[:2], stop - start, *extents[1:])
    size = math.prod(shape)
    small = size <= FILL_WHOLE_ELEMENTS  # one fill beats a few slice assignments per axis
    buffer = np.full(size + slack, fill, dtype=dtype) if small else np.empty(size + slack, dtype=dtype)
    if slack:
        buffer[size:] = 0
    xp = buffer[:size].reshape(shape)
    if framed and not small:
        for axis, (b, e) in enumerate(pads):  # fill only the frame
            index: tuple[Any, ...] = (slice(None),) * (2 + axis)
            xp[(*index, slice(0, b))] = fill
            xp[(*index, slice(xp.shape[2 + axis] - e, None))] = fill
    inner: tuple[Any, ...] = (Ellipsis, *(slice(b, n - e) for (b, e), n in zip(pads, shape[2:], strict=True)))
    xp[inner] = x[:, :, first : first + inside]
    return xp


def valid_counts(window: Window, spatial: Sequence[int], out: Sequence[int], include_pad: bool) -> np.ndarray:
    """Per output position the number of window taps inside the input (or inside the explicit pads
    when include_pad): the divisor of average pooling."""
    total = np.ones((), dtype=np.float64)
    for axis, (extent, n) in enumerate(zip(spatial, out, strict=True)):
        begin = window.pads_begin[axis]
        low, high = (-begin, extent + window.pads_end[axis]) if include_pad else (0, extent)
        starts = np.arange(n) * window.strides[axis] - begin
        taps = starts[:, None] + np.arange(window.kernel[axis])[None, :] * window.dilations[axis]
        per_axis = ((taps >= low) & (taps < high)).sum(axis=1).astype(np.float64)
        total = np.multiply.outer(total, per_axis)
    return total
