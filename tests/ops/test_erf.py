"""The erf kernel rounds libm's double erf once into its dtype (as a per-element math.erf does)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cannrt.kernels.nn.elementwise import _erf


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_is_maths_erf_rounded_once(dtype: type) -> None:
    x = np.concatenate([np.random.default_rng(0).standard_normal(19_994), [0.0, -0.0, np.inf, -np.inf, 1e-30, 6.0]])
    x = x.astype(dtype).reshape(4, -1)[:, ::2]  # a strided view
    want = np.array([math.erf(float(v)) for v in x.reshape(-1)], dtype).reshape(x.shape)
    got = _erf(x)
    assert got.dtype == dtype and got.shape == x.shape
    np.testing.assert_array_equal(got, want)
    assert np.isnan(_erf(np.array([np.nan], dtype))).all() and _erf(np.zeros((0, 3), dtype)).shape == (0, 3)
