"""conv_loops.bias_act_into, the convolution's one-pass bias + relu: numpy's numbers bit for bit
(the same add, NaN kept, -0.0 made 0.0 as np.maximum(., 0) makes it), in place or from a product
into a strided output view; and the arrays it does not take go through numpy."""

from __future__ import annotations

import numpy as np
import pytest

from cannrt.kernels.nn.common import ACT_LEAKY, ACT_NONE, ACT_RELU
from cannrt.kernels.nn.conv_loops import bias_act_into, takes


def _product(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    rng = np.random.default_rng(3)
    y = rng.standard_normal(shape).astype(dtype)
    flat = y.reshape(-1)
    flat[::29] = np.nan
    flat[1::31] = -0.0
    flat[2::37] = np.inf
    return y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("biased", [True, False])
def test_in_place_is_numpy_bit_for_bit(dtype: type, relu: bool, biased: bool) -> None:
    y = _product((48, 300), dtype)
    bias = np.random.default_rng(4).standard_normal(48).astype(dtype)
    bias[5] = -0.0  # -0.0 + -0.0 stays -0.0 before the relu
    y[5, :7] = -0.0
    expected = y + bias[:, None] if biased else y.copy()
    if relu:
        expected = np.maximum(expected, dtype(0))
    assert takes(y, y, ACT_RELU if relu else ACT_NONE)
    bias_act_into(y, y, bias if biased else None, relu)
    assert np.array_equal(y.view(np.uint8), expected.view(np.uint8))


def test_from_a_product_into_a_strided_view_of_rows() -> None:
    result = _product((16, 5, 9), np.float32)
    bias = np.linspace(-1, 1, 16, dtype=np.float32)
    frame = np.full((16, 8, 20), 7.0, np.float32)
    view = frame[:, 2:7, 3:12]  # channel and row strides of a larger tensor, contiguous columns
    assert takes(result, view, ACT_RELU)
    bias_act_into(result, view, bias, True)
    expected = np.maximum(result + bias[:, None, None], np.float32(0))
    assert np.array_equal(view.view(np.uint32), expected.view(np.uint32))
    outside = np.ones(frame.shape, bool)
    outside[:, 2:7, 3:12] = False
    assert (frame[outside] == 7.0).all()


def test_what_it_does_not_take() -> None:
    y = np.zeros((4, 6), np.float32)
    assert not takes(y, y, ACT_LEAKY)  # other activations: numpy
    assert not takes(y.astype(np.float16), y.astype(np.float16), ACT_RELU)
    assert not takes(y, y.astype(np.float64), ACT_RELU)
    assert not takes(y[:, ::2], y[:, ::2], ACT_RELU)  # strided columns
    assert not takes(y, y[:2], ACT_RELU)
