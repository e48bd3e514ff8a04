"""Resize on the vector unit (the CANN ResizeNearestNeighborV2 / ResizeBilinearV2 / ResizeD
kernels): separable interpolation, one axis after another.

Arguments: x, y, then ints mode (nearest, linear, cubic), coordinate transformation, nearest
rounding, exclude_outside, antialias; then floats cubic coefficient a, extrapolation value, the
scale per axis and the region of interest (starts per axis, then ends). Nearest gathers one
source index per output position; linear and cubic contract the axis with a small
(out x in) interpolation matrix, one matrix product per axis.
"""

from __future__ import annotations

import math

import numpy as np

from cannrt.abi import TensorArg, Work, tensor_nbytes
from cannrt.kernels.builtins import ELEMENTS_PER_UNIT, count, vector_rate
from cannrt.kernels.nn.common import check_scalars, register, store
from cannrt.kernels.registry import ArgSpecs, KernelArgumentError

NEAREST, LINEAR, CUBIC = range(3)
COORDINATES = (
    "half_pixel",
    "asymmetric",
    "align_corners",
    "pytorch_half_pixel",
    "tf_crop_and_resize",
    "half_pixel_symmetric",
)
ROUNDINGS = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
INTS = 5


def source_coordinates(coordinate: str, out: int, extent: int, scale: float, roi: tuple[float, float]) -> np.ndarray:
    """Where each output position samples the input along one axis (ONNX Resize's formulas)."""
    o = np.arange(out, dtype=np.float64)
    width = scale * extent  # the real-valued output length the scale implies
    if coordinate == "align_corners":
        return np.zeros(out) if width == 1 else o * (extent - 1) / (width - 1)
    if coordinate == "asymmetric":
        return o / scale
    if coordinate == "tf_crop_and_resize":
        start, end = roi
        if width == 1:
            return np.full(out, (end - start) * (extent - 1) / 2 + start * (extent - 1))
        return o * (end - start) * (extent - 1) / (width - 1) + start * (extent - 1)
    if coordinate == "pytorch_half_pixel":
        return np.full(out, -0.5) if width == 1 else (o + 0.5) / scale - 0.5
    if coordinate == "half_pixel_symmetric":
        offset = extent / 2 * (1 - out / width)
        return offset + (o + 0.5) / scale - 0.5
    return (o + 0.5) / scale - 0.5


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def taps(
    mode: int, rounding: str, ratio: np.ndarray, scale: float, antialias: bool, a: float
) -> tuple[int, np.ndarray]:
    """First tap offset from the base index and the (out x taps) coefficients."""
    if mode == NEAREST:
        integer = ratio == 1.0
        if rounding == "round_prefer_floor":
            pick = ratio > 0.5
        elif rounding == "round_prefer_ceil":
            pick = ratio >= 0.5
        else:
            pick = np.full(ratio.shape, rounding == "ceil")
        pick = pick | integer
        return 0, np.stack([~pick, pick], axis=1).astype(np.float64)
    support = 1.0 if mode == LINEAR else 2.0
    shrink = min(scale, 1.0) if antialias else 1.0
    start = int(math.floor(-support / shrink) + 1) if antialias else int(1 - support)
    offsets = np.arange(start, 2 - start if antialias else start + int(2 * support))
    distance = (offsets[None, :] - ratio[:, None]) * shrink
    weights = np.clip(1 - np.abs(distance), 0, 1) if mode == LINEAR else _cubic(distance, a)
    if antialias:
        weights = weights / weights.sum(axis=1, keepdims=True)
    return start, weights


