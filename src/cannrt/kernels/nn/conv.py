"""Convolution on the cube unit (the CANN Conv2D / Conv3D kernels): im2col + one matrix product.

Arguments: x (N, C, *spatial), w (M, C/group, *kernel), [b (M,)], y (N, M, *out), then ints
group, activation code, the window (kernel, strides, dilations, pads begin, pads end per axis),
then floats activation alpha, beta. A large convolution is cut into bands of output rows
(conv_plan): per band one strided copy gathers its im2col matrix (a 1x1 unit-stride convolution
multiplies x itself) and one product writes the band of the output in place, the bias and a relu
following in one pass (conv_loops) while the band is in cache; bands (or, for a small image,
halves of the channels) run on both host threads. A unit-stride 2-D convolution with few output
channels skips im2col: one batched product over a strided view of the padded input per kernel
offset, summed. A depthwise convolution accumulates per
kernel offset on the vector path. Reduced precision computes in fp32 and casts the result, as
the cube accumulates.
"""

from __future__ import annotations

import math

import numpy as np

from cannrt.abi import CoreKind, TensorArg, Work, tensor_nbytes
from cannrt.dtypes import numpy_dtype
from cannrt.kernels.builtins import compute_dtype
from cannrt.kernels.nn import blas
from cannrt.kernels.nn.common import (
    ACT_RELU,
    ACTIVATION_VECTOR_OPS,
    activate,
    as_compute,
    check_float,
    cube_rate,
    cube_tiles,
    register,
    store,
)
from cannrt.kernels.nn.conv_loops import bias_act_into, takes
from cannrt.kernels.nn.conv_plan import Item, plan
from cannrt.kernels.nn.window import Window, padded, padded_rows
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


TAPS_MAX_CHANNELS = 64  # per-tap products (no im2col) for at most this many output channels per group
TAPS_MIN_CHANNELS = 64  # ... and at least this many input channels per group (the product's depth)
TAPS_MIN_PIXELS = 100  # ... and at least this many output pixels (per-product overhead on smaller ones)


def _by_taps(window: Window, cg: int, mg: int, out: tuple[int, ...]) -> bool:
    """A 2-D unit-stride convolution with few output channels and deep input: one product per
    kernel offset on a strided view of the padded input (rows of the padded width, the extra
    columns dropped), accumulated; small-M products on a K x pixels im2col matrix are slow in
    OpenBLAS (it packs the whole matrix for a few rows), and no im2col copy is made."""
    two_d = len(window.kernel) == 2 and window.strides == (1, 1)
    return two_d and mg <= TAPS_MAX_CHANNELS and cg >= TAPS_MIN_CHANNELS and math.prod(out) >= TAPS_MIN_PIXELS


def _columns(x: np.ndarray, window: Window, out: tuple[int, ...], item: Item, cg: int, dtype: np.dtype) -> np.ndarray:
    """(item's input channels * taps, band pixels) im2col matrix of one item's rows: the padded
    rows the band reads (built by the item), then one strided copy."""
    s, d, k = window.strides[0], window.dilations[0], window.kernel[0]
    channels = slice(item.g * cg + item.c0, item.g * cg + item.c1)
    rows = (item.r0 * s, (item.r1 - 1) * s + (k - 1) * d + 1)
    band = padded_rows(x[item.n : item.n + 1, channels], window, out, rows, 0.0, dtype)
    shape = (item.r1 - item.r0, *out[1:])
    cols = np.empty(((item.c1 - item.c0) * math.prod(window.kernel), math.prod(shape)), dtype=dtype)
    np.copyto(cols.reshape(1, item.c1 - item.c0, *window.kernel, *shape), window.unfold(band, shape), casting="unsafe")
    return cols


def _tap_sum(
    x: np.ndarray, window: Window, out: tuple[int, ...], per_tap: np.ndarray, item: Item, cg: int
) -> np.ndarray:
    """(item's output channels, band rows x padded width) sum over the kernel offsets of
    per_tap[offset] @ the (channels, rows x padded width) view of the padded input that the
    offset reads: each view is a contiguous run per channel of the padded rows the band reads
    (built by the item, with (kw - 1) * dw + 1 elements of slack after them for the last run's
    dropped columns). One batched product over the (kh, kw, channels, length) view of every
    offset, then one sum over the offsets (nine products and eight adds called one by one cost
    twice as much at 14 x 14: 0.33 against 0.17 ms)."""
    (dil_h, dil_w), channels = window.dilations, slice(item.g * cg + item.c0, item.g * cg + item.c1)
    rows = (item.r0, item.r1 + (window.kernel[0] - 1) * dil_h)
    slack = (window.kernel[1] - 1) * dil_w + 1
    band = padded_rows(x[item.n : item.n + 1, channels], window, out, rows, 0.0, x.dtype, slack)
    length = (item.r1 - item.r0) * band.shape[3]
    kh, kw = window.kernel
    weights = per_tap[item.g, :, item.m0 : item.m1, item.c0 : item.c1].reshape(kh, kw, item.m1 - item.m0, -1)
    shape = (kh, kw, item.c1 - item.c0, length)
    strides = (dil_h * band.strides[2], dil_w * band.strides[3], band.strides[1], band.strides[3])
    view = np.lib.stride_tricks.as_strided(band[0, 0, 0], shape, strides, writeable=False)
    products = np.matmul(weights, view)
    return np.asarray(products.reshape(kh * kw, *products.shape[2:]).sum(axis=0))


