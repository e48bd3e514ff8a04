"""The JSON-able description of a compiled graph that the .om keeps (atc --mode=1 prints it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cannrt.graph.inplace import InPlace
from cannrt.graph.ir import Graph
from cannrt.graph.lowering import Node

if TYPE_CHECKING:
    from cannrt.graph.compiler import CompileOptions

SMALL_ARRAY = 16


def json_value(value: Any) -> Any:
    """An attribute as JSON: small arrays as lists, large ones as a shape / dtype summary."""
    if isinstance(value, np.ndarray):
        if value.size <= SMALL_ARRAY:
            return json_value(value.tolist())
        return {"tensor": list(value.shape), "dtype": str(value.dtype)}
    if isinstance(value, tuple | list):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def describe(
    graph: Graph,
    nodes: Sequence[Node],
    streams: Sequence[int],
    inplace: InPlace,
    options: CompileOptions,
) -> dict[str, Any]:
    """Inputs, outputs, every node (with its stream, or the tensor a data-free reshape aliases),
    and per Concat the inputs placed in its output (input -> byte offset)."""

    def tensor(name: str) -> dict[str, Any]:
        value = graph.values[name]
        return {"name": name, "shape": list(value.shape), "dtype": str(value.dtype)}

    stream_of = {node.name: s for node, s in zip(nodes, streams, strict=True)}
    described = []
    for node in graph.nodes:
        entry: dict[str, Any] = {
            "name": node.name,
            "op_type": node.op_type,
            "inputs": list(node.inputs),
            "outputs": list(node.outputs),
            "attrs": {k: json_value(v) for k, v in node.attrs.items()},
        }
        if node.name in stream_of:
            entry["stream"] = stream_of[node.name]
        elif node.op_type != "Concat":
            entry["alias_of"] = inplace.alias.get(node.outputs[0], "")
        if node.name in inplace.placed:
            base = inplace.root(node.outputs[0])[1]
            entry["in_place"] = {name: inplace.root(name)[1] - base for name, _ in sorted(inplace.placed[node.name])}
        described.append(entry)
    return {
        "name": graph.name,
        "opset": graph.opset,
        "precision_mode": options.precision_mode,
        "inputs": [tensor(n) for n in graph.inputs],
        "outputs": [tensor(n) for n in graph.outputs],
        "nodes": described,
        "weights": len(graph.constants),
        "passes": dict(graph.stats),
    }
