"""conv_gemm._finish, the convolution's one pass of bias + relu: numpy's numbers bit for bit (the
same add, NaN kept, -0.0 made 0.0 as np.maximum(., 0) makes it), in place over y's rows or from a
product's rows at another pitch into y's; no add without a bias (x + 0.0 would make -0.0 0.0)."""

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
    flat = whole.reshape(-1)
    conv_gemm._finish(flat, 16 * 300, (300, 0), flat, 16 * 300, (300, 0), (48, 1, 300), bias, 16, (biased, relu, False))
    assert np.array_equal(whole[16:].view(np.uint8), expected.view(np.uint8))
    assert (whole[:16] == 7.0).all()


def test_from_rows_of_a_wider_product_into_rows_of_y() -> None:
    """A per-tap product computed at the padded width (9 columns a row, 5 valid): each row's valid
    columns go to y's row at y's width (7), at an offset."""
    product = _product((16, 3, 9), np.float32)
    bias = np.linspace(-1, 1, 16, dtype=np.float32)
    y = np.full((16, 40), 7.0, np.float32)
    flags = (True, True, False)
    conv_gemm._finish(product.reshape(-1), 0, (27, 9), y.reshape(-1), 10, (40, 7), (16, 3, 5), bias, 0, flags)
    for r in range(3):
        expected = _expected(product[:, r, :5], bias, True)
        assert np.array_equal(y[:, 10 + 7 * r : 15 + 7 * r].view(np.uint32), expected.view(np.uint32))
    assert (y[:, :10] == 7.0).all() and (y[:, 31:] == 7.0).all() and (y[:, 15:17] == 7.0).all()
