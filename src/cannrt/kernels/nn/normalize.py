"""Normalisations and reductions on the vector unit.

batchnorm x, scale, bias, mean, var, y, epsilon (inference: y = (x - mean) / sqrt(var + eps) *
scale + bias per channel); instancenorm x, scale, bias, y, epsilon; lrn x, y, size, alpha, beta,
bias; softmax x, y, axis, coerce (flatten at axis as opset < 13), kind (softmax, log-softmax,
hardmax); reduce x, y, kind, axes bit mask; argreduce x, y, axis, kind (max, min), select_last.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from cannrt.abi import TensorArg, Work, tensor_nbytes
from cannrt.kernels.builtins import ELEMENTS_PER_UNIT, compute_dtype, count, vector_rate
from cannrt.kernels.nn.common import (
    ACT_NONE,
    ACT_RELU,
    activate,
    as_compute,
    check_float,
    check_scalars,
    in_planes,
    register,
    store,
)
from cannrt.kernels.nn.jit import jit
from cannrt.kernels.registry import ArgSpecs, KernelArgumentError

SOFTMAX, LOG_SOFTMAX, HARDMAX = range(3)
REDUCE_KINDS = ("mean", "sum", "max", "min", "prod", "l1", "l2", "log_sum", "log_sum_exp", "sum_square")


def _input_work(ops: float, tensors: int) -> Callable[[ArgSpecs], Work]:
    """ops per element of the first input; every tensor read once, the last written."""

    def work(specs: ArgSpecs) -> Work:
        args = [s for s in specs if isinstance(s, TensorArg)][:tensors]
        elements = count(args[0])
        return Work(
            vector_ops=elements * ops,
            vector_rate=vector_rate(args[0]),
            bytes_read=sum(tensor_nbytes(t) for t in args[:-1]),
            bytes_written=tensor_nbytes(args[-1]),
            units=max(1, -(-elements // ELEMENTS_PER_UNIT)),
        )

    return work


def _channel(v: np.ndarray, rank: int) -> np.ndarray:
    return v.reshape(-1, *([1] * (rank - 2)))


def _batchnorm(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    y: np.ndarray,
    eps: float,
    act: int = ACT_NONE,
    alpha: float = 0.0,
    beta: float = 0.0,
) -> None:
    """y = act(x * factor + shift) per channel, factor = scale / sqrt(var + eps), shift = bias -
    mean * factor; straight into y when it has the compute dtype. fp32 with no activation or a
    relu: the factors and the pass in one numba loop per slab of (image, channel) planes."""
    if _one_pass(x, y, (scale, bias, mean, var), act):
        per = x.size // (x.shape[0] * x.shape[1])
        relu, epsilon = int(act == ACT_RELU), np.float32(eps)
        params = (scale, bias, mean, var)

        def slab(part: np.ndarray, target: np.ndarray, index: slice) -> None:
            _planes(part.reshape(-1), *params, epsilon, target.reshape(-1), relu, (index.start, per, 1))

        in_planes(x, y, slab)
        return
    dtype = compute_dtype(x)
    factor = as_compute(scale) / np.sqrt(as_compute(var) + dtype.type(eps))
    shift = as_compute(bias) - as_compute(mean) * factor
    rank = max(2, x.ndim)
    factor, shift = factor.astype(dtype, copy=False), shift.astype(dtype, copy=False)
    spatial = (1,) * (rank - 2)
    if x.ndim < 3 or x.shape[0] != 1:  # planes are channels only for one image: else one pass
        _affine(as_compute(x), _channel(factor, rank), _channel(shift, rank), y, (act, alpha, beta))
        return

    def planes(part: np.ndarray, target: np.ndarray, index: slice) -> None:
        scale, offset = factor[index].reshape(-1, 1, *spatial), shift[index].reshape(-1, 1, *spatial)
        _affine(part, scale, offset, target, (act, alpha, beta))

    in_planes(as_compute(x), y, planes)


def _affine(
    x: np.ndarray, factor: np.ndarray, shift: np.ndarray, y: np.ndarray, activation: tuple[int, float, float]
) -> None:
    """y = act(x * factor + shift), x in the compute dtype; straight into y when y has it. fp32
    planes with no activation or a relu take one fused pass (_planes), else numpy's."""
    target = y if y.dtype == x.dtype else np.empty(y.shape, x.dtype)
    planes = factor.size
    if (
        x.dtype == np.float32
        and activation[0] in (ACT_NONE, ACT_RELU)
        and x.flags.c_contiguous
        and target.flags.c_contiguous
        and x.ndim >= 2
        and x.shape[0] * x.shape[1] == planes
    ):
        per = x.size // max(1, planes)
        factors, shifts = factor.reshape(-1), shift.reshape(-1)
        unused = np.float32(0.0)
        _planes(
            x.reshape(-1), factors, shifts, factors, factors, unused, target.reshape(-1), activation[0], (0, per, 0)
        )
    else:
        np.multiply(x, factor, out=target)
        target += shift
        activate(target, *activation)
    if target is not y:
        store(y, target)


