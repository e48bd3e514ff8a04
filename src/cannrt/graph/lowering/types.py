"""The lowering contract's data: graph values and nodes in, kernel launches out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Value:
    """A tensor of the graph after shape inference."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass(frozen=True)
class Node:
    """An ONNX node with its attributes decoded (bytes as str, TensorProto as numpy); opset is the
    model's default-domain opset (Softmax's axis semantics change at 13)."""

    name: str
    op_type: str
    inputs: tuple[str, ...]  # "" for an absent optional input
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    opset: int = 18


@dataclass(frozen=True)
class KernelStep:
    """One kernel launch."""

    kernel: str  # registered kernel name
    block_dim: int  # chosen from the work's units and the chip's cores
    args: tuple[str | int | float, ...]  # value names (tensors) then scalars, as the kernel takes them


@dataclass(frozen=True)
class Lowered:
    """The launches one node becomes, and the temporaries they use (planned like feature maps)."""

    steps: tuple[KernelStep, ...]
    scratch: tuple[Value, ...] = ()
    constants: tuple[tuple[Value, np.ndarray], ...] = ()  # weights made for the launches (ge's offline formats)


class LoweringError(ValueError):
    """A node lower() cannot map onto kernels: carries the node name, its op type and why."""

    def __init__(self, node: str, op_type: str, reason: str) -> None:
        super().__init__(f"node {node!r} ({op_type}): {reason}")
        self.node = node
        self.op_type = op_type
        self.reason = reason
