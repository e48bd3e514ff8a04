"""Elementwise operators on the vector unit: activations, arithmetic and comparisons.

Unary kernels take x, y, then their float parameters; binary kernels a, b, y (inputs broadcast
to y, ONNX multidirectional broadcasting); `where` takes condition, a, b, y. Floats compute in
fp32 (fp64 for fp64 tensors) and round once into the output's dtype.

cast x, y, saturate, round_mode converts to y's dtype as ONNX Cast does (kernels/casting.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from cannrt.kernels.builtins import compute_dtype, vector_work
from cannrt.kernels.casting import ROUND_MODES, cast_into
from cannrt.kernels.nn.common import (
    ACT_NONE,
    ACT_RELU,
    ACTIVATION_VECTOR_OPS,
    activate,
    as_compute,
    check_broadcast,
    check_float,
    check_same_shape,
    check_scalars,
    register,
    sigmoid,
    store,
)
from cannrt.kernels.nn.half import F16, F32, binary_into, relu_into  # numpy's fp16 loops are scalar
from cannrt.kernels.nn.jit import jit
from cannrt.kernels.registry import ArgSpecs, Kernel, KernelArgumentError

Unary = Callable[..., np.ndarray]


def _erf_loop(x: np.ndarray, out: np.ndarray) -> None:
    for i in range(x.size):
        out[i] = math.erf(np.float64(x[i]))  # in double, rounded once into out (erff is 1 ulp off)


_erf_compiled = jit(_erf_loop)


def _erf(v: np.ndarray) -> np.ndarray:
    """erf as libm computes it (Abramowitz-Stegun 7.1.26 is too coarse for fp32), in a numba loop."""
    out = np.empty(v.shape, v.dtype)
    if v.size:
        _erf_compiled(np.ascontiguousarray(v).reshape(-1), out.reshape(-1))
    return out


def _hard_swish(v: np.ndarray) -> np.ndarray:
    return v * np.clip(v * (1.0 / 6.0) + 0.5, 0.0, 1.0)


def _leaky(v: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(v < 0, v * v.dtype.type(alpha), v)


def _elu(v: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(v < 0, (np.exp(np.minimum(v, 0)) - 1) * v.dtype.type(alpha), v)


def _selu(v: np.ndarray, alpha: float, gamma: float) -> np.ndarray:
    return np.asarray(v.dtype.type(gamma) * np.where(v <= 0, (np.exp(np.minimum(v, 0)) - 1) * v.dtype.type(alpha), v))


def _softplus(v: np.ndarray) -> np.ndarray:
    return np.asarray(np.logaddexp(v, v.dtype.type(0)))


UNARY: dict[str, tuple[Unary, int, float]] = {  # name -> (function, float parameters, vector ops)
    "relu": (lambda v: np.maximum(v, v.dtype.type(0)), 0, 1.0),
    "sigmoid": (lambda v: sigmoid(v, np.empty_like(v)), 0, 4.0),
    "tanh": (np.tanh, 0, 4.0),
    "exp": (np.exp, 0, 2.0),
    "log": (np.log, 0, 2.0),
    "sqrt": (np.sqrt, 0, 2.0),
    "neg": (np.negative, 0, 1.0),
    "abs": (np.abs, 0, 1.0),
    "reciprocal": (np.reciprocal, 0, 2.0),
    "floor": (np.floor, 0, 1.0),
    "ceil": (np.ceil, 0, 1.0),
    "round": (np.round, 0, 1.0),
    "sign": (np.sign, 0, 1.0),
    "erf": (_erf, 0, 8.0),
    "sin": (np.sin, 0, 4.0),
    "cos": (np.cos, 0, 4.0),
    "softplus": (_softplus, 0, 4.0),
    "softsign": (lambda v: v / (1 + np.abs(v)), 0, 3.0),
    "hard_swish": (_hard_swish, 0, 4.0),
    "hard_sigmoid": (lambda v, a, b: np.clip(v * v.dtype.type(a) + v.dtype.type(b), 0.0, 1.0), 2, 3.0),
    "leaky_relu": (_leaky, 1, 2.0),
    "elu": (_elu, 1, 4.0),
    "celu": (lambda v, a: np.maximum(v, 0) + np.minimum(0, a * (np.exp(v / v.dtype.type(a)) - 1)), 1, 5.0),
    "selu": (_selu, 2, 5.0),
    "thresholded_relu": (lambda v, a: np.where(v > v.dtype.type(a), v, v.dtype.type(0)), 1, 2.0),
    "clip": (lambda v, lo, hi: np.minimum(np.maximum(v, lo), hi), 2, 2.0),
    "mish": (lambda v: v * np.tanh(_softplus(v)), 0, 8.0),
}
INTEGER_SAFE = {"relu", "neg", "abs", "sign", "clip"}  # integer tensors compute in their own dtype


# Unary ops that are one numpy ufunc: computed straight into the output when its dtype is the
# input's and the compute dtype (no temporary, no second pass).
DIRECT_UNARY: dict[str, Callable[[np.ndarray, np.ndarray], object]] = {
    "relu": lambda x, y: np.maximum(x, x.dtype.type(0), out=y),
    "tanh": lambda x, y: np.tanh(x, out=y),
    "exp": lambda x, y: np.exp(x, out=y),
    "log": lambda x, y: np.log(x, out=y),
    "sqrt": lambda x, y: np.sqrt(x, out=y),
    "neg": lambda x, y: np.negative(x, out=y),
    "abs": lambda x, y: np.abs(x, out=y),
    "sin": lambda x, y: np.sin(x, out=y),
    "cos": lambda x, y: np.cos(x, out=y),
    "sigmoid": lambda x, y: sigmoid(x, y),
}
# Binary ops whose single rounding makes numpy's same-dtype ufunc exact for every dtype it takes
# (fp16 through fp32 and back rounds once, as the vector unit does).
DIRECT_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
DIRECT_FLOAT_BINARY = {"div": np.divide}
COMPUTE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _unary(name: str, function: Unary, floats: int, ops: float) -> Kernel:
    direct = DIRECT_UNARY.get(name)

    def compute(x: np.ndarray, y: np.ndarray, *params: float) -> None:
        with np.errstate(all="ignore"):
            own = x.dtype in COMPUTE_DTYPES or (name == "relu" and x.dtype.kind in "iu")
            if name == "relu" and relu_into(y, x):  # fp16: on the bits
                return
            if direct is not None and x.dtype == y.dtype and own:
                direct(x, y)
                return
            if x.dtype.kind in "iub":
                if name not in INTEGER_SAFE:
                    raise KernelArgumentError(f"{name}: integer input {x.dtype}")
                value = _integer_clip(x, *params) if name == "clip" else function(x, *params)
            else:
                value = function(as_compute(x), *params)
            store(y, np.asarray(value))

    def check(specs: ArgSpecs) -> None:
        check_same_shape(name, specs, floats=floats)

    return register(name, compute, vector_work(2, ops), check, (1,))


def _integer_clip(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    info = np.iinfo(x.dtype)
    low = max(info.min, math.ceil(lo)) if math.isfinite(lo) else info.min
    high = min(info.max, math.floor(hi)) if math.isfinite(hi) else info.max
    return np.asarray(np.minimum(np.maximum(x, x.dtype.type(low)), x.dtype.type(high)))


def _int_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C semantics, as ONNX Div on integers)."""
    q = np.floor_divide(a, b)
    adjust = (np.remainder(a, b) != 0) & ((a < 0) ^ (b < 0))
    return np.asarray(q + adjust.astype(q.dtype))


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _int_divide(a, b) if a.dtype.kind in "iu" and b.dtype.kind in "iu" else np.divide(a, b)


