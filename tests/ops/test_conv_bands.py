"""Convolutions are cut into items (row bands, or parts of the output channels over an im2col
matrix built once) that a team of native threads computes (kernels/nn/conv_plan.py, team.py):
every cut gives onnxruntime's result, and the cuts depend on the shape alone."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pytest
from onnx_reference import on_device, reference

from cannrt.kernels.nn import conv_plan, team
from cannrt.kernels.nn.conv import convolve_into
from cannrt.kernels.nn.conv_plan import MIN_PART_ROWS, PARTS_MAX_BYTES
from cannrt.kernels.nn.window import Window
from cannrt.runtime.core import Runtime


def _rand(*shape: int, seed: int, dtype: type = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _plan(
    n: int, group: int, mg: int, cg: int, taps: int, out: tuple[int, int], pointwise: bool, unit: bool = False
) -> conv_plan.Plan:
    return conv_plan.plan(n, group, mg, cg, taps, out[0], out[1], 4, pointwise, unit)


def _band_count(*args: object) -> int:
    """How many row bands _plan(*args) cuts."""
    bands = _plan(*args).bands  # type: ignore[arg-type]
    assert bands is not None
    return len(bands)


def test_a_wide_image_is_cut_into_row_bands_of_about_band_bytes_of_im2col() -> None:
    items = _plan(1, 1, 64, 64, 9, (56, 56), False)
    assert items.bands is not None and len(items.parts) == 0
    bands = [tuple(row) for row in items.bands]
    assert bands[0][2] == 0 and bands[-1][3] == 56 and all(a[3] == b[2] for a, b in itertools.pairwise(bands))
    assert len(bands) >= 2 and all((n, g) == (0, 0) for n, g, _, _ in bands)
    rows = max(r1 - r0 for _, _, r0, r1 in bands)
    assert 64 * 9 * rows * 56 * 4 <= conv_plan.BAND_BYTES * 1.1


def test_a_small_image_builds_its_im2col_matrix_once_and_cuts_the_output_channels() -> None:
    items = _plan(1, 1, 256, 256, 9, (14, 14), False)  # 256 channels over 196 pixels
    assert items.bands is None
    assert [tuple(row) for row in items.builds] == [(0, 0, 0, 128), (0, 0, 128, 256)]  # input-channel rows
    assert [tuple(row) for row in items.parts] == [(0, 0, 0, 128), (0, 0, 128, 256)]  # output channels
    assert PARTS_MAX_BYTES >= 256 * 9 * 196 * 4


def test_a_pointwise_product_multiplies_x_itself() -> None:
    items = _plan(1, 1, 2048, 512, 1, (7, 7), True)
    assert items.bands is None and len(items.builds) == 0
    assert [tuple(row) for row in items.parts] == [(0, 0, 0, 1024), (0, 0, 1024, 2048)]


def test_few_output_channels_or_more_pixels_than_channels_take_bands() -> None:
    """Cut by output channels, each part would read the whole matrix; cut by bands, each reads
    its own columns: bands when the image has more pixels than output channels, or when a part
    would have fewer than MIN_PART_ROWS rows."""
    assert _plan(1, 1, 64, 256, 1, (56, 56), True).bands is not None  # 3136 pixels > 64 channels
    assert _plan(1, 1, MIN_PART_ROWS, 512, 1, (13, 13), True).bands is not None
    assert _plan(1, 1, 1024, 256, 1, (14, 14), True).bands is None


@pytest.fixture
def small_products(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """conv_plan as it plans for OpenBLAS (its plans are remembered per shape: forgotten around)."""
    conv_plan.plan.cache_clear()
    monkeypatch.setattr(conv_plan, "SMALL_PRODUCTS", True)
    yield
    conv_plan.plan.cache_clear()


def test_a_small_product_over_a_short_inner_dimension_is_cut_into_small_products(small_products: object) -> None:
    """OpenBLAS's small-matrix kernels (no packing) take products of up to SMALL_PRODUCT
    multiply-adds: a product over an inner dimension of at most SMALL_MAX_DEPTH (input channels
    of a pointwise window, channels x taps of an im2col band) is cut into an even number of
    bands that small, when SMALL_MAX_BANDS of them are enough."""
    for mg, cg, size in ((128, 32, 27), (64, 16, 55), (64, 64, 56), (16, 128, 55)):
        items = _plan(1, 1, mg, cg, 1, (size, size), True)
        assert items.bands is not None and len(items.bands) <= conv_plan.SMALL_MAX_BANDS
        widest = max(r1 - r0 for _, _, r0, r1 in items.bands)
        assert mg * cg * widest * size <= conv_plan.SMALL_PRODUCT and len(items.bands) > 2
    stem = conv_plan.plan(1, 1, 64, 3, 9, 111, 111, 4, False, False)  # squeezenet's 3x3/2 over 3 channels
    assert stem.bands is not None and 2 < len(stem.bands) <= conv_plan.SMALL_MAX_BANDS
    assert 64 * 27 * max(r1 - r0 for _, _, r0, r1 in stem.bands) * 111 <= conv_plan.SMALL_PRODUCT
    assert _band_count(1, 1, 64, 512, 1, (13, 13), True) == 2  # too deep: packing pays
    assert _band_count(1, 1, 64, 256, 1, (56, 56), True) == 4  # 56 bands would be needed: 1 MiB bands


def test_with_onemkl_a_small_product_keeps_bands_of_band_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """oneMKL packs small products too: they are not cut finer than BAND_BYTES of im2col."""
    conv_plan.plan.cache_clear()
    monkeypatch.setattr(conv_plan, "SMALL_PRODUCTS", False)
    try:
        assert _band_count(1, 1, 128, 32, 1, (27, 27), True) == 2
        stem = conv_plan.plan(1, 1, 64, 3, 9, 111, 111, 4, False, False)
        assert stem.bands is not None and len(stem.bands) == 2
    finally:
        conv_plan.plan.cache_clear()


def test_a_single_image_on_two_threads_takes_an_even_number_of_bands() -> None:
    """Three bands of one image would leave one thread the third alone: 224 channels over 56 x 56
    need 2.7 MiB of bands, in four."""
    assert _band_count(1, 1, 128, 224, 1, (56, 56), True) == 4
    assert _band_count(1, 1, 64, 64, 9, (56, 56), False) % 2 == 0


def test_a_unit_stride_window_over_enough_input_channels_takes_per_tap_products() -> None:
    items = _plan(1, 1, 32, 128, 9, (56, 56), False, unit=True)
    assert items.by_taps and items.bands is not None and len(items.bands) == 4  # few outputs, many rows
    items = _plan(1, 1, 128, 128, 9, (28, 28), False, unit=True)
    assert items.by_taps and [tuple(row) for row in items.bands] == [(0, 0, 0, 14), (0, 0, 14, 28)]
    assert not _plan(1, 1, 64, 8, 9, (56, 56), False, unit=True).by_taps  # shallow products: im2col
    assert not _plan(1, 1, 64, 64, 9, (28, 28), False, unit=False).by_taps  # strided


def test_a_small_image_with_many_output_channels_takes_parts_over_per_tap_products() -> None:
    """Two bands of a 14 x 14 image give per-tap products 98 columns wide: cut the output channels."""
    for size, channels in ((14, 256), (7, 512)):
        items = _plan(1, 1, channels, channels, 9, (size, size), False, unit=True)
        assert not items.by_taps and items.bands is None and len(items.parts) == 2
    assert _plan(1, 1, 32, 128, 9, (7, 7), False, unit=True).by_taps  # too few channels for parts


def test_a_small_convolution_is_one_item() -> None:
    items = _plan(1, 1, 8, 4, 9, (6, 6), False)
    assert items.flops < team.TEAM_MIN_FLOPS
    assert items.bands is None and len(items.parts) == 1 and len(items.builds) == 1


def test_images_and_groups_are_items_of_their_own() -> None:
    items = _plan(3, 2, 32, 16, 9, (24, 24), False)
    assert items.bands is None
    assert sorted({(n, g) for n, g, _, _ in items.parts}) == [(n, g) for n in range(3) for g in range(2)]


def test_a_convolution_gives_the_same_bits_on_the_team_and_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The serial twin runs the same items in order: a result does not depend on the team."""
    for x_shape, w_shape in (((1, 64, 13, 13), (256, 64, 3, 3)), ((1, 32, 40, 40), (48, 32, 3, 3))):
        x, w, b = _rand(*x_shape, seed=5), _rand(*w_shape, seed=6), _rand(w_shape[0], seed=7)
        window = Window((3, 3), (1, 1), (1, 1), (1, 1), (1, 1))
        results = []
        for minimum in (0.0, 1e30):
            monkeypatch.setattr(team, "TEAM_MIN_FLOPS", minimum)
            team.reset_backoff()  # an earlier crowded team (a loaded host) does not decide this one
            before = team.TEAMS[0]
            y = np.empty((1, w_shape[0], *x_shape[2:]), np.float32)
            convolve_into(x, w, b, 1, window, y, (1, 0.0, 0.0))
            assert (team.TEAMS[0] > before) == (minimum == 0.0)
            results.append(y)
        assert results[0].tobytes() == results[1].tobytes()