def _axis_plan(
    mode: int, coordinate: str, rounding: str, exclude: bool, antialias: bool, a: float,
    extent: int, out: int, scale: float, roi: tuple[float, float],
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:  # fmt: skip
    """Source indices (out x taps, clamped), their weights, and the extrapolated positions."""
    x = source_coordinates(coordinate, out, extent, scale, roi)
    base = np.ceil(x).astype(np.int64) - 1  # the tap left of x, x itself counts as the right one
    ratio = x - base
    start, weights = taps(mode, rounding, ratio, scale, antialias, a)
    index = base[:, None] + start + np.arange(weights.shape[1])[None, :]
    if exclude and mode != NEAREST:
        weights = np.where((index < 0) | (index >= extent), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    outside = (x < 0) | (x > extent - 1) if coordinate == "tf_crop_and_resize" else None
    return np.clip(index, 0, extent - 1), weights, outside


def _resize(x: np.ndarray, y: np.ndarray, *scalars: float) -> None:
    mode, coordinate, rounding, exclude, antialias = (int(s) for s in scalars[:INTS])
    a, extrapolation = float(scalars[INTS]), float(scalars[INTS + 1])
    rank = x.ndim
    scales = scalars[INTS + 2 : INTS + 2 + rank]
    roi = scalars[INTS + 2 + rank :]
    floating = x.dtype.kind == "f" or x.dtype.name == "bfloat16"
    dtype = np.dtype(np.float64 if x.dtype == np.float64 or not floating else np.float32)
    result = x.astype(dtype, copy=False)
    for axis in range(rank):
        extent, out, scale = x.shape[axis], y.shape[axis], float(scales[axis])
        window = (float(roi[axis]), float(roi[axis + rank]))
        if math.isclose(scale, 1.0) and out == extent and math.isclose(window[0], 0) and math.isclose(window[1], 1):
            continue
        index, weights, outside = _axis_plan(
            mode, COORDINATES[coordinate], ROUNDINGS[rounding], bool(exclude), bool(antialias), a,
            extent, out, scale, window,
        )  # fmt: skip
        if mode == NEAREST:
            result = np.take(result, np.where(weights[:, 1] > 0, index[:, 1], index[:, 0]), axis=axis)
        else:
            matrix = np.zeros((out, extent), dtype=dtype)
            np.add.at(matrix, (np.repeat(np.arange(out), index.shape[1]), index.reshape(-1)), weights.reshape(-1))
            result = np.moveaxis(np.tensordot(matrix, result, axes=([1], [axis])), 0, axis)
        if outside is not None and outside.any():
            mask = outside.reshape((1,) * axis + (out,) + (1,) * (rank - axis - 1))
            result = np.where(mask, dtype.type(extrapolation), result)
    if not floating:
        info = np.iinfo(y.dtype)
        result = np.clip(np.rint(result), info.min, info.max)
    store(y, np.asarray(result))


def _check(specs: ArgSpecs) -> None:
    x = specs[0]
    rank = len(x.shape) if isinstance(x, TensorArg) else 0
    x, y = check_scalars("resize", specs, 2, ints=INTS, floats=2 + 3 * rank)
    mode, coordinate, rounding = specs[2], specs[3], specs[4]
    if mode not in (NEAREST, LINEAR, CUBIC) or coordinate not in range(len(COORDINATES)):
        raise KernelArgumentError(f"resize: mode {mode}, coordinate transformation {coordinate}")
    if rounding not in range(len(ROUNDINGS)) or len(y.shape) != rank:
        raise KernelArgumentError(f"resize: nearest mode {rounding}, output rank {len(y.shape)} for rank {rank}")
    scales = specs[INTS + 4 : INTS + 4 + rank]
    if any(not isinstance(s, int | float) or s <= 0 for s in scales):
        raise KernelArgumentError(f"resize: scales {list(scales)} must be positive")
    if count(x) == 0 and count(y):
        raise KernelArgumentError(f"resize: empty input {x.shape} to {y.shape}")


def _work(specs: ArgSpecs) -> Work:
    x, y = specs[0], specs[1]
    assert isinstance(x, TensorArg) and isinstance(y, TensorArg)
    taps_per_output = {NEAREST: 1, LINEAR: 2, CUBIC: 4}[int(specs[2])]  # type: ignore[arg-type]
    rank = max(1, len(x.shape))
    return Work(
        vector_ops=count(y) * taps_per_output * 2 * rank,
        vector_rate=vector_rate(y),
        bytes_read=tensor_nbytes(x),
        bytes_written=tensor_nbytes(y),
        units=max(1, -(-count(y) // ELEMENTS_PER_UNIT)),
    )


RESIZE = register("resize", _resize, _work, _check, (1,))
COORDINATE_CODES: dict[str, int] = {name: code for code, name in enumerate(COORDINATES)}
ROUNDING_CODES: dict[str, int] = {name: code for code, name in enumerate(ROUNDINGS)}
