"""kernels/nn/half.py converts fp16 <-> fp32 exactly as numpy's astype does (round to nearest
even, overflow to inf, subnormals, NaN kept NaN with its sign), on every fp16 value and on
random and boundary fp32 bit patterns, serially and on both host threads."""

from __future__ import annotations

import numpy as np
import pytest

from cannrt.kernels.nn import half

EVERY_HALF = np.arange(1 << 16, dtype=np.uint16).view(np.float16)


def _same(a: np.ndarray, b: np.ndarray) -> None:
    nan = np.isnan(b)
    assert np.array_equal(np.isnan(a), nan)
    assert np.array_equal(a[~nan], b[~nan]) and np.array_equal(np.signbit(a), np.signbit(b))


@pytest.fixture(params=["serial", "parallel"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(half, "PARALLEL_MIN", 1 << 40 if request.param == "serial" else 1)
    monkeypatch.setattr(half, "SLAB", 4096)
    monkeypatch.setattr(half, "FP16_NUMPY_BELOW", 0)  # the numba loops even for the few edge values
    return str(request.param)


def test_widen_gives_every_fp16_value_exactly(mode: str) -> None:
    _same(half.widen(EVERY_HALF), EVERY_HALF.astype(np.float32))


def test_narrow_rounds_like_numpy_on_random_bits_and_every_boundary(mode: str) -> None:
    rng = np.random.default_rng(0)
    random = rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32)
    exact = EVERY_HALF.astype(np.float32)
    finite = exact[np.isfinite(exact)].astype(np.float64)
    finite.sort()
    midpoints = ((finite[:-1] + finite[1:]) / 2).astype(np.float32)  # ties: round to even
    near = np.concatenate([np.nextafter(midpoints, np.float32(np.inf)), np.nextafter(midpoints, np.float32(-np.inf))])
    edges = np.float32([65504, 65519.996, 65520, 65536, 1e30, np.inf, -np.inf, np.nan, -np.nan, 2**-24, 2**-25, 0.0])
    for values in (random, exact, midpoints, near, edges, -edges):
        out = np.empty(values.shape, np.float16)
        half.narrow_into(out, values)
        with np.errstate(all="ignore"):
            _same(out, values.astype(np.float16))


def test_2d_views_with_a_row_stride_convert_in_place(mode: str) -> None:
    rng = np.random.default_rng(1)
    frame = np.zeros((8, 300), np.float16)
    values = rng.standard_normal((8, 100)).astype(np.float32)
    half.narrow_into(frame[:, 100:200], values)
    _same(frame[:, 100:200], values.astype(np.float16))
    assert not frame[:, :100].any() and not frame[:, 200:].any()
    wide = np.zeros((8, 300), np.float32)
    half.widen_into(wide[:, 100:200], frame[:, 100:200])
    _same(wide[:, 100:200], frame[:, 100:200].astype(np.float32))


def test_a_1x1_kernels_shape_converts_as_one_row(mode: str) -> None:
    weights = EVERY_HALF.reshape(4096, 16, 1, 1)
    _same(half.widen(weights), weights.astype(np.float32))
    out = np.empty(weights.shape, np.float16)
    half.narrow_into(out, weights.astype(np.float32))
    _same(out, weights)


def test_small_arrays_convert_through_numpy_and_equal_the_numba_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.float32([65504, 65520, 1e30, -np.inf, np.nan, 2**-24, 2**-25, -0.0, 1 / 3])
    small, wide = np.empty(values.shape, np.float16), np.empty(values.shape, np.float32)
    with np.errstate(all="ignore"):
        half.narrow_into(small, values)
    half.widen_into(wide, small)
    monkeypatch.setattr(half, "FP16_NUMPY_BELOW", 0)
    looped, looped_wide = np.empty_like(small), np.empty_like(wide)
    half.narrow_into(looped, values)
    half.widen_into(looped_wide, looped)
    _same(small, looped)
    _same(wide, looped_wide)


def test_other_layouts_and_dtypes_fall_back_to_numpy() -> None:
    x = np.arange(24, dtype=np.float16).reshape(2, 3, 4).transpose(2, 0, 1)
    _same(half.widen(x), x.astype(np.float32))
    out = np.empty((4, 2, 3), np.float16)
    half.narrow_into(out, np.arange(24, dtype=np.float64).reshape(4, 2, 3))
    assert np.array_equal(out, np.arange(24).reshape(4, 2, 3))
    assert half.widen(np.ones(3, np.float32)).dtype == np.float32
    strided = np.arange(10, dtype=np.float16)[::2]  # a 1-D view with a step (it raised IndexError)
    _same(half.widen(strided), strided.astype(np.float32))


def test_relu_on_the_bits_is_numpys_maximum_for_every_fp16_value() -> None:
    out = np.empty_like(EVERY_HALF)
    assert half.relu_into(out, EVERY_HALF)
    expected = np.maximum(EVERY_HALF.astype(np.float32), 0).astype(np.float16)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(out), nan) and np.array_equal(out[~nan], expected[~nan])
    assert not np.signbit(out[~nan]).any()  # -0 and every negative become +0
    assert not half.relu_into(np.empty(4, np.float32), np.ones(4, np.float32))


@pytest.mark.parametrize("name, ufunc", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                                         ("max", np.maximum), ("min", np.minimum)])  # fmt: skip
def test_fused_binary_ops_match_numpys_fp16_ufuncs(name: str, ufunc: np.ufunc) -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 1 << 16, 1 << 16, dtype=np.uint64).astype(np.uint16).view(np.float16)
    b = EVERY_HALF.copy()
    out = np.empty_like(a)
    assert half.binary_into(name, out, a, b)
    with np.errstate(all="ignore"):
        expected = ufunc(a, b)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(out), nan) and np.array_equal(out[~nan], expected[~nan])
    assert not half.binary_into(name, out, a, b.astype(np.float32))  # only fp16 operands
    assert not half.binary_into("div", out, a, b)  # only the ops it knows