CASES = {
    "3x3 bands": ((1, 32, 40, 40), (48, 32, 3, 3), {"pads": [1, 1, 1, 1]}),
    "7x7/2 bands": ((1, 3, 96, 96), (64, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    "1x1 bands on x": ((1, 128, 32, 32), (128, 128, 1, 1), {}),
    "1x1/2 bands": ((1, 256, 32, 32), (256, 256, 1, 1), {"strides": [2, 2]}),
    "output-channel parts": ((1, 256, 5, 5), (512, 256, 3, 3), {"pads": [1, 1, 1, 1]}),
    "output-channel parts, 7x7/2": ((1, 64, 12, 12), (256, 64, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    "few output channels, bands": ((1, 128, 40, 40), (32, 128, 3, 3), {"pads": [1, 1, 1, 1]}),
    "uneven pads, dilated, 3x5": ((1, 96, 37, 33), (48, 96, 3, 5), {"pads": [2, 0, 1, 3], "dilations": [2, 1]}),
    "unpadded 3x1": ((1, 64, 60, 50), (64, 64, 3, 1), {}),
    "one item": ((1, 64, 10, 10), (16, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    "batch and groups, 3x3": ((2, 256, 20, 20), (64, 128, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}),
    "1x1 output-channel parts": ((1, 512, 6, 6), (1024, 512, 1, 1), {}),
    "1-D bands": ((1, 64, 900), (64, 64, 5), {"pads": [2, 1]}),
    "1-D output-channel parts": ((1, 256, 60), (256, 256, 3), {"pads": [1, 1]}),
    "3-D bands": ((1, 16, 12, 20, 20), (32, 16, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}),
    "3-D output-channel parts": ((1, 64, 4, 6, 6), (128, 64, 3, 3, 3), {"pads": [1, 0, 1, 1, 2, 1]}),
    "batch and groups": ((3, 32, 24, 24), (64, 16, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}),
    "dilated, uneven pads": ((1, 48, 33, 31), (64, 48, 3, 3), {"pads": [2, 0, 1, 2], "dilations": [2, 2]}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_cut_matches_onnxruntime_in_fp32(host_runs_kernels: Runtime, case: str) -> None:
    x_shape, w_shape, attrs = CASES[case]
    inputs = {"x": _rand(*x_shape, seed=1), "w": _rand(*w_shape, seed=2), "b": _rand(w_shape[0], seed=3)}
    before = team.TEAMS[0]
    expected = reference("Conv", inputs, **attrs)
    (got,) = on_device("Conv", inputs, expected, **attrs)
    np.testing.assert_allclose(got, expected[0], rtol=1e-3, atol=1e-3)
    assert (team.TEAMS[0] > before) == ("one item" not in case)  # the others run on the team


@pytest.mark.parametrize("case", ["3x3 bands", "1x1 bands on x", "output-channel parts", "few output channels, bands"])
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
