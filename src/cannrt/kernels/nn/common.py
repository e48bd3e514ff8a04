"""What the operator kernels share: argument checks, work models and the fused activations.

Vector kernels tile their output in ELEMENTS_PER_UNIT granules (the built-ins' granule); cube
kernels in TILE_M x TILE_N output tiles. Reduced-precision inputs compute in fp32, as the
vector and cube units accumulate.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cannrt.abi import CoreKind, TensorArg, Work
from cannrt.dtypes import numpy_dtype
from cannrt.kernels.builtins import TILE_M, TILE_N, compute_dtype
from cannrt.kernels.nn import blas
from cannrt.kernels.nn.half import F16, F32, narrow_into, widen
from cannrt.kernels.registry import ArgSpecs, Kernel, KernelArgumentError, register_kernel, require_tensors

PREFIX = "nn."


def cube_rate(spec: TensorArg) -> float:
    """Cube throughput of a dtype relative to fp16 (fp32 a quarter, int8 twice)."""
    return {0: 0.25, 11: 0.0625, 2: 2.0}.get(spec.dtype, 1.0)


def as_compute(x: np.ndarray) -> np.ndarray:
    """x in its compute dtype (no copy when it already is; fp16 widened by half.widen)."""
    return widen(x) if x.dtype == F16 else x.astype(compute_dtype(x), copy=False)


CUBE_FRACTAL = 16  # the cube's m / n granule
TARGET_TILES = 32  # the tiling shrinks its tiles until a product has this many (a 910B has 20-24 cores)


def cube_tiles(rows: int, cols: int) -> tuple[int, int]:
    """Output tile (rows x cols) the cube tiling hands to a block: TILE_M x TILE_N, halved (the
    larger side first, down to the 16 x 16 fractal) while the product has fewer than
    TARGET_TILES tiles, so that small products still spread over the cores."""
    tile_m, tile_n = TILE_M, TILE_N
    while -(-rows // tile_m) * -(-cols // tile_n) < TARGET_TILES:
        if tile_n >= tile_m and tile_n > CUBE_FRACTAL and cols > tile_n // 2:
            tile_n //= 2
        elif tile_m > CUBE_FRACTAL and rows > tile_m // 2:
            tile_m //= 2
        elif tile_n > CUBE_FRACTAL and cols > tile_n // 2:
            tile_n //= 2
        else:
            break
    return tile_m, tile_n


def in_planes(x: np.ndarray, y: np.ndarray, body: Callable[[np.ndarray, np.ndarray, slice], None]) -> None:
    """body(x part, y part, planes) over the (N, C) planes: the parts are (planes, 1, *spatial)
    views and `planes` slices the flat plane index; all at once for a small tensor, else two
    halves on both host threads (blas.parallel_for; smaller slabs cost more in Python than
    they gain in cache). y is written in place (through a buffer if it is not contiguous)."""
    planes = x.shape[0] * x.shape[1]
    target = y if y.flags.c_contiguous else np.empty(y.shape, y.dtype)
    xs, ys = x.reshape(planes, 1, *x.shape[2:]), target.reshape(planes, 1, *y.shape[2:])
    if planes < 2 or x.size < blas.PARALLEL_ELEMENTS or not blas.shares():  # backed off: one call
        body(xs, ys, slice(0, planes))
    else:
        half = planes // 2
        bounds = (slice(0, half), slice(half, planes))
        blas.parallel_for(2, lambda index: body(xs[bounds[index]], ys[bounds[index]], bounds[index]))
    if target is not y:
        np.copyto(y, target)


def check_scalars(name: str, specs: ArgSpecs, tensors: int, ints: int = 0, floats: int = 0) -> list[TensorArg]:
    """Exactly `tensors` tensors, then `ints` int scalars, then `floats` numbers."""
    args = require_tensors(name, specs, tensors, ints + floats)
    if len(specs) != tensors + ints + floats:
        raise KernelArgumentError(f"{name} takes {tensors} tensors, {ints} ints and {floats} floats, got {len(specs)}")
    for index, value in enumerate(specs[tensors:]):
        if isinstance(value, TensorArg) or (index < ints and not isinstance(value, int)):
            raise KernelArgumentError(f"{name}: argument {tensors + index} must be an int scalar")
    return args


def check_same_shape(name: str, specs: ArgSpecs, ints: int = 0, floats: int = 0) -> None:
    """An input and an output of one shape, then the scalars check_scalars takes."""
    x, y = check_scalars(name, specs, 2, ints=ints, floats=floats)
    if tuple(x.shape) != tuple(y.shape):
        raise KernelArgumentError(f"{name}: input {x.shape} and output {y.shape} differ")


def check_broadcast(name: str, inputs: list[TensorArg], out: TensorArg) -> None:
    """Every input broadcasts (numpy / ONNX multidirectional rules) to exactly the output shape."""
    try:
        shape = np.broadcast_shapes(*(tuple(t.shape) for t in inputs), tuple(out.shape))
    except ValueError:
        shape = None
    if shape != tuple(out.shape):
        shapes = ", ".join(str(tuple(t.shape)) for t in inputs)
        raise KernelArgumentError(f"{name}: inputs {shapes} do not broadcast to the output {tuple(out.shape)}")


def check_float(name: str, spec: TensorArg) -> None:
    """A floating-point tensor."""
    if numpy_dtype(spec.dtype).kind != "f" and spec.dtype != 27:
        raise KernelArgumentError(f"{name}: dtype {numpy_dtype(spec.dtype)} is not floating point")


def register(
    name: str,
    compute: Callable[..., None],
    work: Callable[[ArgSpecs], Work],
    check: Callable[[ArgSpecs], None],
    outputs: tuple[int, ...],
    core_kind: CoreKind = CoreKind.AIVEC,
) -> Kernel:
    """Register an operator kernel under PREFIX + name."""
    return register_kernel(Kernel(PREFIX + name, compute, work, check, outputs, core_kind))


# Activations the cube kernels apply to their output before writing it (code, alpha, beta).
ACT_NONE, ACT_RELU, ACT_LEAKY, ACT_SIGMOID, ACT_TANH, ACT_HARD_SIGMOID, ACT_HARD_SWISH, ACT_CLIP = range(8)
ACTIVATION_VECTOR_OPS = 4.0  # vector ops per output element of a fused activation (an upper bound)


def activate(y: np.ndarray, code: int, alpha: float, beta: float) -> np.ndarray:
    """Apply a fused activation in place (y is the fp32/fp64 accumulator) and return it."""
    if code == ACT_NONE:
        return y
    if code == ACT_RELU:
        np.maximum(y, 0, out=y)
    elif code == ACT_LEAKY:
        np.multiply(y, np.where(y < 0, y.dtype.type(alpha), y.dtype.type(1)), out=y)
    elif code == ACT_SIGMOID:
        sigmoid(y, y)
    elif code == ACT_TANH:
        np.tanh(y, out=y)
    elif code == ACT_HARD_SIGMOID:
        np.clip(y * alpha + beta, 0, 1, out=y)
    elif code == ACT_HARD_SWISH:
        y *= np.clip(y * (1.0 / 6.0) + 0.5, 0, 1)
    elif code == ACT_CLIP:
        np.clip(y, alpha, beta, out=y)
    else:
        raise KernelArgumentError(f"unknown fused activation code {code}")
    return y


def sigmoid(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) without overflow warnings for large |x|."""
    with np.errstate(over="ignore"):
        np.negative(x, out=out)
        np.exp(out, out=out)
        out += 1
        np.reciprocal(out, out=out)
    return out


def store(out: np.ndarray, value: np.ndarray) -> None:
    """Write a computed result into an output view (casting to its dtype; fp32 into fp16 by
    half.narrow_into)."""
    value = value.reshape(out.shape) if value.shape != out.shape else value
    if out.dtype == F16 and value.dtype == F32:
        narrow_into(out, value)
    else:
        np.copyto(out, value, casting="unsafe")
