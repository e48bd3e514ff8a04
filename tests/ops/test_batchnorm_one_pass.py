"""batchnorm's one-pass loop (fp32, no activation or a relu, any batch): the per-channel factor and
shift and every output as numpy's fp32 formula gives them, bit for bit (NaN kept, a relu's -0.0
made 0.0 as np.maximum makes it), over one slab and over the two halves of a large tensor; other
cases go through numpy as before."""

from __future__ import annotations

import numpy as np
import pytest

from cannrt.kernels.nn.common import ACT_NONE, ACT_RELU, ACT_SIGMOID
from cannrt.kernels.registry import get_kernel

BATCHNORM = get_kernel("nn.batchnorm")


def _case(shape: tuple[int, ...]) -> tuple[np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[::89] = np.nan
    x.reshape(-1)[5::97] = -0.0
    channels = shape[1]
    params = [rng.standard_normal(channels).astype(np.float32) for _ in range(3)]
    params.append(rng.uniform(0.01, 2.0, channels).astype(np.float32))
    return x, params


def _formula(x: np.ndarray, scale, bias, mean, var, eps: float, relu: bool) -> np.ndarray:  # type: ignore[no-untyped-def]
    factor = scale / np.sqrt(var + np.float32(eps))
    shift = bias - mean * factor
    axes = (-1, *([1] * (x.ndim - 2)))
    y = x * factor.reshape(axes) + shift.reshape(axes)
    return np.maximum(y, np.float32(0)) if relu else y


@pytest.mark.parametrize("shape", [(1, 1024, 7, 7), (1, 256, 56, 56), (1, 3, 5), (2, 8, 5, 5), (2, 64, 56, 56)])
@pytest.mark.parametrize("act", [ACT_RELU, ACT_NONE])
def test_one_pass_is_the_fp32_formula_bit_for_bit(shape: tuple[int, ...], act: int) -> None:
    x, params = _case(shape)
    y = np.full(shape, 9.0, np.float32)
    BATCHNORM.compute(x, *params, y, 1e-5, act, 0.0, 0.0)
    expected = _formula(x, *params, 1e-5, act == ACT_RELU)
    assert np.array_equal(y.view(np.uint32), expected.view(np.uint32))


def test_cases_outside_the_loop_still_compute() -> None:
    one, params = _case((1, 4, 3, 3))
    y1 = np.empty_like(one)
    BATCHNORM.compute(one, *params, y1, 1e-3, ACT_SIGMOID, 0.0, 0.0)
    expected = 1 / (1 + np.exp(-_formula(one, *params, 1e-3, False)))
    np.testing.assert_allclose(y1, expected, rtol=1e-6, atol=1e-6)
