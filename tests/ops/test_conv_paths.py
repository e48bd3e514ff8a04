"""Each of convolve_into's cuts (row bands of im2col, output-channel parts over one im2col matrix
or over x itself, one item) applies the bias and every fused activation once, into a contiguous
or a strided output, in fp32 or rounding into fp16."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_reference import reference

from cannrt.kernels.nn import team
from cannrt.kernels.nn.common import ACT_HARD_SWISH, ACT_LEAKY, ACT_NONE, ACT_RELU, activate
from cannrt.kernels.nn.conv import convolve_into
from cannrt.kernels.nn.window import Window

PATHS = {  # name: x shape, w shape, pads (begin = end), expected to run on the thread team
    "im2col bands": ((1, 32, 40, 40), (48, 32, 3, 3), 1, True),
    "bands, few output channels": ((1, 128, 30, 30), (32, 128, 3, 3), 1, True),
    "one item": ((1, 16, 12, 12), (16, 16, 3, 3), 1, False),
    "output-channel parts": ((1, 256, 5, 5), (512, 256, 3, 3), 1, True),
    "output-channel parts, deep": ((1, 512, 10, 10), (128, 512, 3, 3), 1, True),
    "pointwise output-channel parts": ((1, 512, 6, 6), (1024, 512, 1, 1), 0, True),
}
ACTIVATIONS = {"none": (ACT_NONE, 0.0, 0.0), "relu": (ACT_RELU, 0.0, 0.0), "leaky": (ACT_LEAKY, 0.1, 0.0)}


def _case(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, Window, np.ndarray]:
    x_shape, w_shape, pad, _ = PATHS[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    window = Window(tuple(w_shape[2:]), (1, 1), (1, 1), (pad, pad), (pad, pad))
    (expected,) = reference("Conv", {"x": x, "w": w, "b": b}, pads=[pad] * 4)
    return x, w, b, window, expected


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("path", sorted(PATHS))
def test_bias_and_activation_apply_once_on_every_path(path: str, activation: str) -> None:
    x, w, b, window, expected = _case(path)
    code = ACTIVATIONS[activation]
    y = np.full(expected.shape, np.nan, np.float32)
    before = team.TEAMS[0]
    convolve_into(x, w, b, 1, window, y, code)
    assert (team.TEAMS[0] > before) == PATHS[path][3]
    np.testing.assert_allclose(y, activate(expected.copy(), *code), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_strided_output_and_no_bias(path: str) -> None:
    x, w, _, window, _ = _case(path)
    (expected,) = reference("Conv", {"x": x, "w": w}, pads=[window.pads_begin[0]] * 4)
    wide = np.full((*expected.shape[:3], 2 * expected.shape[3]), np.nan, np.float32)
    y = wide[..., ::2]  # every other column: not contiguous
    convolve_into(x, w, None, 1, window, y, (ACT_HARD_SWISH, 0.0, 0.0))
    np.testing.assert_allclose(y, activate(expected.copy(), ACT_HARD_SWISH, 0.0, 0.0), rtol=1e-4, atol=1e-4)
    assert np.isnan(wide[..., 1::2]).all()


@pytest.mark.parametrize("path", sorted(PATHS))
def test_an_fp16_output_is_rounded_once_from_fp32(path: str) -> None:
    x, w, b, window, expected = _case(path)
    y = np.empty(expected.shape, np.float16)
    convolve_into(x, w, b, 1, window, y, (ACT_RELU, 0.0, 0.0))
    rounded = np.maximum(expected, 0).astype(np.float16).astype(np.float32)
    step = np.abs(np.spacing(rounded.astype(np.float16))).astype(np.float32)
    assert np.all(np.abs(y.astype(np.float32) - rounded) <= step + 1e-3 * np.abs(rounded) + 1e-3)