def _one_pass(x: np.ndarray, y: np.ndarray, params: tuple[np.ndarray, ...], act: int) -> bool:
    return (
        act in (ACT_NONE, ACT_RELU)
        and x.ndim >= 3
        and x.size > 0
        and x.dtype == y.dtype == np.float32
        and x.flags.c_contiguous
        and y.flags.c_contiguous
        and all(p.dtype == np.float32 and p.flags.c_contiguous for p in params)
    )


@jit
def _planes(
    x: np.ndarray,
    p: np.ndarray,
    q: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    eps: np.float32,
    out: np.ndarray,
    relu: int,
    shape: Any,
) -> None:
    """out = x * a + b per plane (per elements each, flat), then np.maximum(., 0) when relu (NaN
    stays NaN, -0.0 becomes 0.0). Plane k is channel (first + k) % p.size. derive: p and q are
    scale and bias, and a, b are rounded as numpy rounds them in fp32 (scale / sqrt(var + eps),
    bias - mean * a); else p and q are a and b themselves."""
    first, per, derive = shape
    channels = p.size
    for k in range(x.size // per):
        c = (first + k) % channels
        if derive:
            a = p[c] / np.sqrt(var[c] + eps)
            b = q[c] - mean[c] * a
        else:
            a, b = p[c], q[c]
        source, target = x[k * per : (k + 1) * per], out[k * per : (k + 1) * per]
        if relu:
            for j in range(per):
                v = source[j] * a + b
                target[j] = v if (v > 0 or v != v) else np.float32(0.0)
        else:
            for j in range(per):
                target[j] = source[j] * a + b


def _check_batchnorm(specs: ArgSpecs) -> None:
    x, *params, y = check_scalars("batchnorm", specs, 6, ints=0, floats=1 + len(specs[7:]))
    if len(specs) not in (7, 10) or (len(specs) == 10 and not isinstance(specs[7], int)):
        raise KernelArgumentError("batchnorm takes 6 tensors, epsilon, then optionally activation, alpha, beta")
    channels = x.shape[1] if len(x.shape) > 1 else 1
    if tuple(x.shape) != tuple(y.shape) or any(tuple(p.shape) != (channels,) for p in params):
        raise KernelArgumentError(f"batchnorm: x {x.shape}, parameters {[p.shape for p in params]}, y {y.shape}")
    check_float("batchnorm", x)


def _batchnorm_training(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    y: np.ndarray,
    running_mean: np.ndarray,
    running_var: np.ndarray,
    eps: float,
    momentum: float,
) -> None:
    """Training mode: normalise with the batch's own statistics (population variance) and
    update the running ones, running = running * momentum + batch * (1 - momentum)."""
    v = as_compute(x)
    axes = tuple(a for a in range(x.ndim) if a != 1)
    batch_mean, batch_var = v.mean(axis=axes), v.var(axis=axes)
    _batchnorm(v, scale, bias, batch_mean, batch_var, y, eps)  # v: x converted once
    store(running_mean, as_compute(mean) * momentum + batch_mean * (1 - momentum))
    store(running_var, as_compute(var) * momentum + batch_var * (1 - momentum))


def _check_batchnorm_training(specs: ArgSpecs) -> None:
    x, *params, y, running_mean, running_var = check_scalars("batchnorm_training", specs, 8, floats=2)
    channels = x.shape[1] if len(x.shape) > 1 else 1
    if tuple(x.shape) != tuple(y.shape) or any(
        tuple(p.shape) != (channels,) for p in (*params, running_mean, running_var)
    ):
        raise KernelArgumentError(f"batchnorm_training: x {x.shape}, y {y.shape}, parameters of {channels} channels")
    check_float("batchnorm_training", x)


def _instancenorm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, y: np.ndarray, eps: float) -> None:
    v = as_compute(x)
    axes = tuple(range(2, x.ndim))
    mean = v.mean(axis=axes, keepdims=True)
    var = ((v - mean) ** 2).mean(axis=axes, keepdims=True)
    normal = (v - mean) / np.sqrt(var + v.dtype.type(eps))
    store(y, normal * _channel(as_compute(scale), x.ndim) + _channel(as_compute(bias), x.ndim))


