"""Convolution on the cube unit (the CANN Conv2D / Conv3D kernels): im2col + one matrix product.

Arguments: x (N, C, *spatial), w (M, C/group, *kernel), [b (M,)], y (N, M, *out), then ints
group, activation code, the window (kernel, strides, dilations, pads begin, pads end per axis),
then floats activation alpha, beta. conv_gemm computes it in numba: per item of conv_plan (bands
of output rows, or parts of the output channels over an im2col matrix built once; a 1x1
unit-stride window multiplies x itself) one BLAS product, the bias and a relu added in the pass
that writes y, the items on a team of native threads (team.py). A depthwise convolution
accumulates per kernel offset on the vector path. Reduced precision computes in fp32 and casts
the result, as the cube accumulates.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from cannrt.abi import CoreKind, TensorArg, Work, tensor_nbytes
from cannrt.dtypes import numpy_dtype
from cannrt.kernels.builtins import compute_dtype
from cannrt.kernels.nn import blas
from cannrt.kernels.nn.common import (
    ACT_NONE,
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
from cannrt.kernels.nn.conv_plan import Plan, plan, winograd, winograd_window
from cannrt.kernels.nn.window import Window, padded
from cannrt.kernels.registry import ArgSpecs, KernelArgumentError, require_tensors

DEPTHWISE_MAX_TAPS = 64  # per-offset accumulation beats a batch of tiny products up to this


def _name(bias: bool, transformed: bool) -> str:
    return ("conv_bias" if bias else "conv") + ("_winograd" if transformed else "")


def _split(
    specs: ArgSpecs, bias: bool, transformed: bool = False
) -> tuple[list[TensorArg], int, int, Window, tuple[float, float]]:
    count = 3 + bias + transformed
    name = _name(bias, transformed)
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


def _check(specs: ArgSpecs, bias: bool, transformed: bool = False) -> None:
    tensors, group, _, window, _ = _split(specs, bias, transformed)
    name = _name(bias, transformed)
    if transformed:
        _check_transformed(name, tensors, group, window)
        tensors = [t for i, t in enumerate(tensors) if i != 2]
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


def _check_transformed(name: str, tensors: list[TensorArg], group: int, window: Window) -> None:
    """The Winograd kernels: a 2-D 3x3 window of unit strides and dilations, one group, and the
    transformed weights (16, M, C) in the compute dtype (fp64 for fp64, else fp32)."""
    x, w, u, y = tensors[0], tensors[1], tensors[2], tensors[-1]
    if not winograd_window(group, window.kernel, window.strides, window.dilations, tuple(y.shape[2:])):
        raise KernelArgumentError(f"{name}: takes a 2-D 3x3 window of unit strides and dilations, one group")
    wanted = np.dtype(np.float64) if numpy_dtype(x.dtype) == np.float64 else np.dtype(np.float32)
    if tuple(u.shape) != (16, w.shape[0], w.shape[1]) or numpy_dtype(u.dtype) != wanted:
        wants = f"(16, {w.shape[0]}, {w.shape[1]}) {wanted}"
        raise KernelArgumentError(f"{name}: transformed weights {u.shape} {numpy_dtype(u.dtype)} must be {wants}")


def _work(specs: ArgSpecs, bias: bool, transformed: bool = False) -> Work:
    """Cube flops of the product; the im2col matrix streams through L1 once per output-column
    tile and the weights once per output-row tile, the re-reads served by L2. The Winograd
    kernels read the transformed weights instead."""
    if transformed:
        u, w = specs[2], specs[1]
        assert isinstance(u, TensorArg) and isinstance(w, TensorArg)
        work = _work([a for i, a in enumerate(specs) if i != 2], bias)
        return dataclasses.replace(work, bytes_read=work.bytes_read + tensor_nbytes(u) - tensor_nbytes(w))
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


def _padded3(values: tuple[int, ...], fill: int) -> tuple[int, ...]:
    return (fill,) * (3 - len(values)) + values


def _geometry(
    x_shape: tuple[int, ...], window: Window, out: tuple[int, ...], group: int, cg: int, mg: int
) -> tuple[int, ...]:
    """conv_gemm's geometry tuple: 1-D and 2-D windows as 3-D ones of extent 1."""
    return (
        *_padded3(x_shape[2:], 1),
        *_padded3(window.kernel, 1),
        *_padded3(window.strides, 1),
        *_padded3(window.dilations, 1),
        *_padded3(window.pads_begin, 0),
        *_padded3(out, 1),
        group,
        cg,
        mg,
    )


