"""conv_gemm._finish, the convolution's one pass of bias + relu: numpy's numbers bit for bit (the
same add, NaN kept, -0.0 made 0.0 as np.maximum(., 0) makes it), in place over y's rows or from a
band's product into y's columns; no add without a bias (x + 0.0 would make -0.0 0.0)."""

from __future__ import annotations

import numpy as np
import pytest

from cannrt.kernels.nn import conv_gemm


def _product(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    rng = np.random.default_rng(3)
    y = rng.standard_normal(shape).astype(dtype)
    flat = y.reshape(-1)
    flat[::29] = np.nan
    flat[1::31] = -0.0
    flat[2::37] = np.inf
    return y


def _expected(y: np.ndarray, bias: np.ndarray | None, relu: bool) -> np.ndarray:
    expected = y + bias[:, None] if bias is not None else y.copy()
    return np.maximum(expected, y.dtype.type(0)) if relu else expected


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("biased", [True, False])
def test_in_place_over_rows_of_y_is_numpy_bit_for_bit(dtype: type, relu: bool, biased: bool) -> None:
    y = _product((48, 300), dtype)
    bias = np.random.default_rng(4).standard_normal(64).astype(dtype)
    bias[16 + 5] = -0.0  # -0.0 + -0.0 stays -0.0 before the relu
    y[5, :7] = -0.0
    whole = np.full((64, 300), 7.0, dtype)
    whole[16:] = y
    expected = _expected(y, bias[16:] if biased else None, relu)
    rows = whole[16:]
    conv_gemm._finish(rows, whole, 16, 0, bias, (biased, relu, False))
    assert np.array_equal(whole[16:].view(np.uint8), expected.view(np.uint8))
    assert (whole[:16] == 7.0).all()


def test_from_a_band_into_columns_of_y() -> None:
    band = _product((16, 45), np.float32)
    bias = np.linspace(-1, 1, 16, dtype=np.float32)
    y = np.full((16, 100), 7.0, np.float32)
    conv_gemm._finish(band, y, 0, 30, bias, (True, True, False))
    assert np.array_equal(y[:, 30:75].view(np.uint32), _expected(band, bias, True).view(np.uint32))
    assert (y[:, :30] == 7.0).all() and (y[:, 75:] == 7.0).all()
