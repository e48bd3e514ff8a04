"""Operator kernels of the ONNX operator set (convolution, pooling, products, elementwise,
normalisation, data movement), registered under the "nn." prefix; graph/lowering/ maps ONNX
nodes onto them."""

from __future__ import annotations

from cannrt.kernels.nn import conv, elementwise, linalg, movement, normalize, pool, resize  # noqa: F401  (registers them)
from cannrt.kernels.nn.common import PREFIX

__all__ = ["PREFIX"]