def _check_instancenorm(specs: ArgSpecs) -> None:
    x, scale, bias, y = check_scalars("instancenorm", specs, 4, floats=1)
    if len(x.shape) < 3 or tuple(x.shape) != tuple(y.shape) or tuple(scale.shape) != (x.shape[1],):
        raise KernelArgumentError(f"instancenorm: x {x.shape}, scale {scale.shape}, y {y.shape}")
    if tuple(bias.shape) != (x.shape[1],):
        raise KernelArgumentError(f"instancenorm: bias {bias.shape}")


def _lrn(x: np.ndarray, y: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> None:
    """Square sum over a window of `size` channels around each channel (prefix sums, no loop)."""
    v = as_compute(x)
    squares = np.square(v)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    zeros = [(0, 0)] * v.ndim
    zeros[1] = (before + 1, after)
    prefix = np.cumsum(np.pad(squares, zeros), axis=1)
    channels = v.shape[1]
    upper = np.take(prefix, np.arange(channels) + before + after + 1, axis=1)
    lower = np.take(prefix, np.arange(channels), axis=1)
    window = upper - lower
    store(y, v / (v.dtype.type(bias) + v.dtype.type(alpha / size) * window) ** v.dtype.type(beta))


def _check_lrn(specs: ArgSpecs) -> None:
    x, y = check_scalars("lrn", specs, 2, ints=1, floats=3)
    size = specs[2]
    if len(x.shape) < 3 or tuple(x.shape) != tuple(y.shape) or not isinstance(size, int) or size < 1:
        raise KernelArgumentError(f"lrn: x {x.shape}, y {y.shape}, size {specs[2]}")


def _softmax(x: np.ndarray, y: np.ndarray, axis: int, coerce: int, kind: int) -> None:
    v = as_compute(x)
    if coerce:
        v = v.reshape(math.prod(x.shape[:axis]), -1)
        axis = 1
    if kind == HARDMAX:
        result = np.zeros_like(v)
        np.put_along_axis(result, np.expand_dims(np.argmax(v, axis=axis), axis), 1.0, axis=axis)
    else:
        shifted = v - v.max(axis=axis, keepdims=True)
        if kind == LOG_SOFTMAX:
            result = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
        else:
            result = np.exp(shifted)
            result /= result.sum(axis=axis, keepdims=True)
    store(y, result)


def _check_softmax(specs: ArgSpecs) -> None:
    x, y = check_scalars("softmax", specs, 2, ints=3)
    axis, kind = int(specs[2]), int(specs[4])  # type: ignore[arg-type]
    if tuple(x.shape) != tuple(y.shape) or not 0 <= axis < max(1, len(x.shape)) or kind not in (0, 1, 2):
        raise KernelArgumentError(f"softmax: x {x.shape}, y {y.shape}, axis {axis}, kind {kind}")
    check_float("softmax", x)


def _axes(mask: int, rank: int) -> tuple[int, ...]:
    return tuple(a for a in range(rank) if mask >> a & 1)


def _empty_extreme(dtype: np.dtype, maximum: bool, floating: bool) -> float | int | bool:
    """The identity of max / min over an empty set: the dtype's lowest / highest value."""
    if floating:
        return -np.inf if maximum else np.inf
    if dtype == np.bool_:
        return not maximum
    info = np.iinfo(dtype)
    return int(info.min if maximum else info.max)


def _reduce(x: np.ndarray, y: np.ndarray, kind: int, mask: int) -> None:
    axes = _axes(mask, x.ndim)
    name = REDUCE_KINDS[kind]
    floating = x.dtype.kind == "f" or x.dtype.name == "bfloat16"
    v = as_compute(x) if floating else x
    with np.errstate(all="ignore"):
        if name in ("mean", "sum", "prod", "max", "min"):
            if name in ("max", "min") and x.size == 0:
                result = np.full(y.shape, _empty_extreme(x.dtype, name == "max", floating))
            else:
                result = getattr(np, name if name not in ("max", "min") else "a" + name)(v, axis=axes, keepdims=True)
        elif name == "l1":
            result = np.abs(v).sum(axis=axes, keepdims=True)
        elif name == "l2":
            result = np.sqrt(np.square(v.astype(np.float64) if not floating else v).sum(axis=axes, keepdims=True))
        elif name == "sum_square":
            result = np.square(v).sum(axis=axes, keepdims=True)
        elif name == "log_sum":
            result = np.log(v.sum(axis=axes, keepdims=True))
        else:  # log_sum_exp, shifted by the max for range
            if v.size == 0:
                result = np.full(y.shape, -np.inf)
            else:
                top = v.max(axis=axes, keepdims=True)
                top = np.where(np.isfinite(top), top, 0)
                result = np.log(np.exp(v - top).sum(axis=axes, keepdims=True)) + top
    store(y, np.asarray(result))


def _check_reduce(specs: ArgSpecs) -> None:
    x, y = check_scalars("reduce", specs, 2, ints=2)
    kind, mask = specs[2], specs[3]
    assert isinstance(kind, int) and isinstance(mask, int)
    if not 0 <= kind < len(REDUCE_KINDS) or mask >> len(x.shape):
        raise KernelArgumentError(f"reduce: kind {kind}, axes mask {mask:b} for rank {len(x.shape)}")
    kept = [1 if mask >> a & 1 else n for a, n in enumerate(x.shape)]
    if math.prod(kept) != math.prod(y.shape):
        raise KernelArgumentError(f"reduce: {x.shape} over mask {mask:b} cannot give {y.shape}")


def _argreduce(x: np.ndarray, y: np.ndarray, axis: int, kind: int, last: int) -> None:
    v = np.flip(x, axis=axis) if last else x
    index = np.argmax(v, axis=axis) if kind == 0 else np.argmin(v, axis=axis)
    if last:
        index = x.shape[axis] - 1 - index
    store(y, index.astype(np.int64))


def _check_argreduce(specs: ArgSpecs) -> None:
    x, y = check_scalars("argreduce", specs, 2, ints=3)
    axis = specs[2]
    assert isinstance(axis, int)
    if not 0 <= axis < len(x.shape) or math.prod(y.shape) * x.shape[axis] != math.prod(x.shape):
        raise KernelArgumentError(f"argreduce: {x.shape} on axis {axis} -> {y.shape}")


BATCHNORM = register("batchnorm", _batchnorm, _input_work(2.0, 6), _check_batchnorm, (5,))
BATCHNORM_TRAINING = register(
    "batchnorm_training", _batchnorm_training, _input_work(6.0, 6), _check_batchnorm_training, (5, 6, 7)
)
INSTANCENORM = register("instancenorm", _instancenorm, _input_work(6.0, 4), _check_instancenorm, (3,))
LRN = register("lrn", _lrn, _input_work(8.0, 2), _check_lrn, (1,))
SOFTMAX_KERNEL = register("softmax", _softmax, _input_work(5.0, 2), _check_softmax, (1,))
REDUCE = register("reduce", _reduce, _input_work(1.0, 2), _check_reduce, (1,))
ARGREDUCE = register("argreduce", _argreduce, _input_work(1.0, 2), _check_argreduce, (1,))
