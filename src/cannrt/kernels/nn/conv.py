"""Convolution on the cube unit (the CANN Conv2D / Conv3D kernels): im2col + one matrix product.

Arguments: x (N, C, *spatial), w (M, C/group, *kernel), [b (M,)], y (N, M, *out), then ints
group, activation code, the window (kernel, strides, dilations, pads begin, pads end per axis),
then floats activation alpha, beta. A large convolution is cut into bands of output rows: per band
one strided copy gathers its im2col matrix (a 1x1 unit-stride convolution multiplies x itself)
and one product writes the band of the output in place, the bias and activation following while
the band is in cache; bands run on both host threads. A depthwise convolution accumulates per
kernel offset on the vector path. Reduced precision computes in fp32 and casts the result, as
the cube accumulates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cannrt.abi import CoreKind, TensorArg, Work, tensor_nbytes
from cannrt.dtypes import numpy_dtype
from cannrt.kernels.builtins import compute_dtype
from cannrt.kernels.nn import blas
from cannrt.kernels.nn.common import (
    ACTIVATION_VECTOR_OPS,
    activate,
    as_compute,
    check_float,
    cube_rate,
    cube_tiles,
    register,
    store,
)
from cannrt.kernels.nn.window import Window, padded
from cannrt.kernels.registry import ArgSpecs, KernelArgumentError, require_tensors

DEPTHWISE_MAX_TAPS = 64  # per-offset accumulation beats a batch of tiny products up to this


def _split(specs: ArgSpecs, bias: bool) -> tuple[list[TensorArg], int, int, Window, tuple[float, float]]:
    count = 4 if bias else 3
    name = "conv_bias" if bias else "conv"
    tensors = require_tensors(name, specs, count, 64)
    x = tensors[0]
    nd = len(x.shape) - 2
    if nd < 1:
        raise KernelArgumentError(f"{name}: input rank {len(x.shape)} < 3")
    scalars = list(specs[count:])
    if len(scalars) != 2 + 5 * nd + 2:
        raise KernelArgumentError(f"{name}: expected {4 + 5 * nd} scalars for {nd} spatial axes, got {len(scalars)}")
    group, act = scalars[0], scalars[1]
    if not isinstance(group, int) or not isinstance(act, int) or group < 1:
        raise KernelArgumentError(f"{name}: group {group} and activation {act} must be ints, group >= 1")
    window = Window.parse(name, nd, scalars[2 : 2 + 5 * nd])
    alpha, beta = (float(v) for v in scalars[2 + 5 * nd :])  # type: ignore[arg-type]
    return tensors, group, act, window, (alpha, beta)


def _check(specs: ArgSpecs, bias: bool) -> None:
    tensors, group, _, window, _ = _split(specs, bias)
    name = "conv_bias" if bias else "conv"
    x, w, y = tensors[0], tensors[1], tensors[-1]
    n, c = x.shape[:2]
    if len(w.shape) != len(x.shape) or len(y.shape) != len(x.shape):
        raise KernelArgumentError(f"{name}: x {x.shape}, w {w.shape} and y {y.shape} must share one rank")
    m = w.shape[0]
    if c % group or m % group or w.shape[1] * group != c:
        raise KernelArgumentError(f"{name}: {c} input channels, weight {w.shape} and group {group} do not match")
    if tuple(w.shape[2:]) != window.kernel:
        raise KernelArgumentError(f"{name}: weight {w.shape} does not match the kernel {window.kernel}")
    if tuple(y.shape[:2]) != (n, m):
        raise KernelArgumentError(f"{name}: output {y.shape} must start with ({n}, {m})")
    if bias and tuple(tensors[2].shape) != (m,):
        raise KernelArgumentError(f"{name}: bias {tensors[2].shape} must be ({m},)")
    for t in tensors:
        check_float(name, t)
    window.check(name, x, y, ceil_slack=False)


def _work(specs: ArgSpecs, bias: bool) -> Work:
    """Cube flops of the product; the im2col matrix streams through L1 once per output-column
    tile and the weights once per output-row tile, the re-reads served by L2."""
    tensors, group, act, window, _ = _split(specs, bias)
    x, w, y = tensors[0], tensors[1], tensors[-1]
    n, m = y.shape[:2]
    pixels = n * math.prod(y.shape[2:])
    depth = w.shape[1] * math.prod(window.kernel)
    item = numpy_dtype(x.dtype).itemsize
    tile_m, tile_n = cube_tiles(pixels, m // group)
    row_tiles = max(1, -(-pixels // tile_m))
    col_tiles = max(1, -(-(m // group) // tile_n))
    im2col = pixels * depth * group * item
    unique = sum(tensor_nbytes(t) for t in tensors[:-1])
    panels = col_tiles * im2col + row_tiles * tensor_nbytes(w)
    out_elements = pixels * m
    return Work(
        cube_flops=2.0 * pixels * m * depth,
        cube_rate=cube_rate(x),
        vector_ops=out_elements * ((1.0 if bias else 0.0) + (ACTIVATION_VECTOR_OPS if act else 0.0)),
        vector_rate=1.0,
        bytes_read=unique,
        l2_bytes_read=max(0, panels - unique),
        bytes_written=tensor_nbytes(y),
        units=group * row_tiles * col_tiles,
    )


BAND_BYTES = 2 << 20  # im2col bytes per band: a band's matrix stays in L2 while its product reads it
MIN_BAND_PIXELS = 128  # bands narrower than this make thin products: split the output channels instead
MIN_CHANNEL_PART = 32  # output channels per part when the channels are split


@dataclass(frozen=True)
class _Item:
    """One product of a convolution: image n, group g, output rows [r0, r1) of the first spatial
    axis, output channels [m0, m1) of the group."""

    n: int
    g: int
    r0: int
    r1: int
    m0: int
    m1: int


def _plan(n: int, group: int, mg: int, out: tuple[int, ...], depth: int, itemsize: int) -> tuple[list[_Item], bool]:
    """The items of a convolution, and whether they share one im2col matrix (channel parts).
    Large products are cut into row bands of about BAND_BYTES of im2col (an even count when
    there is one image and group, so both host threads get the same share), or into two channel
    halves when such bands would be thinner than MIN_BAND_PIXELS."""
    rest = math.prod(out[1:])
    pixels = out[0] * rest
    rows, parts = max(1, out[0]), 1
    if 2.0 * n * group * mg * depth * pixels >= blas.SPLIT_FLOPS:
        single = n * group == 1
        bands = max(2 if single else 1, -(-pixels * depth * itemsize // BAND_BYTES))
        bands += bands % 2 if single else 0
        rows = -(-out[0] // min(bands, out[0]))
        if single and (rows * rest < MIN_BAND_PIXELS or rows == out[0]) and mg >= 2 * MIN_CHANNEL_PART:
            rows, parts = out[0], 2
    half = -(-mg // parts)
    items = [
        _Item(i, g, r0, min(r0 + rows, out[0]), m0, min(m0 + half, mg))
        for i in range(n)
        for g in range(group)
        for r0 in range(0, out[0], rows)
        for m0 in range(0, mg, half)
    ]
    return items, parts > 1


def _columns(xp: np.ndarray, window: Window, out: tuple[int, ...], item: _Item, cg: int, dtype: np.dtype) -> np.ndarray:
    """(C/group * taps, band pixels) im2col matrix of one item's rows: one strided copy."""
    s, d, k = window.strides[0], window.dilations[0], window.kernel[0]
    channels = slice(item.g * cg, (item.g + 1) * cg)
    band = xp[item.n : item.n + 1, channels, item.r0 * s : (item.r1 - 1) * s + (k - 1) * d + 1]
    shape = (item.r1 - item.r0, *out[1:])
    cols = np.empty((cg * math.prod(window.kernel), math.prod(shape)), dtype=dtype)
    np.copyto(cols.reshape(1, cg, *window.kernel, *shape), window.unfold(band, shape), casting="unsafe")
    return cols


