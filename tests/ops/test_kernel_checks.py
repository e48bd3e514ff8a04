"""Bad arguments to the nn. kernels: refused at launch with 107000 and the numbers (nothing is
enqueued), or, for data the check cannot see (a gather index out of range), an AI Core error
on the stream: never a crash."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import cannrt
from cannrt.runtime.core import Runtime


def _arrays(device: cannrt.Device, *shapes: tuple[int, ...]) -> list[cannrt.DeviceArray]:
    return [device.empty(shape, np.float32) for shape in shapes]


WINDOW_3X3 = (3, 3, 1, 1, 1, 1, 1, 1, 1, 1)  # kernel, strides, dilations, pads begin, pads end


@pytest.mark.parametrize(
    "kernel, shapes, scalars, message",
    [
        ("nn.conv", [(1, 3, 8, 8), (4, 5, 3, 3), (1, 4, 8, 8)], (1, 0, *WINDOW_3X3, 0.0, 0.0), "channels"),
        ("nn.conv", [(1, 3, 8, 8), (4, 3, 3, 3), (1, 4, 7, 8)], (1, 0, *WINDOW_3X3, 0.0, 0.0), "gives \\[8\\]"),
        ("nn.conv", [(1, 3, 8, 8), (4, 3, 3, 3), (1, 4, 8, 8)], (1, 0, 3, 3), "scalars"),
        ("nn.gemm", [(4, 5), (6, 7), (4, 7)], (0, 0, 0, 1.0, 1.0, 0.0, 0.0), "trans"),
        ("nn.add", [(2, 3), (4,), (2, 3)], (), "broadcast"),
        ("nn.maxpool", [(1, 2, 8, 8), (1, 2, 9, 9)], WINDOW_3X3, "gives"),
        ("nn.slice", [(4, 4), (2, 4)], (3, 1, 0, 1), "axis 0"),
        ("nn.transpose", [(2, 3), (2, 3)], (1, 0), "perm"),
        (
            "nn.resize",
            [(1, 1, 2, 2), (1, 1, 4, 4)],
            (9, 0, 0, 0, 0, -0.75, 0.0, 1.0, 1.0, 2.0, 2.0, *[0.0] * 8),
            "mode",
        ),
    ],
)
def test_a_bad_launch_is_refused_with_the_numbers(
    rt: Runtime, kernel: str, shapes: list[tuple[int, ...]], scalars: tuple[Any, ...], message: str
) -> None:
    device = cannrt.Device(0)
    stream = device.stream()
    with pytest.raises(cannrt.CannError, match=message) as raised:
        stream.launch(kernel, *_arrays(device, *shapes), *scalars)
    assert raised.value.code == 107000
    stream.synchronize()


def test_a_gather_index_out_of_range_is_an_ai_core_error_on_the_stream(rt: Runtime) -> None:
    device = cannrt.Device(0)
    stream = device.stream()
    data = device.array(np.arange(6, dtype=np.float32).reshape(3, 2))
    index = device.array(np.array([0, 3], dtype=np.int64))
    out = device.empty((2, 2), np.float32)
    stream.launch("nn.gather", data, index, out, 0)
    with pytest.raises(cannrt.CannError, match="gather: index out of"):
        stream.synchronize()
