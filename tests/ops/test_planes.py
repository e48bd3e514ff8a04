"""Pooling and BatchNormalization on large inputs run in two halves of the (N, C) planes on both
host threads (common.in_planes): the halves give onnxruntime's result, pads, ceil mode and
dilations included, in fp32 and fp16."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx_reference import on_device, reference

from cannrt.kernels.nn import blas, pool_loops
from cannrt.runtime.core import Runtime

X = np.random.default_rng(0).standard_normal((1, 128, 45, 47)).astype(np.float32)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "max 3x3/2 pads": ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "max 3x3/2 ceil": ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    "max dilated uneven pads": (
        "MaxPool",
        {"kernel_shape": [3, 2], "dilations": [2, 3], "pads": [2, 0, 1, 1], "strides": [1, 2]},
    ),
    "avg include pad": ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    "avg exclude pad ceil": (
        "AveragePool",
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    ),
    "avg 2x2/2": ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_pooling_in_halves_matches_onnxruntime(
    rt: Runtime, case: str, dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(The numba loop of pool_loops.py takes fp32 max poolings of any width: kept off here.)"""
    monkeypatch.setattr(pool_loops, "MIN_WIDTH", 1 << 20)
    op, attrs = CASES[case]
    inputs = {"x": X.astype(dtype)}
    assert X.size >= blas.PARALLEL_ELEMENTS
    before = blas.SPLITS[0]
    expected = reference(op, inputs, opset=19 if "dilations" in attrs and op == "AveragePool" else 17, **attrs)
    (got,) = on_device(op, inputs, expected, **attrs)
    assert blas.SPLITS[0] == before + 1 and got.dtype == dtype
    tolerance = 1e-5 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(got.astype(np.float32), expected[0].astype(np.float32), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_batchnorm_in_halves_matches_onnxruntime(rt: Runtime, dtype: type) -> None:
    rng = np.random.default_rng(1)
    channels = X.shape[1]
    params = {
        "s": rng.uniform(0.5, 1.5, channels),
        "b": rng.standard_normal(channels),
        "m": rng.standard_normal(channels),
        "v": rng.uniform(0.5, 1.5, channels),
    }
    inputs = {"x": X.astype(dtype), **{k: v.astype(dtype) for k, v in params.items()}}
    before = blas.SPLITS[0]
    expected = reference("BatchNormalization", inputs)
    (got,) = on_device("BatchNormalization", inputs, expected)
    assert blas.SPLITS[0] == before + 1 and got.dtype == dtype
    tolerance = 1e-5 if dtype == np.float32 else 4e-3
    np.testing.assert_allclose(got.astype(np.float32), expected[0].astype(np.float32), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("shape", [(1, 128, 45, 47), (1, 6, 5, 5), (2, 6, 5, 5), (1, 6)])
def test_batchnorm_with_a_fused_relu_is_the_formula_nan_included(shape: tuple[int, ...]) -> None:
    from cannrt.kernels.nn.common import ACT_RELU
    from cannrt.kernels.registry import get_kernel

    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[::97] = np.nan
    channels = shape[1]
    scale, bias, mean = (rng.standard_normal(channels).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 1.5, channels).astype(np.float32)
    y = np.empty_like(x)
    get_kernel("nn.batchnorm").compute(x, scale, bias, mean, var, y, 1e-5, ACT_RELU, 0.0, 0.0)
    factor = scale / np.sqrt(var + np.float32(1e-5))
    axes = (-1, *([1] * (len(shape) - 2)))
    expected = np.maximum(x * factor.reshape(axes) + (bias - mean * factor).reshape(axes), 0)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)  # assert_allclose matches NaN with NaN
