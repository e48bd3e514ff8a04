"""Built-in kernels: add, mul, div, relu, gelu, softmax, matmul, cast, spin.

Each computes real results with numpy on views of device memory and states its work for the
cost model. Arguments: tensors first (inputs, then the output), scalars after.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from cannrt.abi import CoreKind, TensorArg, Work, tensor_nbytes
from cannrt.dtypes import numpy_dtype
from cannrt.kernels.casting import FP16_NUMPY_BELOW, cast_into
from cannrt.kernels.registry import (
    ArgSpecs,
    Kernel,
    KernelArgumentError,
    register_kernel,
    require_tensors,
)

ELEMENTS_PER_UNIT = 4096  # elementwise tiling granule (16 KiB of fp32 in UB)
TILE_M = 128  # output tile the cube tiling hands to a block: TILE_M x TILE_N
TILE_N = 256
FLOAT_CODES = {0, 1, 11, 27}


def count(spec: TensorArg) -> int:
    """Elements of a tensor argument."""
    return math.prod(spec.shape)


def vector_rate(spec: TensorArg) -> float:
    """Vector throughput of a dtype relative to fp32 lanes (fp16 and bf16 twice)."""
    return 2.0 if spec.dtype in (1, 27) else 1.0


def _check_same_shape(name: str, specs: ArgSpecs, tensors: int, scalars: int = 0) -> None:
    args = require_tensors(name, specs, tensors, scalars)
    out = args[-1]
    for index, spec in enumerate(args[:-1]):
        try:
            broadcast = np.broadcast_shapes(spec.shape, out.shape)
        except ValueError:
            broadcast = ()
        if broadcast != tuple(out.shape):
            raise KernelArgumentError(f"{name}: input {index} shape {spec.shape} does not broadcast to {out.shape}")
    if out.dtype not in FLOAT_CODES and name in ("gelu", "softmax"):
        raise KernelArgumentError(f"{name}: output dtype {numpy_dtype(out.dtype)} is not floating point")


def vector_work(tensor_count: int | None, ops_per_element: float) -> Callable[[ArgSpecs], Work]:
    """Work of a vector kernel: ops per element of its one output (the last of its first
    tensor_count tensors, None: of all), every input read once, the output written once."""

    def work(specs: ArgSpecs) -> Work:
        tensors = [s for s in specs if isinstance(s, TensorArg)][:tensor_count]
        out = tensors[-1]
        elements = count(out)
        return Work(
            vector_ops=elements * ops_per_element,
            vector_rate=vector_rate(out),
            bytes_read=sum(tensor_nbytes(t) for t in tensors[:-1]),
            bytes_written=tensor_nbytes(out),
            units=max(1, -(-elements // ELEMENTS_PER_UNIT)),
        )

    return work


def _elementwise(name: str, tensors: int, ops: float, compute: Callable[..., None]) -> Kernel:
    return register_kernel(
        Kernel(
            name=name,
            compute=compute,
            work=vector_work(None, ops),
            check=lambda specs: _check_same_shape(name, specs, tensors),
            outputs=(tensors - 1,),
            core_kind=CoreKind.AIVEC,
        )
    )


def compute_dtype(x: np.ndarray) -> np.dtype:
    """fp32 for fp16/bf16/fp32 inputs (as the vector unit computes), fp64 for fp64 references."""
    return np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)


def _add(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    try:  # out positional, numpy's default same_kind casting: the cheapest call
        np.add(x, y, out)
    except TypeError:  # a cast same_kind refuses (float into int): on the store, as the vector unit
        np.add(x, y, out=out, casting="unsafe")


def _mul(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    try:  # as _add
        np.multiply(x, y, out)
    except TypeError:
        np.multiply(x, y, out=out, casting="unsafe")


def _div(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    """x / y; y == 0 gives inf (or nan for 0 / 0) and raises the divide-by-zero flag."""
    try:  # as _add
        np.divide(x, y, out)
    except TypeError:
        np.divide(x, y, out=out, casting="unsafe")


def _relu(x: np.ndarray, out: np.ndarray) -> None:
    try:  # as _add
        np.maximum(x, 0, out=out)
    except TypeError:
        np.maximum(x, 0, out=out, casting="unsafe")


def _gelu(x: np.ndarray, out: np.ndarray) -> None:
    """CANN Gelu (tanh form): y = x / (1 + exp(-1.59576912 * (x + 0.044715 x^3)))."""
    v = x.astype(compute_dtype(x))
    inner = -1.59576912 * (v + 0.044715 * v * v * v)
    out[...] = (v / (1.0 + np.exp(inner))).astype(out.dtype)


def _softmax(x: np.ndarray, out: np.ndarray, axis: int = -1) -> None:
    v = x.astype(compute_dtype(x))
    shifted = np.exp(v - v.max(axis=axis, keepdims=True))
    out[...] = (shifted / shifted.sum(axis=axis, keepdims=True)).astype(out.dtype)


def _cast(x: np.ndarray, out: np.ndarray) -> None:
    cast_into(x, out)  # ONNX Cast's defaults: saturate, E8M0 rounded up


def _check_softmax(specs: ArgSpecs) -> None:
    _check_same_shape("softmax", specs, 2, scalars=1)
    x = specs[0]
    assert isinstance(x, TensorArg)
    axis = specs[2] if len(specs) > 2 else -1
    if not isinstance(axis, int) or not -len(x.shape) <= axis < max(1, len(x.shape)):
        raise KernelArgumentError(f"softmax: axis {axis} out of range for rank {len(x.shape)}")
    if tuple(x.shape) != tuple(specs[1].shape):  # type: ignore[union-attr]
        raise KernelArgumentError("softmax: input and output shapes differ")


def _check_matmul(specs: ArgSpecs) -> None:
    a, b, out = require_tensors("matmul", specs, 3)
    if len(a.shape) != 2 or len(b.shape) != 2 or len(out.shape) != 2:
        raise KernelArgumentError("matmul: a, b and out must be 2-D")
    m, k = a.shape
    k2, n = b.shape
    if k != k2 or tuple(out.shape) != (m, n):
        raise KernelArgumentError(f"matmul: shapes {a.shape} x {b.shape} -> {out.shape} do not match")
    if a.dtype != b.dtype or a.dtype not in (0, 1, 27, 2):
        raise KernelArgumentError("matmul: a and b must share one of float32, float16, bfloat16, int8")


def _matmul_work(specs: ArgSpecs) -> Work:
    """Output tiles of TILE_M x TILE_N go to blocks; each streams a K-panel of A and of B.

    The first pass over A and B comes from global memory, the re-reads of other tiles from L2.
    """
    a, b, out = specs[0], specs[1], specs[2]
    assert isinstance(a, TensorArg) and isinstance(b, TensorArg) and isinstance(out, TensorArg)
    m, k = a.shape
    n = b.shape[1]
    rate = {0: 0.25, 1: 1.0, 27: 1.0, 2: 2.0}[a.dtype]
    row_tiles = max(1, -(-m // TILE_M))
    col_tiles = max(1, -(-n // TILE_N))
    item = numpy_dtype(a.dtype).itemsize
    panels = row_tiles * col_tiles * (TILE_M + TILE_N) * k * item
    unique = tensor_nbytes(a) + tensor_nbytes(b)
    return Work(
        cube_flops=2.0 * m * n * k,
        cube_rate=rate,
        bytes_read=unique,
        l2_bytes_read=max(0, panels - unique),
        bytes_written=tensor_nbytes(out),
        units=row_tiles * col_tiles,
    )


def _matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """fp32 and int8 straight through; fp16/bf16 accumulate in fp32 (the cube's accumulator),
    then cast to out."""
    kind, out_kind = a.dtype.char, out.dtype.char
    if kind == out_kind and kind in "fd":  # float32, float64
        _product_into(a, b, out)
    elif kind == "b":  # int8
        out[...] = np.matmul(a.astype(np.int32), b.astype(np.int32)).astype(out.dtype)
    elif out_kind == "f":  # accumulate straight into the fp32 output
        if a.size < FP16_NUMPY_BELOW and b.size < FP16_NUMPY_BELOW:  # small (the common launch): no call
            _product_into(a.astype(np.float32), b.astype(np.float32), out)
        else:
            _product_into(_fp32(a), _fp32(b), out)
    else:  # numpy's cast to out (an overflow into fp16 raises the float flag overflow detection reads)
        out[...] = np.matmul(_fp32(a), _fp32(b)).astype(out.dtype)


def _fp32(x: np.ndarray) -> np.ndarray:
    """x in fp32 for the cube's accumulator: fp16 arrays of FP16_NUMPY_BELOW elements or more
    through kernels/nn/half.py's vectorised loops (numpy converts fp16 one element at a time)."""
    if x.size < FP16_NUMPY_BELOW or x.dtype.char != "e":
        return x.astype(np.float32)
    from cannrt.kernels.nn.half import widen  # kernels.nn imports this module: not at its top

    return widen(x)


def _product_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """a @ b into out of their dtype: np.dot (the same BLAS product as np.matmul, without the
    gufunc's overhead on small matrices) when out is C-contiguous, as np.dot requires."""
    try:
        np.dot(a, b, out)
    except ValueError:  # out is not C-contiguous
        np.matmul(a, b, out=out)


def _spin(duration_ns: int = 0) -> None:
    """No data: the kernel only occupies its cores for a modelled duration."""


def _check_spin(specs: ArgSpecs) -> None:
    if len(specs) != 1 or not isinstance(specs[0], int) or specs[0] < 0:
        raise KernelArgumentError("spin takes one argument: a non-negative duration in ns")


ADD = _elementwise("add", 3, 1.0, _add)
MUL = _elementwise("mul", 3, 1.0, _mul)
DIV = _elementwise("div", 3, 1.0, _div)
RELU = _elementwise("relu", 2, 1.0, _relu)
GELU = _elementwise("gelu", 2, 8.0, _gelu)
CAST = _elementwise("cast", 2, 1.0, _cast)
SOFTMAX = register_kernel(
    Kernel("softmax", _softmax, vector_work(None, 5.0), _check_softmax, outputs=(1,), core_kind=CoreKind.AIVEC)
)
MATMUL = register_kernel(
    Kernel("matmul", _matmul, _matmul_work, _check_matmul, outputs=(2,), core_kind=CoreKind.AICORE)
)
SPIN = register_kernel(
    Kernel(
        "spin",
        _spin,
        lambda specs: Work(fixed_ns=int(specs[0])),  # type: ignore[arg-type]
        _check_spin,
        outputs=(),
        core_kind=CoreKind.AICORE,
    )
)


def _nop() -> None:
    """The empty kernel: launch-path measurements use it."""


def _check_nop(specs: ArgSpecs) -> None:
    if specs:
        raise KernelArgumentError("nop takes no arguments")


NOP = register_kernel(Kernel("nop", _nop, lambda specs: Work(), _check_nop, outputs=(), core_kind=CoreKind.AIVEC))