_NO_BIAS = {np.dtype(np.float32): np.zeros(1, np.float32), np.dtype(np.float64): np.zeros(1, np.float64)}
_NO_COLS = {dtype: np.empty((1, 1, 1), dtype) for dtype in _NO_BIAS}
_NO_WEIGHTS = {dtype: np.empty((0, 0), dtype) for dtype in _NO_BIAS}


_HUGE = np.float32(3e38)


def _raise_overflow_flag() -> None:
    """Raise numpy's overflow flag on this thread, where the device reads a kernel's float status
    (the products ran on the team's threads and in BLAS, out of its sight). Only under a callback
    policy (the device's): a direct call does not warn."""
    if np.geterr()["over"] == "call":
        np.multiply(_HUGE, _HUGE)


@dataclasses.dataclass(frozen=True)
class _Setup:
    """What a convolution's shapes decide, worked out once per launch shape (the Python work of a
    call: 9.7 -> 7.7 us for a tiny 3x3; a squeezenet execute makes 26 calls)."""

    x3: tuple[int, int, int]  # x as (N, C, S), w as (G, Mg, K), y as (N, M, P)
    w3: tuple[int, int, int]
    y3: tuple[int, int, int]
    geometry: tuple[int, ...]
    flags: tuple[bool, bool, bool]  # biased, relu fused, pointwise
    items: Plan
    winograd: bool
    cols: tuple[int, int, int]  # the im2col matrices of a cut by parts


@functools.lru_cache(maxsize=1024)
def _setup(
    x_shape: tuple[int, ...], w_shape: tuple[int, ...], y_shape: tuple[int, ...], group: int, window: Window,
    biased: bool, relu: bool, itemsize: int,
) -> _Setup:  # fmt: skip
    n, c = x_shape[:2]
    m = w_shape[0]
    cg, mg = c // group, m // group
    out = y_shape[2:]
    taps = math.prod(window.kernel)
    pointwise = taps == 1 and all(s == 1 for s in window.strides) and x_shape[2:] == out
    pointwise = pointwise and not any(window.pads_begin)
    geometry = _geometry(x_shape, window, out, group, cg, mg)
    rows, width = math.prod(geometry[15:17]), geometry[17]
    unit = len(out) <= 2 and all(s == 1 for s in window.strides)
    return _Setup(
        (n, c, math.prod(x_shape[2:])),
        (group, mg, cg * taps),
        (n, m, math.prod(out)),
        geometry,
        (biased, relu, pointwise),
        plan(n, group, mg, cg, taps, rows, width, itemsize, pointwise, unit),
        winograd(group, mg, cg, window.kernel, window.strides, window.dilations, out),
        (1, 1, 1) if pointwise else (n * group, cg * taps, rows * width),
    )


