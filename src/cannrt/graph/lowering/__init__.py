"""Lowering: ONNX nodes (after shape inference and folding) onto kernel launches.

The graph engine calls `lower` per node; each rule emits launches of the "nn." kernels with
block_dim chosen from the kernel's tiling units and the chip's cores. Compile-time inputs
(Reshape's shape, Slice's starts..., Pad's pads, Resize's scales / sizes, Clip's bounds,
Split's split, reduction axes, Squeeze / Unsqueeze axes) must come in `constants`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cannrt.graph.lowering import cube, elementwise, movement, normalize, resize  # noqa: F401  (register the rules)
from cannrt.graph.lowering.context import FUSABLE, RULES, Lowering
from cannrt.graph.lowering.types import KernelStep, Lowered, LoweringError, Node, Value

__all__ = ["KernelStep", "Lowered", "LoweringError", "Node", "Value", "fusable_activations", "lower", "supported_ops"]


def lower(node: Node, values: Mapping[str, Value], constants: Mapping[str, np.ndarray], cores: int) -> Lowered:
    """The kernel launches that compute node; LoweringError for an op or attribute no kernel does."""
    function = RULES.get(node.op_type)
    if function is None:
        raise LoweringError(node.name, node.op_type, "no kernel implements this op type")
    low = Lowering(node, values, constants, cores)
    function(low)
    return low.lowered()


def supported_ops() -> frozenset[str]:
    """ONNX op types lower() accepts."""
    return frozenset(RULES)


def fusable_activations(op_type: str) -> frozenset[str]:
    """Activations the kernel of op_type applies to its output (ge puts one in attrs["activation"])."""
    return FUSABLE.get(op_type, frozenset())