def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return np.asarray(np.power(a.astype(np.int64), np.abs(b).astype(np.int64)))
    return np.asarray(
        np.power(a.astype(np.float64) if a.dtype.kind in "iu" else a, b.astype(a.dtype) if a.dtype.kind == "f" else b)
    )


def _mod(a: np.ndarray, b: np.ndarray, fmod: int = 0) -> np.ndarray:
    return np.asarray(np.fmod(a, b) if fmod else np.mod(a, b))


BINARY: dict[str, tuple[Callable[..., np.ndarray], int, float]] = {  # name -> (function, int params, ops)
    "add": (np.add, 0, 1.0),
    "sub": (np.subtract, 0, 1.0),
    "mul": (np.multiply, 0, 1.0),
    "div": (_divide, 0, 2.0),
    "pow": (_power, 0, 4.0),
    "max": (np.maximum, 0, 1.0),
    "min": (np.minimum, 0, 1.0),
    "mod": (_mod, 1, 2.0),
    "prelu": (lambda a, b: np.where(a < 0, a * b, a), 0, 2.0),
    "equal": (np.equal, 0, 1.0),
    "less": (np.less, 0, 1.0),
    "less_equal": (np.less_equal, 0, 1.0),
    "greater": (np.greater, 0, 1.0),
    "greater_equal": (np.greater_equal, 0, 1.0),
    "and": (np.logical_and, 0, 1.0),
    "or": (np.logical_or, 0, 1.0),
    "xor": (np.logical_xor, 0, 1.0),
    "bitshift": (lambda a, b, right: np.right_shift(a, b) if right else np.left_shift(a, b), 1, 1.0),
}
KEEP_DTYPE = {"pow", "mod", "bitshift", "equal", "less", "less_equal", "greater", "greater_equal", "and", "or", "xor"}


