"""Convolution on the cube unit (the CANN Conv2D / Conv3D kernels): im2col + one matrix product.

Arguments: x (N, C, *spatial), w (M, C/group, *kernel), [b (M,)], y (N, M, *out), then ints
group, activation code, the window (kernel, strides, dilations, pads begin, pads end per axis),
then floats activation alpha, beta. A 1x1 convolution is one matrix product on x itself; any
other gathers its im2col matrix with one strided copy per kernel offset and multiplies once (per
group, batched); a depthwise convolution accumulates per kernel offset on the vector path.
Reduced precision computes in fp32 and casts the result, as the cube accumulates.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cannrt.abi import CoreKind, TensorArg, Work, tensor_nbytes
from cannrt.dtypes import numpy_dtype
from cannrt.kernels.builtins import compute_dtype
from cannrt.kernels.nn.blas import limit_blas_threads, matmul_into
from cannrt.kernels.nn.common import (
    ACTIVATION_VECTOR_OPS,
    activate,
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


def im2col(x: np.ndarray, window: Window, out: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """(N, C, taps, *out) matrix of every kernel offset's input (one strided copy per offset);
    a 1x1 unit-stride unpadded window is x itself."""
    if math.prod(window.kernel) == 1 and not any(window.pads_begin):
        index: tuple[Any, ...] = (
            Ellipsis,
            *(slice(0, (n - 1) * s + 1, s) for n, s in zip(out, window.strides, strict=True)),
        )
        view = x[index]
        return np.asarray(view.astype(dtype, copy=False).reshape(*x.shape[:2], 1, *out))
    xp = padded(x, window, out, 0.0, x.dtype)
    cols = np.empty((*x.shape[:2], *window.kernel, *out), dtype=dtype)
    np.copyto(cols, window.unfold(xp, out), casting="unsafe")
    return cols.reshape(*x.shape[:2], math.prod(window.kernel), *out)


def convolve(
    x: np.ndarray, w: np.ndarray, group: int, window: Window, out: tuple[int, ...], into: np.ndarray | None = None
) -> np.ndarray:
    """(N, M, *out) convolution in the compute dtype; the product lands in `into` when given (a
    C-contiguous array of the compute dtype, such as the output itself)."""
    dtype = compute_dtype(x)
    n, c = x.shape[:2]
    m = w.shape[0]
    taps = math.prod(window.kernel)
    pixels = math.prod(out)
    cg, mg = c // group, m // group
    weights = w.astype(dtype, copy=False)
    if cg == 1 and group > 1 and taps <= DEPTHWISE_MAX_TAPS:
        return _depthwise(x, weights, group, window, out, dtype)
    cols = im2col(x, window, out, dtype).reshape(n, group, cg * taps, pixels)
    if into is not None:
        if n == 1 and group == 1:
            matmul_into(weights.reshape(m, cg * taps), cols.reshape(cg * taps, pixels), into.reshape(m, pixels))
        else:
            np.matmul(weights.reshape(group, mg, cg * taps), cols, out=into.reshape(n, group, mg, pixels))
        return into
    product = np.matmul(weights.reshape(group, mg, cg * taps), cols)
    return np.asarray(product).reshape(n, m, *out)


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
    direct = y.dtype == compute_dtype(x) and y.flags.c_contiguous
    result = convolve(x, w, group, window, tuple(y.shape[2:]), into=y if direct else None)
    if bias:
        b = args[2]
        assert isinstance(b, np.ndarray)
        result += b.astype(result.dtype, copy=False).reshape(-1, *([1] * nd))
    activate(result, act, alpha, beta)
    if result is not y:
        store(y, result)


def _conv(*args: object, bias: bool) -> None:
    limit_blas_threads()
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