def _pointwise(x: np.ndarray, window: Window, out: tuple[int, ...]) -> bool:
    """A 1x1 unit-stride unpadded window: the im2col matrix is x itself."""
    return math.prod(window.kernel) == 1 and all(s == 1 for s in window.strides) and tuple(x.shape[2:]) == out


def _finish(view: np.ndarray, result: np.ndarray, bias: np.ndarray | None, act: tuple[int, float, float]) -> None:
    """view = act(result + bias), in view itself when it is of result's dtype (bias (m, 1, ...)):
    one pass for relu or none (conv_loops)."""
    if takes(result, view, act[0]):
        bias_act_into(result, view, None if bias is None else bias.reshape(-1), act[0] == ACT_RELU)
    elif view.dtype == result.dtype:
        if bias is None:
            np.copyto(view, result)
        else:
            np.add(result, bias, out=view)
        activate(view, *act)
    else:
        band = result + bias if bias is not None else result
        store(view, activate(band, *act))


def convolve_into(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    group: int,
    window: Window,
    y: np.ndarray,
    activation: tuple[int, float, float],
) -> None:
    """y = act(conv(x, w) + bias), computed in the compute dtype: per item one im2col band (or
    per-tap products, `_by_taps`) and one product written straight into y's band (through a
    band-sized buffer when y is of another dtype), then the bias and activation on that band
    while it is in cache; input-channel parts sum their partial products at the end. Items run
    on both host threads (blas.parallel_for)."""
    dtype = compute_dtype(x)
    n, c = x.shape[:2]
    m = w.shape[0]
    cg, mg = c // group, m // group
    out = tuple(y.shape[2:])
    taps = math.prod(window.kernel)
    depth = cg * taps
    rest = math.prod(out[1:])
    pointwise = _pointwise(x, window, out)  # x itself is the im2col matrix: no per-tap route either
    by_taps = not pointwise and _by_taps(window, cg, mg, out)
    weights = as_compute(w).reshape(group, mg, depth)
    per_tap = weights.reshape(group, mg, cg, taps).transpose(0, 3, 1, 2).copy() if by_taps else weights
    b = None if bias is None else as_compute(bias).reshape(group, mg, 1)
    xp = as_compute(x)  # each item pads the rows it reads
    items = plan(n, group, mg, cg, out, taps, dtype.itemsize, pointwise, by_taps)
    target = y if y.flags.c_contiguous else np.empty(y.shape, dtype)
    flat = target.reshape(n, m, out[0] * rest)
    summed = len(items) > 1 and items[0].c1 < cg
    partials = [np.empty((mg, out[0] * rest), dtype) for _ in items] if summed else []

    def run(index: int) -> None:
        item = items[index]
        channels = slice(item.g * mg + item.m0, item.g * mg + item.m1)
        bias_part = None if b is None else b[item.g, item.m0 : item.m1]
        if by_taps:
            total = _tap_sum(xp, window, out, per_tap, item, cg)
            valid = total.reshape(len(total), item.r1 - item.r0, -1)[:, :, : out[1]]
            if summed:
                np.copyto(partials[index].reshape(mg, *out), valid)
            else:
                view = target[item.n, channels, item.r0 : item.r1]
                _finish(view, valid, None if bias_part is None else bias_part[:, :, None], activation)
            return
        if pointwise:
            plane = xp[item.n, item.g * cg + item.c0 : item.g * cg + item.c1].reshape(item.c1 - item.c0, -1)
            cols = plane[:, item.r0 * rest : item.r1 * rest]
        else:
            cols = _columns(xp, window, out, item, cg, dtype)
        product = weights[item.g, item.m0 : item.m1, item.c0 * taps : item.c1 * taps]
        if summed:
            np.matmul(product, cols, out=partials[index])
            return
        view = flat[item.n, channels, item.r0 * rest : item.r1 * rest]
        band = view if view.dtype == dtype else np.empty(view.shape, dtype)
        np.matmul(product, cols, out=band)
        if takes(band, band, activation[0]):  # one pass (none without a bias: nothing to do)
            if bias_part is not None or activation[0] == ACT_RELU:
                bias_act_into(band, band, None if bias_part is None else bias_part[:, 0], activation[0] == ACT_RELU)
        else:
            if bias_part is not None:
                band += bias_part
            activate(band, *activation)
        if band is not view:
            store(view, band)

    blas.parallel_for(len(items), run)
    if summed:  # one image and group, all its rows and output channels: the parts add up
        total = partials[0]
        for partial in partials[1:]:
            total += partial
        _finish(flat[0], total, None if b is None else b[0], activation)
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
