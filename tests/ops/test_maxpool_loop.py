"""pool_loops.maxpool_into, the one-pass 2-D max pooling: the same numbers as the separable numpy
reduction, bit for bit on random values (NaN propagated, pads and the ceil-mode edge never taking
part) over kernel sizes, strides, dilations, pads and both float dtypes, and the same values among
signed zeros; the arrays it does not take still pool through numpy."""

from __future__ import annotations

import numpy as np
import pytest

from cannrt.kernels.nn import pool_loops
from cannrt.kernels.nn.window import Window
from cannrt.kernels.registry import get_kernel

MAXPOOL = get_kernel("nn.maxpool")
CASES = {  # name: (H, W), kernel, strides, dilations, pads begin, pads end, ceil mode
    "3x3/2 (squeezenet)": ((61, 67), (3, 3), (2, 2), (1, 1), (0, 0), (0, 0), False),
    "3x3/2 pad 1 (resnet)": ((56, 56), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), False),
    "3x3/2 ceil mode": ((55, 55), (3, 3), (2, 2), (1, 1), (0, 0), (0, 0), True),
    "2x2/2": ((50, 64), (2, 2), (2, 2), (1, 1), (0, 0), (0, 0), False),
    "3x3/1 pad 1": ((20, 50), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), False),
    "1x5/3 dilated, uneven pads": ((17, 60), (1, 5), (1, 3), (1, 2), (0, 3), (0, 1), True),
    "4x3/2 dilation 2 pads 2": ((30, 49), (4, 3), (2, 2), (2, 2), (2, 2), (2, 1), False),
    "2x2/2 pad 1 ceil mode, odd sizes": ((9, 11), (2, 2), (2, 2), (1, 1), (1, 1), (1, 1), True),
    "5x5/1 pad 2 (rows past three)": ((12, 14), (5, 5), (1, 1), (1, 1), (2, 2), (2, 2), False),
    "3x3/2 pad 1 over 2 x 3": ((2, 3), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), False),
    "3x1/1 over one column": ((7, 1), (3, 1), (1, 1), (1, 1), (0, 0), (0, 0), False),
}


def _extent(n: int, k: int, s: int, d: int, pb: int, pe: int, ceil: bool) -> int:
    span = n + pb + pe - ((k - 1) * d + 1)
    return (-(-span // s) if ceil else span // s) + 1


def _run(name: str, dtype: type, loop: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of one case pooled by the loop (MIN_WIDTH 1) or by numpy (MIN_WIDTH out of reach)."""
    (h, w), kernel, strides, dilations, pb, pe, ceil = CASES[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal((2, 3, h, w)).astype(dtype)
    x.reshape(-1)[::97] = np.nan
    out = tuple(_extent(*args, ceil) for args in zip((h, w), kernel, strides, dilations, pb, pe, strict=True))
    y = np.full((2, 3, *out), 7.0, dtype)
    monkeypatch.setattr(pool_loops, "MIN_WIDTH", 1 if loop else 1 << 20)
    assert pool_loops.takes(x, y) == loop
    MAXPOOL.compute(x, y, *kernel, *strides, *dilations, *pb, *pe)
    return x, y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_loop_gives_the_separable_reductions_numbers(
    name: str, dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, looped = _run(name, dtype, True, monkeypatch)
    _, reduced = _run(name, dtype, False, monkeypatch)
    assert np.isnan(looped).any() and np.isfinite(looped).any()
    assert np.array_equal(looped.view(np.uint8), reduced.view(np.uint8))


def test_a_window_on_pads_alone_holds_minus_infinity() -> None:
    x = np.arange(2 * 60, dtype=np.float32).reshape(1, 2, 60)
    y = np.full((1, 4, 30), 7.0, np.float32)
    window = Window((2, 2), (2, 2), (1, 1), (4, 0), (0, 0))  # output rows 0 and 1 read only pad rows
    pool_loops.maxpool_into(x, y, window)  # row 3 lies past the input (a ceil-mode edge)
    assert (y[0, [0, 1, 3]] == -np.inf).all()
    np.testing.assert_array_equal(y[0, 2], np.maximum(x[0, 1, 0::2], x[0, 1, 1::2]))


def test_what_it_does_not_take() -> None:
    x = np.zeros((1, 2, 8, 64), np.float32)
    y = np.zeros((1, 2, 4, 32), np.float32)
    assert pool_loops.takes(x, y) and pool_loops.takes(x[..., :1].copy(), y[..., :1].copy())
    assert not pool_loops.takes(x[..., :40], y)  # strided
    assert not pool_loops.takes(x.astype(np.float16), y.astype(np.float16))
    assert not pool_loops.takes(x, y.astype(np.float64))
    wide = np.zeros((1, 2, 4, 64), np.float32)
    assert not pool_loops.takes(x, wide[..., ::2])


@pytest.mark.parametrize("name", sorted(CASES))
def test_signed_zeros_tie_as_numpys_maximum_does(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Among equal zeros np.maximum keeps its second operand; so does the loop, so the unpadded
    cases agree bit for bit. Where pads cut windows the numpy path combines the taps in another
    order, and only the values (not the sign of a tied zero) are the same."""
    (h, w), kernel, strides, dilations, pb, pe, ceil = CASES[name]
    x = np.zeros((1, 2, h, w), np.float32)
    x.reshape(-1)[1::5] = -0.0
    x.reshape(-1)[2::11] = -1.0
    out = tuple(_extent(*args, ceil) for args in zip((h, w), kernel, strides, dilations, pb, pe, strict=True))
    results = []
    for width in (1, 1 << 20):
        monkeypatch.setattr(pool_loops, "MIN_WIDTH", width)
        y = np.full((1, 2, *out), 7.0, np.float32)
        MAXPOOL.compute(x, y, *kernel, *strides, *dilations, *pb, *pe)
        results.append(y)
    looped, reduced = results
    assert np.array_equal(looped, reduced)
    if not any(pb) and not any(pe):
        assert np.array_equal(looped.view(np.uint8), reduced.view(np.uint8))
