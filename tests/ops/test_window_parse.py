"""Window.parse remembers the plain-int tuples it parsed, and still rejects bad ones every time,
with the kernel's name and the numbers."""

from __future__ import annotations

import pytest

from cannrt.kernels.nn.window import Window
from cannrt.kernels.registry import KernelArgumentError


def test_a_parsed_tuple_gives_its_window_each_time() -> None:
    values = (3, 1, 2, 1, 1, 1, 0, 2, 1, 1)
    first = Window.parse("conv", 2, values)
    assert first == Window((3, 1), (2, 1), (1, 1), (0, 2), (1, 1)) and Window.parse("pool", 2, list(values)) == first


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ((3, 3, 0, 1, 1, 1, 1, 1, 1, 1), r"conv: kernel, strides and dilations must be >= 1, got \[3, 3, 0"),
        ((3, 3, 1, 1, 1, 1, -1, 1, 1, 1), r"conv: pads must be >= 0, got \[3, 3, 1, 1, 1, 1, -1"),
        ((3, 3, 1, 1), r"conv: expected 10 int window scalars, got \[3, 3, 1, 1\]"),
        ((3, 3, 1.0, 1, 1, 1, 1, 1, 1, 1), r"conv: expected 10 int window scalars"),
    ],
)
def test_a_bad_tuple_is_rejected_every_time(values: tuple[object, ...], message: str) -> None:
    for _ in range(2):
        with pytest.raises(KernelArgumentError, match=message):
            Window.parse("conv", 2, values)


def test_bools_are_ints_as_before() -> None:
    assert Window.parse("conv", 1, (True, 1, 1, False, 0)) == Window((1,), (1,), (1,), (0,), (0,))