def _operand(v: np.ndarray) -> np.ndarray:
    return as_compute(v) if v.dtype.kind == "f" or v.dtype.name == "bfloat16" else v


def _binary(name: str, function: Callable[..., np.ndarray], ints: int, ops: float) -> Kernel:
    direct = DIRECT_BINARY.get(name)
    direct_float = DIRECT_FLOAT_BINARY.get(name)

    def compute(a: np.ndarray, b: np.ndarray, y: np.ndarray, *params: int) -> None:
        with np.errstate(all="ignore"):
            same = a.dtype == b.dtype == y.dtype
            if direct is not None and binary_into(name, y, a, b):  # fp16 of one shape: one fused pass
                return
            if direct is not None and same and a.dtype not in (np.bool_, F16):
                direct(a, b, out=y)
                return
            if direct_float is not None and same and a.dtype.kind == "f" and a.dtype != F16:
                direct_float(a, b, out=y)
                return
            if name in KEEP_DTYPE:
                value = function(_operand(a) if name != "pow" else a, b, *params)
            else:
                value = function(_operand(a), _operand(b), *params)
            store(y, np.asarray(value))

    def check(specs: ArgSpecs) -> None:
        a, b, y = check_scalars(name, specs, 3, ints=ints)
        check_broadcast(name, [a, b], y)

    return register(name, compute, vector_work(3, ops), check, (2,))


def _where(condition: np.ndarray, a: np.ndarray, b: np.ndarray, y: np.ndarray) -> None:
    store(y, np.where(condition, a, b))


def _check_where(specs: ArgSpecs) -> None:
    c, a, b, y = check_scalars("where", specs, 4)
    check_broadcast("where", [c, a, b], y)


@jit
def _add_relu_flat(a: np.ndarray, b: np.ndarray, out: np.ndarray, relu: int) -> None:
    """out = a + b, then np.maximum(., 0) when relu (NaN stays NaN, -0.0 becomes 0.0), one pass."""
    if relu:
        for i in range(out.size):
            v = a[i] + b[i]
            out[i] = v if (v > 0 or v != v) else np.float32(0.0)
    else:
        for i in range(out.size):
            out[i] = a[i] + b[i]


def _add_act(a: np.ndarray, b: np.ndarray, y: np.ndarray, act: int, alpha: float, beta: float) -> None:
    """Add with a fused activation (the residual Add + Relu of a ResNet block, in one pass)."""
    if (
        act in (ACT_NONE, ACT_RELU)
        and a.dtype == b.dtype == y.dtype == F32
        and a.shape == b.shape == y.shape
        and a.flags.c_contiguous
        and b.flags.c_contiguous
        and y.flags.c_contiguous
    ):
        # at memory speed on one thread (both host threads measured no faster: the pass is memory-bound)
        _add_relu_flat(a.reshape(-1), b.reshape(-1), y.reshape(-1), int(act == ACT_RELU))
        return
    dtype = compute_dtype(a)
    target = y if y.dtype == dtype == a.dtype == b.dtype else np.empty(y.shape, dtype)
    np.add(as_compute(a), as_compute(b), out=target, casting="unsafe")
    activate(target, act, alpha, beta)
    if target is not y:
        store(y, target)


def _check_add_act(specs: ArgSpecs) -> None:
    a, b, y = check_scalars("add_act", specs, 3, ints=1, floats=2)
    check_broadcast("add_act", [a, b], y)
    check_float("add_act", y)


_HALF_PAIRS = {(F16, F32), (F32, F16)}


def _cast(x: np.ndarray, y: np.ndarray, saturate: int, round_mode: int) -> None:
    if (x.dtype, y.dtype) in _HALF_PAIRS:  # the fast fp16 conversions (one rounding, as astype)
        store(y, as_compute(x))
    else:
        cast_into(x, y, saturate, round_mode)


def _check_cast(specs: ArgSpecs) -> None:
    check_same_shape("cast", specs, ints=2)
    if specs[3] not in ROUND_MODES.values():
        raise KernelArgumentError(f"cast: round mode {specs[3]} (expected 0 up, 1 nearest or 2 down)")


KERNELS = {name: _unary(name, *entry) for name, entry in UNARY.items()}
KERNELS.update({name: _binary(name, *entry) for name, entry in BINARY.items()})
KERNELS["not"] = register(
    "not", lambda x, y: store(y, np.logical_not(x)), vector_work(2, 1.0), lambda s: check_same_shape("not", s), (1,)
)
KERNELS["add_act"] = register("add_act", _add_act, vector_work(3, 1.0 + ACTIVATION_VECTOR_OPS), _check_add_act, (2,))
KERNELS["where"] = register("where", _where, vector_work(4, 1.0), _check_where, (3,))
KERNELS["cast"] = register("cast", _cast, vector_work(2, 1.0), _check_cast, (1,))
