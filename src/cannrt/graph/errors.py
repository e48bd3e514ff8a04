"""The graph engine's errors: every one is a ValueError whose message is the one line `cannrt atc` prints."""

from __future__ import annotations


class GraphError(ValueError):
    """A model the graph engine cannot compile: the message names the node, the tensor and why."""


class ModelFileError(GraphError):
    """A file that is not a readable ONNX model (ge::GRAPH_FAILED on parse)."""


class ShapeError(GraphError):
    """A tensor whose shape is unknown or contradicts the given --input_shape."""


class UnsupportedOpError(GraphError):
    """A node no kernel implements: carries the node name and op type."""

    def __init__(self, node: str, op_type: str, why: str = "") -> None:
        detail = f": {why}" if why else ""
        super().__init__(f"node {node!r}: op type {op_type!r} is not supported{detail}")
        self.node = node
        self.op_type = op_type
