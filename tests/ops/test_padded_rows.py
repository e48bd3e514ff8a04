"""window.padded_rows gives exactly the rows of window.padded's frame, for every row range (ranges
inside the leading or trailing pads included), with or without slack after them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cannrt.kernels.nn.window import Window, padded, padded_rows

F32 = np.dtype(np.float32)
GEOMETRIES = [
    (h, w, pb, pe, k, s)
    for h, w, pb, pe, k, s in itertools.product([1, 5, 8], [3, 6], [0, 1, 3], [0, 2], [1, 3], [1, 2])
    if h + pb + pe >= k and w + pb + pe >= k
]


@pytest.mark.parametrize(("h", "w", "pb", "pe", "k", "s"), GEOMETRIES)
def test_every_row_range_matches_the_padded_frame(h: int, w: int, pb: int, pe: int, k: int, s: int) -> None:
    x = np.random.default_rng(h * 100 + w).standard_normal((1, 2, h, w)).astype(np.float32)
    window = Window((k, k), (s, s), (1, 1), (pb, pb), (pe, pe))
    out = ((h + pb + pe - k) // s + 1, (w + pb + pe - k) // s + 1)
    full = padded(x, window, out, 7.0, F32)
    for start, stop in itertools.combinations(range(full.shape[2] + 1), 2):
        np.testing.assert_array_equal(padded_rows(x, window, out, (start, stop), 7.0, F32), full[:, :, start:stop])
        with_slack = padded_rows(x, window, out, (start, stop), 7.0, F32, slack=3)
        np.testing.assert_array_equal(with_slack, full[:, :, start:stop])
        buffer = with_slack.base
        assert with_slack.flags.c_contiguous and buffer is not None and buffer.size == with_slack.size + 3
        assert not buffer[with_slack.size :].any()  # the slack is zeros


def test_rows_no_pad_reaches_are_x_itself() -> None:
    x = np.arange(2 * 3 * 8 * 5, dtype=np.float32).reshape(2, 3, 8, 5)
    window = Window((3, 1), (1, 1), (1, 1), (1, 0), (1, 0))
    rows = padded_rows(x, window, (8, 5), (2, 6), 0.0, F32)
    assert np.shares_memory(rows, x) and np.array_equal(rows, x[:, :, 1:5])