def convolve_into(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    group: int,
    window: Window,
    y: np.ndarray,
    activation: tuple[int, float, float],
    transformed: np.ndarray | None = None,
) -> None:
    """y = act(conv(x, w) + bias), computed in the compute dtype by conv_gemm (im2col and one
    BLAS product per item of conv_plan, the bias and a relu fused into the pass that writes y;
    the items on the thread team), or by Winograd's products (conv_plan.winograd, or always
    with `transformed` weights: conv_winograd.transform_weights of w), then any other
    activation in place, and a cast into y when it is of another dtype or not contiguous."""
    from cannrt.kernels.nn import conv_gemm, conv_winograd  # numba: imported by the first convolution

    if not y.size:
        return
    dtype = compute_dtype(x)
    code = activation[0]
    setup = _setup(x.shape, w.shape, y.shape, group, window, bias is not None, code == ACT_RELU, dtype.itemsize)
    x3 = np.ascontiguousarray(as_compute(x)).reshape(setup.x3)
    w3 = np.ascontiguousarray(as_compute(w)).reshape(setup.w3)
    b = _NO_BIAS[dtype] if bias is None else np.ascontiguousarray(as_compute(bias), dtype)
    target = y if y.dtype == dtype and y.flags.c_contiguous else np.empty(y.shape, dtype)
    arrays = (x3, w3, b, target.reshape(setup.y3))
    geometry, flags, items = setup.geometry, setup.flags, setup.items
    status = None
    if setup.winograd or transformed is not None:
        scratch = conv_winograd.workspace(conv_winograd.workspace_size(x.shape[0], geometry), dtype)
        status = np.zeros(conv_winograd.PARTS)
        u = _NO_WEIGHTS[dtype] if transformed is None else transformed.reshape(16, -1)
        conv_winograd.conv_winograd(items.flops, arrays, geometry, flags, scratch, status, u)
    # Winograd's transforms subtract products: where the direct sum overflows to inf they give
    # inf - inf = NaN, so a convolution that met a non-finite value is computed again directly
    if status is None or any(status.tolist()):
        if items.bands is not None:
            status = np.zeros(len(items.bands))
            loop = conv_gemm.conv_taps if items.by_taps else conv_gemm.conv_bands
            loop(items.flops, arrays, geometry, items.bands, flags, status)
        else:
            cols = _NO_COLS[dtype] if flags[2] else np.empty(setup.cols, dtype)
            status = np.zeros(len(items.parts))
            conv_gemm.conv_parts(items.flops, arrays, geometry, items.builds, items.parts, cols, flags, status)
    if any(status.tolist()):  # inf or nan (NaN is true): the flag numpy would show (ndarray.any: 1-5 us)
        _raise_overflow_flag()
    if code not in (ACT_NONE, ACT_RELU):
        activate(target, *activation)
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


def _conv_body(*args: object, bias: bool, transformed: bool = False) -> None:
    count = 3 + bias + transformed
    x, w = args[0], args[1]
    y = args[count - 1]
    u = args[2] if transformed else None
    assert u is None or isinstance(u, np.ndarray)
    assert isinstance(x, np.ndarray) and isinstance(w, np.ndarray) and isinstance(y, np.ndarray)
    group, act = int(args[count]), int(args[count + 1])  # type: ignore[call-overload]
    nd = x.ndim - 2
    window = Window.parse("conv", nd, args[count + 2 : count + 2 + 5 * nd])
    alpha, beta = (float(v) for v in args[count + 2 + 5 * nd :])  # type: ignore[arg-type]
    b = args[2 + transformed] if bias else None
    assert b is None or isinstance(b, np.ndarray)
    if w.shape[1] == 1 and group > 1 and math.prod(window.kernel) <= DEPTHWISE_MAX_TAPS:
        dtype = compute_dtype(x)
        result = _depthwise(x, as_compute(w), group, window, tuple(y.shape[2:]), dtype)
        if b is not None:
            result += as_compute(b).reshape(-1, *([1] * nd))
        store(y, activate(result, act, alpha, beta))
        return
    convolve_into(x, w, b, group, window, y, (act, alpha, beta), u)  # u: in the compute dtype (_check)


def _conv(*args: object, bias: bool, transformed: bool = False) -> None:
    blas.limit_blas_threads()
    _conv_body(*args, bias=bias, transformed=transformed)


def _register(bias: bool, transformed: bool) -> None:
    """conv and conv_bias: x, w, [b], y; ge's Winograd kernels conv_winograd and
    conv_bias_winograd: x, w, the weights transformed (conv_winograd.transform_weights), [b], y."""
    register(
        _name(bias, transformed),
        lambda *a: _conv(*a, bias=bias, transformed=transformed),
        lambda s: _work(s, bias, transformed),
        lambda s: _check(s, bias, transformed),
        (2 + bias + transformed,),
        CoreKind.AICORE,
    )


for _bias in (False, True):
    for _transformed in (False, True):
        _register(_bias, _transformed)
