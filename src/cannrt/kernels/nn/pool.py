"""Pooling on the vector unit (the CANN MaxPoolV3 / AvgPoolV2 / GlobalAveragePool kernels).

maxpool: x, y, then the window ints (kernel, strides, dilations, pads begin, pads end per axis);
maxpool_indices: x, y, indices, storage order, window; avgpool: x, y, count_include_pad, window;
global_avgpool / global_maxpool: x, y. A 2-D fp32 / fp64 max pooling is one numba pass
(pool_loops.py). Other max and average poolings reduce one spatial axis after the other, one
strided view of the unpadded input per kernel offset (Window.reduce), in slabs of planes on both
host threads for large inputs: no loop over pixels, no padded copy.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from cannrt.abi import TensorArg, Work, tensor_nbytes
from cannrt.kernels.builtins import ELEMENTS_PER_UNIT, compute_dtype, vector_rate
from cannrt.kernels.nn.common import as_compute, check_scalars, in_planes, register, store
from cannrt.kernels.nn.window import Window, padded, valid_counts
from cannrt.kernels.registry import ArgSpecs, KernelArgumentError


def _window_of(name: str, specs: ArgSpecs, tensors: int, lead: int) -> tuple[list[TensorArg], Window]:
    x = specs[0]
    if not isinstance(x, TensorArg) or len(x.shape) < 3:
        raise KernelArgumentError(f"{name}: the input must be a tensor of rank >= 3")
    nd = len(x.shape) - 2
    args = check_scalars(name, specs, tensors, ints=lead + 5 * nd)
    window = Window.parse(name, nd, specs[tensors + lead :])
    for y in args[1:]:
        if len(y.shape) != len(x.shape) or tuple(y.shape[:2]) != tuple(x.shape[:2]):
            raise KernelArgumentError(f"{name}: output {y.shape} does not match input {x.shape}")
    window.check(name, args[0], args[1], ceil_slack=True)
    return args, window


def _work(tensors: int, lead: int, name: str) -> Callable[[ArgSpecs], Work]:
    def work(specs: ArgSpecs) -> Work:
        args, window = _window_of(name, specs, tensors, lead)
        outs = sum(math.prod(t.shape) for t in args[1:2])
        return Work(
            vector_ops=outs * math.prod(window.kernel) * (2.0 if tensors == 3 else 1.0),
            vector_rate=vector_rate(args[0]),
            bytes_read=tensor_nbytes(args[0]),
            bytes_written=sum(tensor_nbytes(t) for t in args[1:]),
            units=max(1, -(-outs // ELEMENTS_PER_UNIT)),
        )

    return work


def _fill_for(dtype: np.dtype) -> float:
    return -np.inf if dtype.kind == "f" else float(np.iinfo(dtype).min)


def _maxpool(x: np.ndarray, y: np.ndarray, *ints: int) -> None:
    from cannrt.kernels.nn import pool_loops  # numba: imported by the first max pooling

    window = Window.parse("maxpool", x.ndim - 2, ints)
    v = as_compute(x) if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else x
    out = tuple(y.shape[2:])
    if pool_loops.takes(v, y):
        pool_loops.maxpool_into(v.reshape(-1, *v.shape[2:]), y.reshape(-1, *out), window)
        return
    fill = _fill_for(v.dtype)
    in_planes(v, y, lambda part, target, _: store(target, window.reduce(part, out, np.maximum, fill)))


def _maxpool_indices(x: np.ndarray, y: np.ndarray, indices: np.ndarray, order: int, *ints: int) -> None:
    """Max and the flat index (row-major, or column-major over the spatial axes) of its element."""
    window = Window.parse("maxpool_indices", x.ndim - 2, ints)
    dtype = np.dtype(compute_dtype(x) if x.dtype.kind == "f" else x.dtype)
    out = tuple(y.shape[2:])
    spatial = x.shape[2:]
    xp = padded(x, window, out, _fill_for(dtype), dtype)
    best = np.full((*x.shape[:2], *out), _fill_for(dtype), dtype=dtype)
    where = np.zeros(best.shape, dtype=np.int64)
    strides = np.cumprod((1, *spatial[::-1]))[:-1][::-1] if not order else np.cumprod((1, *spatial))[:-1]
    for offset, view in zip(window.offsets(), window.taps(xp, out), strict=True):
        flat = np.zeros(out, dtype=np.int64)
        for axis, (o, n) in enumerate(zip(offset, out, strict=True)):
            coordinate = np.arange(n) * window.strides[axis] + o * window.dilations[axis] - window.pads_begin[axis]
            shape = [1] * len(out)
            shape[axis] = n
            flat = flat + (coordinate * int(strides[axis])).reshape(shape)
        better = view > best
        np.copyto(best, view, where=better)
        np.copyto(where, np.broadcast_to(flat, where.shape), where=better)
    planes = np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(*x.shape[:2], *([1] * len(out)))
    store(y, best)
    store(indices, where + planes * math.prod(spatial))


def _avgpool(x: np.ndarray, y: np.ndarray, include_pad: int, *ints: int) -> None:
    window = Window.parse("avgpool", x.ndim - 2, ints)
    v = as_compute(x)
    out = tuple(y.shape[2:])
    counts = valid_counts(window, x.shape[2:], out, bool(include_pad)).astype(v.dtype)

    def average(part: np.ndarray, target: np.ndarray, _: slice) -> None:
        total = window.reduce(part, out, np.add, 0.0)
        total /= counts
        store(target, total)

    in_planes(v, y, average)


def _global(x: np.ndarray, y: np.ndarray, reduce: str) -> None:
    axes = tuple(range(2, x.ndim))
    if reduce == "mean" and x.flags.c_contiguous and x.size:
        # one product with a ones vector (BLAS ?gemv), then the division mean makes: 1000 x 13 x 13
        # 10 us, against 42 for mean(axis=1) and 116 for mean over two axes (as accurate: 9e-8)
        planes = as_compute(x).reshape(x.shape[0] * x.shape[1], -1)
        store(y, np.dot(planes, np.ones(planes.shape[1], planes.dtype)) / planes.dtype.type(planes.shape[1]))
        return
    value = as_compute(x).mean(axis=axes, keepdims=True) if reduce == "mean" else x.max(axis=axes, keepdims=True)
    store(y, value)


def _check_global(name: str, specs: ArgSpecs) -> None:
    x, y = check_scalars(name, specs, 2)
    if len(x.shape) < 3 or tuple(y.shape) != (*x.shape[:2], *([1] * (len(x.shape) - 2))):
        raise KernelArgumentError(f"{name}: input {x.shape} -> output {y.shape} (expected N, C, 1, ...)")


def _global_work(specs: ArgSpecs) -> Work:
    x, y = specs[0], specs[1]
    assert isinstance(x, TensorArg) and isinstance(y, TensorArg)
    return Work(
        vector_ops=math.prod(x.shape),
        vector_rate=vector_rate(x),
        bytes_read=tensor_nbytes(x),
        bytes_written=tensor_nbytes(y),
        units=max(1, math.prod(y.shape)),  # one (n, c) plane per unit
    )


def _checker(name: str, tensors: int, lead: int) -> Callable[[ArgSpecs], None]:
    def check(specs: ArgSpecs) -> None:
        _window_of(name, specs, tensors, lead)

    return check


MAXPOOL = register("maxpool", _maxpool, _work(2, 0, "maxpool"), _checker("maxpool", 2, 0), (1,))
MAXPOOL_INDICES = register(
    "maxpool_indices",
    _maxpool_indices,
    _work(3, 1, "maxpool_indices"),
    _checker("maxpool_indices", 3, 1),
    (1, 2),
)
AVGPOOL = register("avgpool", _avgpool, _work(2, 1, "avgpool"), _checker("avgpool", 2, 1), (1,))
GLOBAL_AVGPOOL = register(
    "global_avgpool",
    lambda x, y: _global(x, y, "mean"),
    _global_work,
    lambda s: _check_global("global_avgpool", s),
    (1,),
)
GLOBAL_MAXPOOL = register(
    "global_maxpool",
    lambda x, y: _global(x, y, "max"),
    _global_work,
    lambda s: _check_global("global_maxpool", s),
    (1,),
)
