"""add_act, the residual Add + activation: the one-pass fp32 loop gives numpy's numbers bit for bit
(NaN kept; -0.0 becomes 0.0, as np.maximum(-0.0, 0) gives), and the shapes it does not take (broadcast, strided,
other dtypes, other activations) still compute through numpy."""

from __future__ import annotations

import numpy as np
import pytest

from cannrt.kernels.nn.common import ACT_NONE, ACT_RELU, ACT_SIGMOID
from cannrt.kernels.registry import get_kernel

ADD_ACT = get_kernel("nn.add_act")


def _inputs(shape: tuple[int, ...], dtype: type = np.float32) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    flat = a.reshape(-1)
    flat[::31] = np.nan
    flat[1::37] = -0.0
    b.reshape(-1)[1::37] = -0.0  # -0.0 + -0.0 = -0.0, which np.maximum(., 0) makes 0.0
    return a, b


@pytest.mark.parametrize("shape", [(1, 256, 56, 56), (1, 8, 3, 3), (5,)])
@pytest.mark.parametrize("act", [ACT_RELU, ACT_NONE])
def test_the_one_pass_loop_is_numpy_bit_for_bit(shape: tuple[int, ...], act: int) -> None:
    a, b = _inputs(shape)
    y = np.full(shape, 7.0, np.float32)
    ADD_ACT.compute(a, b, y, act, 0.0, 0.0)
    expected = np.maximum(a + b, np.float32(0)) if act == ACT_RELU else a + b
    assert np.array_equal(y.view(np.uint32), expected.view(np.uint32))


def test_shapes_the_loop_does_not_take_compute_through_numpy() -> None:
    a, b = _inputs((2, 4, 6))
    y = np.empty((2, 4, 6), np.float32)
    ADD_ACT.compute(a, b[:1], y, ACT_RELU, 0.0, 0.0)  # broadcast
    np.testing.assert_array_equal(y, np.maximum(a + b[:1], 0))
    wide = np.empty((2, 4, 12), np.float32)
    ADD_ACT.compute(a, b, wide[:, :, ::2], ACT_SIGMOID, 0.0, 0.0)  # strided output, another activation
    np.testing.assert_allclose(wide[:, :, ::2], 1 / (1 + np.exp(-(a + b))), rtol=1e-6)
    half = np.empty((2, 4, 6), np.float16)
    ADD_ACT.compute(a.astype(np.float16), b.astype(np.float16), half, ACT_RELU, 0.0, 0.0)
    np.testing.assert_allclose(half, np.maximum(a.astype(np.float16) + b.astype(np.float16), 0), rtol=1e-3)
