"""Matrix products on the cube unit: ONNX Gemm (the CANN MatMulV2 with bias) and MatMul
(BatchMatMulV2, numpy broadcasting of the batch axes and 1-D operands).

gemm: a, b, [c], y, then ints trans_a, trans_b, activation code, then floats alpha, beta,
activation alpha, activation beta; y = act(alpha * a' b' + beta * c).
matmul: a, b, y, then int activation code, floats activation alpha, beta.
"""

from __future__ import annotations

import math

import numpy as np

from cannrt.abi import CoreKind, TensorArg, Work, tensor_nbytes
from cannrt.dtypes import numpy_dtype
from cannrt.kernels.builtins import compute_dtype
from cannrt.kernels.nn.blas import limit_blas_threads
from cannrt.kernels.nn.common import (
    ACTIVATION_VECTOR_OPS,
    activate,
    as_compute,
    check_broadcast,
    check_scalars,
    cube_rate,
    cube_tiles,
    register,
    store,
)
from cannrt.kernels.registry import ArgSpecs, KernelArgumentError


def product_work(a: TensorArg, b: TensorArg, y: TensorArg, m: int, k: int, n: int, extra: float) -> Work:
    """Work of batch x (m x k) @ (k x n): output tiles to blocks, each streams a K-panel of a and b."""
    batch = max(1, math.prod(y.shape) // max(1, m * n))
    tile_m, tile_n = cube_tiles(m * batch, n)
    row_tiles = max(1, -(-m // tile_m))
    col_tiles = max(1, -(-n // tile_n))
    item = numpy_dtype(a.dtype).itemsize
    panels = batch * row_tiles * col_tiles * (min(tile_m, m) + min(tile_n, n)) * k * item
    unique = tensor_nbytes(a) + tensor_nbytes(b)
    return Work(
        cube_flops=2.0 * batch * m * n * k,
        cube_rate=cube_rate(a),
        vector_ops=batch * m * n * extra,
        bytes_read=unique,
        l2_bytes_read=max(0, panels - unique),
        bytes_written=tensor_nbytes(y),
        units=batch * row_tiles * col_tiles,
    )


def _gemm_dims(specs: ArgSpecs, bias: bool) -> tuple[int, int, int]:
    name = "gemm_bias" if bias else "gemm"
    tensors = check_scalars(name, specs, 4 if bias else 3, ints=3, floats=4)
    a, b, y = tensors[0], tensors[1], tensors[-1]
    trans_a, trans_b = specs[len(tensors)], specs[len(tensors) + 1]
    if len(a.shape) != 2 or len(b.shape) != 2 or len(y.shape) != 2:
        raise KernelArgumentError(f"{name}: a {a.shape}, b {b.shape} and y {y.shape} must be 2-D")
    m, k = a.shape[::-1] if trans_a else a.shape
    k2, n = b.shape[::-1] if trans_b else b.shape
    if k != k2 or tuple(y.shape) != (m, n):
        raise KernelArgumentError(f"{name}: {a.shape} x {b.shape} (trans {trans_a}, {trans_b}) -> {y.shape}")
    if bias:
        check_broadcast(name, [tensors[2]], y)
    return m, k, n


def _gemm_work(specs: ArgSpecs, bias: bool) -> Work:
    m, k, n = _gemm_dims(specs, bias)
    tensors = specs[: 4 if bias else 3]
    act = specs[len(tensors) + 2]
    extra = (2.0 if bias else 1.0) + (ACTIVATION_VECTOR_OPS if act else 0.0)
    a, b, y = tensors[0], tensors[1], tensors[-1]
    assert isinstance(a, TensorArg) and isinstance(b, TensorArg) and isinstance(y, TensorArg)
    return product_work(a, b, y, m, k, n, extra)


def _gemm_body(*args: object, bias: bool) -> None:
    count = 4 if bias else 3
    a, b, y = args[0], args[1], args[count - 1]
    assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and isinstance(y, np.ndarray)
    trans_a, trans_b, act = (int(v) for v in args[count : count + 3])  # type: ignore[call-overload]
    alpha, beta, act_alpha, act_beta = (float(v) for v in args[count + 3 :])  # type: ignore[arg-type]
    dtype = compute_dtype(a)
    left = as_compute(a)
    right = as_compute(b)
    result = np.matmul(left.T if trans_a else left, right.T if trans_b else right)
    if alpha != 1.0:
        result *= dtype.type(alpha)
    if bias:
        c = args[2]
        assert isinstance(c, np.ndarray)
        result += as_compute(c) * dtype.type(beta) if beta != 1.0 else as_compute(c)
    store(y, activate(result, act, act_alpha, act_beta))


def _matmul_dims(specs: ArgSpecs) -> tuple[int, int, int]:
    a, b, y = check_scalars("matmul", specs, 3, ints=1, floats=2)
    if not a.shape or not b.shape:
        raise KernelArgumentError("matmul: operands must have rank >= 1")
    m = a.shape[-2] if len(a.shape) > 1 else 1
    k = a.shape[-1]
    k2 = b.shape[-2] if len(b.shape) > 1 else b.shape[0]
    n = b.shape[-1] if len(b.shape) > 1 else 1
    try:
        batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    except ValueError:
        batch = None
    expect = None if batch is None else (*batch, *([m] if len(a.shape) > 1 else []), *([n] if len(b.shape) > 1 else []))
    if k != k2 or expect != tuple(y.shape):
        raise KernelArgumentError(f"matmul: {a.shape} x {b.shape} -> {y.shape} do not match")
    if a.dtype != b.dtype:
        raise KernelArgumentError("matmul: a and b must share a dtype")
    return m, k, n


def _matmul_work(specs: ArgSpecs) -> Work:
    m, k, n = _matmul_dims(specs)
    a, b, y = specs[0], specs[1], specs[2]
    assert isinstance(a, TensorArg) and isinstance(b, TensorArg) and isinstance(y, TensorArg)
    return product_work(a, b, y, m, k, n, ACTIVATION_VECTOR_OPS if specs[3] else 0.0)


def _matmul_body(a: np.ndarray, b: np.ndarray, y: np.ndarray, act: int, alpha: float, beta: float) -> None:
    if a.dtype.kind in "iub":  # integer products accumulate in int64 and wrap like the output
        np.copyto(y, np.matmul(a.astype(np.int64), b.astype(np.int64)), casting="unsafe")
        return
    result = np.matmul(as_compute(a), as_compute(b))
    store(y, activate(np.asarray(result), act, alpha, beta))


def _gemm(*args: object, bias: bool) -> None:
    limit_blas_threads()
    _gemm_body(*args, bias=bias)


def _matmul(a: np.ndarray, b: np.ndarray, y: np.ndarray, act: int, alpha: float, beta: float) -> None:
    limit_blas_threads()
    _matmul_body(a, b, y, act, alpha, beta)


def _check_gemm(specs: ArgSpecs, bias: bool) -> None:
    _gemm_dims(specs, bias)


def _check_matmul(specs: ArgSpecs) -> None:
    _matmul_dims(specs)


GEMM = register(
    "gemm",
    lambda *a: _gemm(*a, bias=False),
    lambda s: _gemm_work(s, False),
    lambda s: _check_gemm(s, False),
    (2,),
    CoreKind.AICORE,
)
GEMM_BIAS = register(
    "gemm_bias",
    lambda *a: _gemm(*a, bias=True),
    lambda s: _gemm_work(s, True),
    lambda s: _check_gemm(s, True),
    (3,),
    CoreKind.AICORE,
)
MATMUL = register("matmul", _matmul, _matmul_work, _check_matmul, (2,), CoreKind.AICORE)
