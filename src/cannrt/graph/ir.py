"""The graph the passes rewrite: ONNX nodes with decoded attributes over values of known shape.

Node and Value are the lowering contract's types; Graph holds them with the constants (initialisers
and everything folded) and the model's inputs and outputs. Nodes stay in topological order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import numpy as np

from cannrt.graph.lowering import Node, Value


@dataclass
class Graph:
    """A model after import: nodes in topological order, every value's shape and dtype known."""

    name: str
    nodes: list[Node]
    values: dict[str, Value]
    constants: dict[str, np.ndarray]
    inputs: list[str]
    outputs: list[str]
    opset: int = 13
    stats: dict[str, int] = field(default_factory=dict)  # what the passes rewrote, by pass

    def producers(self) -> dict[str, int]:
        """Value name -> index of the node that writes it."""
        return {out: i for i, node in enumerate(self.nodes) for out in node.outputs if out}

    def readers_of(self, name: str) -> list[Node]:
        """The nodes reading name (one pass, no table: for passes that rewrite as they go)."""
        return [node for node in self.nodes if name in node.inputs]

    def producer_of(self, name: str) -> Node | None:
        return next((node for node in self.nodes if name in node.outputs), None)

    def index(self, node: Node) -> int:
        """Where node is (by identity: equal nodes compare their attributes)."""
        return next(i for i, other in enumerate(self.nodes) if other is node)

    def remove(self, node: Node) -> None:
        del self.nodes[self.index(node)]

    def rename(self, old: str, new: str) -> None:
        """Every reader of `old` (nodes and graph outputs) reads `new` instead."""
        for i, node in enumerate(self.nodes):
            if old in node.inputs:
                inputs = tuple(new if name == old else name for name in node.inputs)
                self.nodes[i] = replace(node, inputs=inputs)
        self.outputs = [new if name == old else name for name in self.outputs]

    def prune(self) -> int:
        """Drop nodes nothing reads and constants nothing uses; the number of nodes dropped."""
        dropped = 0
        while True:
            used = set(self.outputs) | {name for node in self.nodes for name in node.inputs}
            keep = [node for node in self.nodes if any(out in used for out in node.outputs if out)]
            if len(keep) == len(self.nodes):
                break
            dropped += len(self.nodes) - len(keep)
            self.nodes = keep
        used = set(self.outputs) | {name for node in self.nodes for name in node.inputs}
        self.constants = {name: array for name, array in self.constants.items() if name in used}
        live = used | {out for node in self.nodes for out in node.outputs} | set(self.inputs)
        self.values = {name: value for name, value in self.values.items() if name in live}
        return dropped


def nbytes(value: Value) -> int:
    """Bytes of a tensor: prod(shape) x itemsize (a scalar is one element)."""
    return math.prod(value.shape) * value.dtype.itemsize


def constant_value(name: str, array: np.ndarray) -> Value:
    return Value(name, tuple(int(d) for d in array.shape), array.dtype)


def unique_name(base: str, taken: Iterable[str]) -> str:
    """base, or base_1, base_2... whichever is not taken."""
    names = set(taken)
    if base not in names:
        return base
    n = 1
    while f"{base}_{n}" in names:
        n += 1
    return f"{base}_{n}"
