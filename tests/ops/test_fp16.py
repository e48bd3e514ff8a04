"""fp16 inputs: the kernels compute in fp32 (as the cube accumulates and the vector unit widens)
and round once into the fp16 output. Checked against onnxruntime twice: on the fp16 model
itself (within fp16 tolerance), and on the same rounded inputs in fp32 rounded once to fp16
(within one fp16 rounding step, which is what fp32 accumulation promises)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx_reference import on_device, reference

from cannrt.runtime.core import Runtime


def _h(*shape: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float16)


CASES: dict[str, tuple[dict[str, np.ndarray], dict[str, Any]]] = {
    "Conv": ({"x": _h(1, 16, 12, 12, seed=1), "w": _h(32, 16, 3, 3, seed=2), "b": _h(32, seed=3)},
             {"pads": [1, 1, 1, 1]}),
    "Gemm": ({"a": _h(8, 256, seed=4), "b": _h(64, 256, seed=5), "c": _h(64, seed=6)}, {"transB": 1}),
    "MatMul": ({"a": _h(2, 8, 128, seed=7), "b": _h(128, 16, seed=8)}, {}),
    "MaxPool": ({"x": _h(1, 4, 9, 9, seed=9)}, {"kernel_shape": [3, 3], "strides": [2, 2]}),
    "AveragePool": ({"x": _h(1, 4, 9, 9, seed=10)}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    "GlobalAveragePool": ({"x": _h(1, 8, 7, 7, seed=11)}, {}),
    "Add": ({"a": _h(3, 40, seed=12), "b": _h(40, seed=13)}, {}),
    "Sigmoid": ({"x": _h(200, seed=14)}, {}),
    "Softmax": ({"x": _h(4, 100, seed=15)}, {}),
    "BatchNormalization": (
        {"x": _h(1, 4, 5, 5, seed=16), "s": _h(4, seed=17), "b": _h(4, seed=18), "m": _h(4, seed=19),
         "v": np.abs(_h(4, seed=20)) + np.float16(0.5)},
        {},
    ),
}  # fmt: skip


@pytest.mark.parametrize("op_type", sorted(CASES))
def test_fp16_matches_onnxruntime(rt: Runtime, op_type: str) -> None:
    inputs, attrs = CASES[op_type]
    (half,) = reference(op_type, inputs, **attrs)
    (got,) = on_device(op_type, inputs, [half], **attrs)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), half.astype(np.float32), rtol=1e-2, atol=1e-2)
    widened = {name: value.astype(np.float32) for name, value in inputs.items()}
    (single,) = reference(op_type, widened, **attrs)
    rounded = single.astype(np.float16).astype(np.float32)
    step = np.abs(np.spacing(rounded.astype(np.float16))).astype(np.float32)
    assert np.all(np.abs(got.astype(np.float32) - rounded) <= step + 1e-6)