def _pointwise(x: np.ndarray, window: Window, out: tuple[int, ...]) -> bool:
    """A 1x1 unit-stride unpadded window: the im2col matrix is x itself."""
    return math.prod(window.kernel) == 1 and all(s == 1 for s in window.strides) and tuple(x.shape[2:]) == out


def convolve_into(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    group: int,
    window: Window,
    y: np.ndarray,
    activation: tuple[int, float, float],
) -> None:
    """y = act(conv(x, w) + bias), computed in the compute dtype: per item one im2col band and
    one product written straight into y's band (through a band-sized buffer when y is of
    another dtype), then the bias and activation on that band while it is in cache. Items run
    on both host threads (blas.parallel_for)."""
    dtype = compute_dtype(x)
    n, c = x.shape[:2]
    m = w.shape[0]
    cg, mg = c // group, m // group
    out = tuple(y.shape[2:])
    depth = cg * math.prod(window.kernel)
    rest = math.prod(out[1:])
    weights = as_compute(w).reshape(group, mg, depth)
    b = None if bias is None else as_compute(bias).reshape(group, mg, 1)
    pointwise = _pointwise(x, window, out)
    xp = as_compute(x) if pointwise else padded(x, window, out, 0.0, dtype)
    items, shared = _plan(n, group, mg, out, depth, dtype.itemsize)
    target = y if y.flags.c_contiguous else np.empty(y.shape, dtype)
    flat = target.reshape(n, m, out[0] * rest)
    common = None
    if shared and not pointwise:
        common = _columns(xp, window, out, items[0], cg, dtype)

    def run(index: int) -> None:
        item = items[index]
        if pointwise:
            plane = xp[item.n, item.g * cg : (item.g + 1) * cg].reshape(cg, -1)
            cols = plane[:, item.r0 * rest : item.r1 * rest]
        else:
            cols = common if common is not None else _columns(xp, window, out, item, cg, dtype)
        channels = slice(item.g * mg + item.m0, item.g * mg + item.m1)
        view = flat[item.n, channels, item.r0 * rest : item.r1 * rest]
        band = view if view.dtype == dtype else np.empty(view.shape, dtype)
        np.matmul(weights[item.g, item.m0 : item.m1], cols, out=band)
        if b is not None:
            band += b[item.g, item.m0 : item.m1]
        activate(band, *activation)
        if band is not view:
            store(view, band)

    blas.parallel_for(len(items), run)
    if target is not y:
        store(y, target)


