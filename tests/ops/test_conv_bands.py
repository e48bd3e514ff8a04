"""Large convolutions are cut into items (row bands, or channel halves when bands would be thin;
per-tap products for few output channels) that both host threads compute: every cut gives
onnxruntime's result."""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np
import pytest
from onnx_reference import on_device, reference

from cannrt.kernels.nn import blas
from cannrt.kernels.nn.conv import _by_taps, convolve_into
from cannrt.kernels.nn.conv_plan import MIN_BAND_PIXELS
from cannrt.kernels.nn.conv_plan import plan as _plan
from cannrt.kernels.nn.window import Window
from cannrt.runtime.core import Runtime


def _rand(*shape: int, seed: int, dtype: type = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_the_plan_bands_a_large_image_into_an_even_number_of_row_bands() -> None:
    items = _plan(1, 1, 64, 64, (56, 56), 9, 4, False, False)
    assert len(items) % 2 == 0 and len(items) >= 2
    assert [(i.r0, i.r1) for i in items] == sorted({(i.r0, i.r1) for i in items})
    assert items[0].r0 == 0 and items[-1].r1 == 56 and all(a.r1 == b.r0 for a, b in itertools.pairwise(items))
    assert all((i.m0, i.m1, i.c0, i.c1) == (0, 64, 0, 64) for i in items)


def test_the_plan_splits_input_channels_when_bands_would_be_thin() -> None:
    items = _plan(1, 1, 2048, 512, (7, 7), 1, 4, False, False)
    assert [(i.c0, i.c1) for i in items] == [(0, 256), (256, 512)]  # each half its own im2col rows
    assert all((i.r0, i.r1, i.m0, i.m1) == (0, 7, 0, 2048) for i in items) and MIN_BAND_PIXELS > 4 * 7


def test_the_plan_splits_output_channels_of_a_thin_pointwise_product() -> None:
    items = _plan(1, 1, 2048, 512, (7, 7), 1, 4, True, False)  # its im2col matrix is x: nothing to build
    assert [(i.m0, i.m1) for i in items] == [(0, 1024), (1024, 2048)]
    assert all((i.r0, i.r1, i.c0, i.c1) == (0, 7, 0, 512) for i in items)


def test_a_convolution_gives_the_same_bits_whether_or_not_its_items_are_shared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A crowded host backs parallel_for off (blas.shares() False): the items are the same, so the
    channel halves' partial sums, and the result, do not depend on the host's load."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 64, 13, 13)).astype(np.float32)  # thin bands: input-channel halves
    w = rng.standard_normal((256, 64, 3, 3)).astype(np.float32)
    window = Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1))
    results = []
    for shared in (True, False):
        monkeypatch.setattr(blas, "shares", lambda shared=shared: shared)
        y = np.empty((1, 256, 13, 13), np.float32)
        convolve_into(x, w, None, 1, window, y, (0, 0.0, 0.0))
        results.append(y)
    assert results[0].tobytes() == results[1].tobytes()


def test_per_tap_products_are_two_row_bands_of_one_image() -> None:
    unit = Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1))
    assert _by_taps(unit, 128, 32, (56, 56)) and _by_taps(unit, 128, 32, (14, 14))
    assert not _by_taps(Window((3, 3), (2, 2), (1, 1), (1, 1), (1, 1)), 128, 32, (28, 28))  # strided
    assert not _by_taps(unit, 128, 256, (56, 56))  # im2col pays off
    assert not _by_taps(unit, 128, 32, (7, 7))  # the per-product overhead does not
    items = _plan(1, 1, 32, 128, (56, 56), 9, 4, False, True)
    assert [(i.r0, i.r1) for i in items] == [(0, 28), (28, 56)]


