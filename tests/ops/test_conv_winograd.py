"""3x3 convolutions of unit stride over many channels and tiles take Winograd's F(2x2, 3x3)
(kernels/nn/conv_winograd.py): the rule depends on the shape alone, the results match
onnxruntime and a float64 direct sum, on the team as on one thread, and a non-finite output
still raises the overflow flag the device reads."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_reference import on_device, reference

from cannrt.abi import TensorArg
from cannrt.kernels import KernelArgumentError, get_kernel
from cannrt.kernels.nn import conv_winograd, team
from cannrt.kernels.nn.conv import convolve_into
from cannrt.kernels.nn.conv_plan import winograd, winograd_ahead
from cannrt.kernels.nn.window import Window
from cannrt.runtime.core import Runtime


def _rand(*shape: int, seed: int, dtype: type = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _direct(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, pads: tuple[int, int, int, int]) -> np.ndarray:
    """The float64 direct sum over the nine taps (pads: top, left, bottom, right)."""
    top, left, bottom, right = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh, ow = xp.shape[2] - 2, xp.shape[3] - 2
    y = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(3):
        for j in range(3):
            y += np.einsum("nchw,mc->nmhw", xp[:, :, i : i + oh, j : j + ow], w[:, :, i, j].astype(np.float64))
    return y if b is None else y + b.astype(np.float64)[None, :, None, None]


Pads = tuple[int, int, int, int]  # top, left, bottom, right


def _convolve(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None, pads: Pads, relu: bool, ahead: bool = False
) -> np.ndarray:
    """The convolution through conv.py; `ahead`: with the weights transformed beforehand, as ge does."""
    window = Window((3, 3), (1, 1), (1, 1), pads[:2], pads[2:])
    out = (x.shape[2] + pads[0] + pads[2] - 2, x.shape[3] + pads[1] + pads[3] - 2)
    y = np.empty((x.shape[0], w.shape[0], *out), x.dtype)
    u = conv_winograd.transform_weights(w) if ahead else None
    convolve_into(x, w, b, 1, window, y, (1 if relu else 0, 0.0, 0.0), u)
    return y


def test_a_3x3_unit_window_over_many_channels_and_tiles_takes_winograd() -> None:
    one, three = (1, 1), (3, 3)
    assert winograd(1, 256, 256, three, one, one, (14, 14))  # resnet's 256 -> 256 over 14 x 14
    assert winograd(1, 128, 128, three, one, one, (28, 28))
    assert winograd(1, 64, 64, three, one, one, (56, 56))  # 1/64 + 1/64 + 1/784 <= 1/28
    assert not winograd(1, 256, 64, three, one, one, (13, 13))  # squeezenet's: 1/64 + 1/256 + 1/49 > 1/28
    assert not winograd(1, 512, 512, three, one, one, (7, 7))  # 16 tiles: the weights' transform outweighs them
    assert not winograd(1, 64, 16, three, one, one, (55, 55))  # few channels: the input transform outweighs them
    assert not winograd(1, 256, 256, three, (2, 2), one, (14, 14))  # strided
    assert not winograd(1, 256, 256, three, one, (2, 2), (14, 14))  # dilated
    assert not winograd(2, 256, 256, three, one, one, (14, 14))  # grouped
    assert not winograd(1, 256, 256, (5, 5), one, one, (14, 14))
    assert not winograd(1, 256, 256, (3,), (1,), (1,), (196,))  # 1-D


@pytest.mark.parametrize(
    ("x_shape", "m", "pads"),
    [
        ((1, 128, 16, 16), 128, (1, 1, 1, 1)),
        ((2, 128, 17, 15), 160, (1, 1, 1, 1)),  # odd sizes: the last tiles are cut; two images
        ((1, 128, 15, 18), 64 + 128, (0, 2, 1, 0)),  # uneven pads
        ((1, 128, 18, 18), 128, (0, 0, 0, 0)),  # unpadded
    ],
)
@pytest.mark.parametrize("biased", [True, False])
def test_winograd_gives_the_direct_sum_within_a_few_ulp_of_its_largest_term(
    x_shape: tuple[int, ...], m: int, pads: tuple[int, int, int, int], biased: bool
) -> None:
    x, w, b = _rand(*x_shape, seed=1), _rand(m, x_shape[1], 3, 3, seed=2), _rand(m, seed=3)
    out = (x_shape[2] + pads[0] + pads[2] - 2, x_shape[3] + pads[1] + pads[3] - 2)
    assert winograd(1, m, x_shape[1], (3, 3), (1, 1), (1, 1), out)
    expected = _direct(x, w, b if biased else None, pads)
    got = _convolve(x, w, b if biased else None, pads, relu=False)
    scale = np.einsum("nchw->n", np.abs(x.astype(np.float64)))[:, None, None, None] * np.abs(w).max()
    assert np.all(np.abs(got - expected) <= 1e-5 * scale)
    relu = _convolve(x, w, b if biased else None, pads, relu=True)
    assert np.array_equal(relu, np.maximum(got, 0))
    wide = _convolve(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64) if biased else None, pads, False)
    np.testing.assert_allclose(wide, expected, rtol=1e-10, atol=1e-10)  # float64 through dgemm


def test_winograd_matches_onnxruntime_in_fp32(rt: Runtime) -> None:
    attrs = {"pads": [1, 1, 1, 1]}
    inputs = {"x": _rand(1, 128, 20, 20, seed=4), "w": _rand(128, 128, 3, 3, seed=5), "b": _rand(128, seed=6)}
    expected = reference("Conv", inputs, **attrs)
    (got,) = on_device("Conv", inputs, expected, **attrs)
    np.testing.assert_allclose(got, expected[0], rtol=1e-4, atol=1e-4)


def test_winograd_gives_the_same_bits_on_the_team_and_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w, b = _rand(1, 128, 28, 28, seed=7), _rand(128, 128, 3, 3, seed=8), _rand(128, seed=9)
    results = []
    for minimum in (0.0, 1e30):
        monkeypatch.setattr(team, "TEAM_MIN_FLOPS", minimum)
        team.reset_backoff()  # an earlier crowded team (a loaded host) does not decide this one
        before = team.TEAMS[0]
        results.append(_convolve(x, w, b, (1, 1, 1, 1), relu=True))
        assert (team.TEAMS[0] > before) == (minimum == 0.0)
    assert results[0].tobytes() == results[1].tobytes()


def test_a_winograd_convolution_that_overflows_gives_the_direct_sums_inf_and_raises_the_flag() -> None:
    x = np.full((1, 128, 16, 16), 1e20, np.float32)
    assert winograd(1, 128, 128, (3, 3), (1, 1), (1, 1), (16, 16))
    w = np.full((128, 128, 3, 3), 1e20, np.float32)
    flagged: list[str] = []
    with np.errstate(over="call"):
        previous = np.seterrcall(lambda kind, _: flagged.append(kind))
        try:
            y = _convolve(x, w, None, (1, 1, 1, 1), relu=True)
        finally:
            np.seterrcall(previous)
    # every sum is +inf, as the direct products give it (Winograd's own inf - inf would be NaN)
    assert np.isposinf(y).all() and flagged and "overflow" in flagged[0]


def test_ge_transforms_the_weights_ahead_when_the_input_and_output_transforms_cost_little() -> None:
    assert winograd_ahead(256, 64) and winograd_ahead(192, 48)  # squeezenet's 13 x 13 ones: 1/64 + 1/256 <= 1/28
    assert winograd_ahead(256, 256) and winograd_ahead(64, 64)  # resnet's: 4 MiB transformed at most
    assert not winograd_ahead(512, 512)  # 16 MiB transformed: read on every execute
    assert not winograd_ahead(32, 128) and not winograd_ahead(64, 16)  # few channels: 1/32 + 1/128 > 1/28


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize(("x_shape", "m"), [((1, 64, 13, 13), 96), ((2, 32, 9, 16), 48)])
def test_weights_transformed_ahead_give_the_bits_of_the_transform_per_call(
    dtype: type, x_shape: tuple[int, ...], m: int
) -> None:
    x, w = _rand(*x_shape, seed=10, dtype=dtype), _rand(m, x_shape[1], 3, 3, seed=11, dtype=dtype)
    compute = np.float64 if dtype == np.float64 else np.float32
    u = conv_winograd.transform_weights(w)
    assert u.shape == (16, m, x_shape[1]) and u.dtype == compute
    out = x_shape[2:]
    geometry = (1, *out, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, *out, 1, x_shape[1], m)
    scratch = conv_winograd.workspace(conv_winograd.workspace_size(x_shape[0], geometry), np.dtype(compute))
    results = []
    for given in (np.empty((0, 0), compute), u.reshape(16, -1)):  # transformed in the kernel, then ahead
        y = np.empty((x_shape[0], m, *out), compute)
        arrays = (
            x.astype(compute).reshape(*x_shape[:2], -1),
            w.astype(compute).reshape(1, m, -1),
            np.zeros(1, compute),
            y.reshape(x_shape[0], m, -1),
        )
        conv_winograd.conv_winograd(1e9, arrays, geometry, (False, False, False), scratch, np.zeros(8), given)
        results.append(y)
    assert results[0].tobytes() == results[1].tobytes()


def test_an_overflowing_convolution_with_weights_transformed_ahead_gives_the_direct_inf() -> None:
    x = np.full((1, 64, 13, 13), 1e20, np.float32)
    w = np.full((64, 64, 3, 3), 1e20, np.float32)
    with np.errstate(over="ignore"):
        y = _convolve(x, w, None, (1, 1, 1, 1), relu=True, ahead=True)
    assert np.isposinf(y).all()  # computed again by the direct products, from w


def test_the_winograd_kernels_check_their_window_and_transformed_weights() -> None:
    kernel = get_kernel("nn.conv_bias_winograd")
    x, w, b, y = TensorArg(0, 0, (1, 64, 13, 13)), TensorArg(0, 0, (96, 64, 3, 3)), TensorArg(0, 0, (96,)), None
    y = TensorArg(0, 0, (1, 96, 13, 13))
    window = [3, 3, 1, 1, 1, 1, 1, 1, 1, 1]
    kernel.check([x, w, TensorArg(0, 0, (16, 96, 64)), b, y, 1, 1, *window, 0.0, 0.0])
    bad = [
        [x, w, TensorArg(0, 0, (16, 64, 96)), b, y, 1, 1, *window, 0.0, 0.0],  # transposed
        [x, w, TensorArg(0, 1, (16, 96, 64)), b, y, 1, 1, *window, 0.0, 0.0],  # fp16: not the compute dtype
        [x, w, TensorArg(0, 0, (16, 96, 64)), b, TensorArg(0, 0, (1, 96, 7, 7)), 1, 1,
         3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0.0, 0.0],  # strided
    ]  # fmt: skip
    for specs in bad:
        with pytest.raises(KernelArgumentError):
            kernel.check(specs)


def test_the_workspace_is_reused_and_grows_for_a_larger_convolution() -> None:
    small = conv_winograd.workspace(100, np.dtype(np.float32))
    again = conv_winograd.workspace(50, np.dtype(np.float32))
    assert np.shares_memory(small, again) and again.size == 50
    large = conv_winograd.workspace(1000, np.dtype(np.float32))
    assert large.size == 1000 and conv_winograd.workspace(10, np.dtype(np.float64)).dtype == np.float64