def _depthwise(
    x: np.ndarray, w: np.ndarray, group: int, window: Window, out: tuple[int, ...], dtype: np.dtype
) -> np.ndarray:
    """Each group has one input channel: multiply-accumulate per kernel offset."""
    n = x.shape[0]
    mg = w.shape[0] // group
    xp = padded(x, window, out, 0.0, dtype)
    result = np.zeros((n, group, mg, *out), dtype=dtype)
    taps = w.reshape(group, mg, -1)
    expand = (slice(None), slice(None), *([None] * len(out)))
    for tap, view in enumerate(window.taps(xp, out)):
        result += view[:, :, None] * taps[:, :, tap][expand]
    return result.reshape(n, group * mg, *out)


def _conv_body(*args: object, bias: bool) -> None:
    count = 4 if bias else 3
    x, w = args[0], args[1]
    y = args[count - 1]
    assert isinstance(x, np.ndarray) and isinstance(w, np.ndarray) and isinstance(y, np.ndarray)
    group, act = int(args[count]), int(args[count + 1])  # type: ignore[call-overload]
    nd = x.ndim - 2
    window = Window.parse("conv", nd, args[count + 2 : count + 2 + 5 * nd])
    alpha, beta = (float(v) for v in args[count + 2 + 5 * nd :])  # type: ignore[arg-type]
    b = args[2] if bias else None
    assert b is None or isinstance(b, np.ndarray)
    if w.shape[1] == 1 and group > 1 and math.prod(window.kernel) <= DEPTHWISE_MAX_TAPS:
        dtype = compute_dtype(x)
        result = _depthwise(x, as_compute(w), group, window, tuple(y.shape[2:]), dtype)
        if b is not None:
            result += as_compute(b).reshape(-1, *([1] * nd))
        store(y, activate(result, act, alpha, beta))
        return
    convolve_into(x, w, b, group, window, y, (act, alpha, beta))


def _conv(*args: object, bias: bool) -> None:
    blas.limit_blas_threads()
    _conv_body(*args, bias=bias)


CONV = register(
    "conv",
    lambda *a: _conv(*a, bias=False),
    lambda s: _work(s, False),
    lambda s: _check(s, False),
    (2,),
    CoreKind.AICORE,
)
CONV_BIAS = register(
    "conv_bias",
    lambda *a: _conv(*a, bias=True),
    lambda s: _work(s, True),
    lambda s: _check(s, True),
    (3,),
    CoreKind.AICORE,
)