def test_a_pointwise_convolution_multiplies_x_itself_even_with_few_output_channels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 128 -> 32 channels at 56x56 would qualify for per-tap products, but a 1x1 unit-stride
    # window's im2col matrix is x itself: no padded copy of any row band is made
    from cannrt.kernels.nn import conv, window

    copies: list[tuple[int, int]] = []

    def counted(x: np.ndarray, win: Window, out: tuple[int, ...], rows: tuple[int, int], *rest: object) -> np.ndarray:
        copies.append(rows)
        return window.padded_rows(x, win, out, rows, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(conv, "padded_rows", counted)
    x, w, b = _rand(1, 128, 56, 56, seed=3), _rand(32, 128, 1, 1, seed=4), _rand(32, seed=5)
    y = np.empty((1, 32, 56, 56), np.float32)
    conv.convolve_into(x, w, b, 1, Window((1, 1), (1, 1), (1, 1), (0, 0), (0, 0)), y, (0, 0.0, 0.0))
    assert copies == []
    expected = np.einsum("mc,nchw->nmhw", w[:, :, 0, 0].astype(np.float64), x) + b.reshape(1, -1, 1, 1)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


def test_a_small_convolution_is_one_item() -> None:
    items = _plan(1, 1, 8, 4, (6, 6), 9, 4, False, False)
    assert len(items) == 1


CASES = {
    "3x3 bands": ((1, 32, 40, 40), (48, 32, 3, 3), {"pads": [1, 1, 1, 1]}),
    "7x7/2 bands": ((1, 3, 96, 96), (64, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    "1x1 bands on x": ((1, 128, 32, 32), (128, 128, 1, 1), {}),
    "1x1/2 bands": ((1, 256, 32, 32), (256, 256, 1, 1), {"strides": [2, 2]}),
    "channel halves": ((1, 256, 5, 5), (512, 256, 3, 3), {"pads": [1, 1, 1, 1]}),
    "channel halves, 7x7/2": ((1, 64, 12, 12), (256, 64, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    "per-tap bands": ((1, 128, 40, 40), (32, 128, 3, 3), {"pads": [1, 1, 1, 1]}),
    "per-tap, uneven pads, dilated": ((1, 96, 37, 33), (48, 96, 3, 5), {"pads": [2, 0, 1, 3], "dilations": [2, 1]}),
    "per-tap, unpadded 3x1": ((1, 64, 60, 50), (64, 64, 3, 1), {}),
    "per-tap, one item": ((1, 64, 10, 10), (16, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    "per-tap, batch and groups": ((2, 256, 20, 20), (64, 128, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}),
    "1x1 channel halves": ((1, 512, 6, 6), (1024, 512, 1, 1), {}),
    "1-D bands": ((1, 64, 900), (64, 64, 5), {"pads": [2, 1]}),
    "1-D channel halves": ((1, 256, 60), (256, 256, 3), {"pads": [1, 1]}),
    "3-D bands": ((1, 16, 12, 20, 20), (32, 16, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}),
    "3-D channel halves": ((1, 64, 4, 6, 6), (128, 64, 3, 3, 3), {"pads": [1, 0, 1, 1, 2, 1]}),
    "batch and groups": ((3, 32, 24, 24), (64, 16, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}),
    "dilated, uneven pads": ((1, 48, 33, 31), (64, 48, 3, 3), {"pads": [2, 0, 1, 2], "dilations": [2, 2]}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_cut_matches_onnxruntime_in_fp32(rt: Runtime, case: str) -> None:
    x_shape, w_shape, attrs = CASES[case]
    inputs = {"x": _rand(*x_shape, seed=1), "w": _rand(*w_shape, seed=2), "b": _rand(w_shape[0], seed=3)}
    before = blas.SPLITS[0]
    expected = reference("Conv", inputs, **attrs)
    (got,) = on_device("Conv", inputs, expected, **attrs)
    np.testing.assert_allclose(got, expected[0], rtol=1e-3, atol=1e-3)
    assert (blas.SPLITS[0] > before) == ("one item" not in case)  # the others are shared with the helper


@pytest.mark.parametrize("case", ["3x3 bands", "1x1 bands on x", "channel halves", "per-tap bands"])
def test_each_cut_rounds_once_into_an_fp16_output(rt: Runtime, case: str) -> None:
    x_shape, w_shape, attrs = CASES[case]
    inputs = {
        "x": _rand(*x_shape, seed=4, dtype=np.float16),
        "w": (_rand(*w_shape, seed=5) * 0.1).astype(np.float16),
        "b": _rand(w_shape[0], seed=6, dtype=np.float16),
    }
    (half,) = reference("Conv", inputs, **attrs)
    (got,) = on_device("Conv", inputs, [half], **attrs)
    assert got.dtype == np.float16
    widened = {name: value.astype(np.float32) for name, value in inputs.items()}
    rounded = reference("Conv", widened, **attrs)[0].astype(np.float16).astype(np.float32)
    step = np.abs(np.spacing(rounded.astype(np.float16))).astype(np.float32)
    assert np.all(np.abs(got.astype(np.float32) - rounded) <= step + 1e-3 * np.abs(rounded) + 1e-4)


def test_an_error_in_the_helper_thread_reaches_the_caller() -> None:
    seen: list[int] = []

    def body(index: int) -> None:
        seen.append(index)
        if index == 3:
            raise ValueError("item 3")

    with pytest.raises(ValueError, match="item 3"):
        blas.parallel_for(8, body)
    assert 3 in seen and len(seen) == len(set(seen))


def test_parallel_for_runs_every_item_once() -> None:
    seen: list[int] = []
    blas.parallel_for(100, seen.append)
    assert sorted(seen) == list(range(100))


def test_a_stalled_helper_makes_the_next_kernels_run_on_the_caller() -> None:
    started = threading.Event()

    def body(index: int) -> None:  # the helper's item outlasts the caller's: the caller waits
        if threading.current_thread().name.startswith("cannrt-kernel-blas"):
            started.set()
            time.sleep(0.02)
        else:
            assert started.wait(10)

    stalls, splits = blas.STALLS[0], blas.SPLITS[0]
    blas.parallel_for(2, body)
    assert blas.STALLS[0] == stalls + 1 and blas.SPLITS[0] == splits + 1
    threads: list[str] = []
    blas.parallel_for(4, lambda index: threads.append(threading.current_thread().name))
    assert threads == [threading.current_thread().name] * 4 and blas.SPLITS[0] == splits + 1
    blas.reset_backoff()
    blas.parallel_for(2, lambda index: None)
    assert blas.SPLITS[0] == splits + 2


def _stall() -> None:
    """A shared kernel whose helper item outlasts the caller's: the caller waits (a stall)."""
    started = threading.Event()

    def body(index: int) -> None:
        if threading.current_thread().name.startswith("cannrt-kernel-blas"):
            started.set()
            time.sleep(0.02)
        else:
            assert started.wait(10)

    blas.parallel_for(2, body)


def test_the_back_off_doubles_while_stalls_repeat_and_ends_after_a_clean_shared_kernel() -> None:
    stalls = blas.STALLS[0]
    _stall()
    assert blas.STALLS[0] == stalls + 1 and blas._backoff[1] == 2 * blas.BACKOFF_MIN_S
    blas._backoff[0] = 1e-9  # the back-off has run out: the helper is tried again, and stalls again
    _stall()
    assert blas.STALLS[0] == stalls + 2 and blas._backoff[1] == 4 * blas.BACKOFF_MIN_S
    for _ in range(8):  # doubling stops at the longest
        blas._backoff[0] = 1e-9
        _stall()
    assert blas._backoff[1] == blas.BACKOFF_MAX_S
    blas._backoff[0] = 1e-9
    blas.parallel_for(2, lambda index: None)  # shared without a stall: a quiet host again
    assert blas._backoff == [0.0, blas.BACKOFF_MIN_S]
