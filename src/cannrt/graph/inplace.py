"""Concat in place (GE's "no-padding continuous memory" for ConcatD / ConcatV2 on the outer axis).

A Concat whose inputs are each one contiguous byte range of its output (every dim before the axis
is 1: axis 1 of a batch-1 NCHW tensor, or the leading axis) needs no copy when its producers write
straight into their slice: each such input is placed inside the output at its byte offset and its
concat_into launch disappears. Nested concats (densenet's chains: each concat's first input is the
previous concat) nest: an input placed in a concat that is itself placed in a later one ends up at
the sum of the offsets. A reshape alias (output -> input, offset 0) is a view of the same kind, so
an input is placed through its alias root.

An input keeps its copy when it is a constant, when its buffer group holds a model input or output
(those live in the user's buffers), when its group is already placed elsewhere (a tensor read by two
concats, or twice by one: the first takes it), when its dtype or rank differs from the output's, or
when it is empty. The memory plan gives each group one lifetime, from the first write of any
member to the last read of any member (a placed input keeps its whole output alive), so nothing
else is put in a slice while anyone still reads it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from cannrt.graph.ir import Graph

View = tuple[str, int]  # (the tensor whose bytes these are, byte offset in it)


@dataclass(frozen=True)
class InPlace:
    """Which tensors share bytes: reshape aliases (output -> input, the same bytes) and concat slots
    (a reshape group's root -> (the Concat output, byte offset): part of its bytes); per Concat
    node the (input, element offset along the axis) copies it no longer launches."""

    alias: Mapping[str, str]
    slots: dict[str, View]
    placed: dict[str, frozenset[tuple[str, int]]]

    def root(self, name: str) -> View:
        """The tensor owning name's bytes and name's byte offset in it."""
        offset = 0
        while True:
            if name in self.alias:
                name = self.alias[name]
            elif name in self.slots:
                name, delta = self.slots[name]
                offset += delta
            else:
                return name, offset

    def contents(self) -> dict[str, list[str]]:
        """Concat output -> the tensors placed directly in it."""
        found: dict[str, list[str]] = {}
        for name, (owner, _) in self.slots.items():
            found.setdefault(owner, []).append(name)
        return found


def choose_concat_places(graph: Graph, alias: Mapping[str, str], enabled: bool = True) -> InPlace:
    """Place every Concat input that can live inside its output (see the module docstring)."""
    result = InPlace(alias, {}, {})
    if not enabled:
        return result
    io = set(graph.inputs) | set(graph.outputs)
    group_io: dict[str, bool] = {}
    for name in dict.fromkeys((*alias, *alias.values(), *io)):
        root = alias_root(name, alias)
        group_io[root] = group_io.get(root, False) or name in io
    for node in graph.nodes:
        if node.op_type != "Concat" or len(node.outputs) != 1:
            continue
        y = graph.values[node.outputs[0]]
        axis = int(node.attrs.get("axis", 0))
        axis = axis + len(y.shape) if axis < 0 else axis
        if not 0 <= axis < len(y.shape) or math.prod(y.shape[:axis]) != 1:
            continue
        inner = math.prod(y.shape[axis + 1 :]) * y.dtype.itemsize
        y_root = result.root(y.name)[0]
        offset, placed = 0, set()
        for name in node.inputs:
            if not name:
                continue
            x = graph.values[name]
            if len(x.shape) != len(y.shape):
                continue
            root = alias_root(name, alias)
            compatible = x.dtype == y.dtype and math.prod(x.shape) > 0 and name not in graph.constants
            if compatible and _free(root, graph, result, group_io, y_root):
                result.slots[root] = (y.name, offset * inner)  # a reshape alias shares offset 0
                placed.add((name, offset))
            offset += x.shape[axis]
        if placed:
            result.placed[node.name] = frozenset(placed)
    return result


def alias_root(name: str, alias: Mapping[str, str]) -> str:
    """The tensor whose buffer name shares through a chain of reshape aliases (name itself if none)."""
    while name in alias:
        name = alias[name]
    return name


def _free(root: str, graph: Graph, result: InPlace, group_io: Mapping[str, bool], y_root: str) -> bool:
    """Whether a reshape group may move into a concat: not a constant, no model input or output,
    not placed in a concat already, not the output's own group."""
    if root in graph.constants or group_io.get(root, False) or root == y_root:
        return False
    return root not in result.slots
