"""atc --precision_mode: which float type each node computes in, with Casts where types meet.

    force_fp16 (atc's default for inference)  every float op in fp16
    allow_fp32_to_fp16                         matrix ops (Conv, Gemm, MatMul) in fp16, vector ops
                                               in the model's own type
    force_fp32                                 every float op in fp32 (our cube kernels have no
                                               fp16-in / fp32-out variant, so matrix ops take GE's
                                               second choice, fp32 in and out)
    must_keep_origin_dtype                     the model's types unchanged

Model inputs keep their type (a Cast after them, as atc inserts without --input_fp16_nodes);
outputs have the type of the op that writes them unless --output_type names one (a Cast at the end).
Weights are converted at compile time, so a Cast never runs on a constant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from cannrt.graph.errors import GraphError
from cannrt.graph.ir import Graph, constant_value, unique_name
from cannrt.graph.lowering import Node, Value
from cannrt.graph.onnx_proto import onnx_elem_type

MODES = ("force_fp16", "allow_fp32_to_fp16", "force_fp32", "must_keep_origin_dtype")
DEFAULT_MODE = "force_fp16"
MATRIX_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
FP16, FP32 = np.dtype(np.float16), np.dtype(np.float32)
FLOATS = (FP16, FP32)
# inputs read at compile time as numbers: they keep the model's type
COMPILE_TIME_INPUTS: Mapping[str, frozenset[int]] = {
    "Resize": frozenset({1, 2}),
    "Upsample": frozenset({1}),
    "Clip": frozenset({1, 2}),
    "Pad": frozenset({2}),
}
OUTPUT_TYPES: dict[str, np.dtype] = {"FP32": FP32, "FP16": FP16, "UINT8": np.dtype(np.uint8), "INT8": np.dtype(np.int8)}


def _target(node: Node, mode: str, origin: np.dtype | None) -> np.dtype | None:
    if origin is None or node.op_type == "Cast":
        return None
    if mode == "force_fp16":
        return FP16
    if mode == "force_fp32":
        return FP32
    if mode == "allow_fp32_to_fp16" and node.op_type in MATRIX_OPS:
        return FP16
    return origin


def _origin(node: Node, values: Mapping[str, Value]) -> np.dtype | None:
    """The float type a node computes in, as the model gives it (its first float output's)."""
    for name in node.outputs:
        if name and values[name].dtype in FLOATS:
            return values[name].dtype
    return None


def apply_precision(graph: Graph, mode: str) -> int:
    """Retype the graph's float computation for `mode`; the number of Casts inserted."""
    if mode not in MODES:
        raise GraphError(f"--precision_mode {mode!r}: expected one of {', '.join(MODES)}")
    if mode == "must_keep_origin_dtype":
        return 0
    origins = [_origin(node, graph.values) for node in graph.nodes]
    casts: dict[tuple[str, np.dtype], str] = {}
    nodes: list[Node] = []
    inserted = 0
    for node, origin in zip(graph.nodes, origins, strict=True):
        target = _target(node, mode, origin)
        if target is None:
            nodes.append(node)
            continue
        keep = COMPILE_TIME_INPUTS.get(node.op_type, frozenset())
        inputs = list(node.inputs)
        for k, name in enumerate(inputs):
            if not name or k in keep or graph.values[name].dtype not in FLOATS or graph.values[name].dtype == target:
                continue
            key = (name, target)
            if key not in casts:
                cast, added = _cast(graph, name, target)
                casts[key] = cast
                if added is not None:
                    nodes.append(added)
                    inserted += 1
            inputs[k] = casts[key]
        for name in node.outputs:
            if name and graph.values[name].dtype in FLOATS:
                graph.values[name] = Value(name, graph.values[name].shape, target)
        nodes.append(replace(node, inputs=tuple(inputs)))
    graph.nodes = nodes
    graph.prune()
    return inserted


def _cast(graph: Graph, name: str, dtype: np.dtype) -> tuple[str, Node | None]:
    """A name holding `name` as dtype: a converted constant, or the output of a new Cast node."""
    suffix = "fp16" if dtype == FP16 else "fp32"
    taken = set(graph.values)
    if name in graph.constants:
        new = unique_name(f"{name}::{suffix}", taken)
        graph.constants[new] = graph.constants[name].astype(dtype)
        graph.values[new] = constant_value(new, graph.constants[new])
        return new, None
    new = unique_name(f"{name}::cast_{suffix}", taken)
    graph.values[new] = Value(new, graph.values[name].shape, dtype)
    cast_name = unique_name(f"Cast_{name}_{suffix}", {n.name for n in graph.nodes})
    node = Node(cast_name, "Cast", (name,), (new,), {"to": onnx_elem_type(dtype)}, opset=graph.opset)
    return new, node


def parse_output_type(text: str | None, graph: Graph) -> dict[str, np.dtype]:
    """--output_type FP32 (every output) or "node:index:FP16;..." -> output name -> dtype."""
    if not text:
        return {}
    text = text.strip()
    if text.upper() in OUTPUT_TYPES:
        return dict.fromkeys(graph.outputs, OUTPUT_TYPES[text.upper()])
    producers = graph.producers()
    by_node = {graph.nodes[i].name: graph.nodes[i] for i in set(producers.values())}
    result = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        pieces = part.split(":")
        if len(pieces) != 3 or pieces[2].upper() not in OUTPUT_TYPES or not pieces[1].isdigit():
            raise GraphError(f"--output_type {part!r}: expected FP32, FP16, UINT8, INT8 or node:index:type")
        node = by_node.get(pieces[0])
        if node is None or int(pieces[1]) >= len(node.outputs) or node.outputs[int(pieces[1])] not in graph.outputs:
            raise GraphError(f"--output_type {part!r}: {pieces[0]}:{pieces[1]} is not an output of the model")
        result[node.outputs[int(pieces[1])]] = OUTPUT_TYPES[pieces[2].upper()]
    return result


def apply_output_types(graph: Graph, types: Mapping[str, np.dtype]) -> int:
    """A Cast before every output whose type differs from the one asked for; the number added."""
    added = 0
    for name, dtype in types.items():
        value = graph.values[name]
        if value.dtype == dtype:
            continue
        producers = graph.producers()
        if name not in producers:
            continue  # an output that is a model input or a constant keeps its type
        inner = unique_name(f"{name}::before_cast", set(graph.values))
        graph.values[inner] = Value(inner, value.shape, value.dtype)
        index = producers[name]
        node = graph.nodes[index]
        graph.rename(name, inner)
        graph.nodes[index] = replace(node, outputs=tuple(inner if o == name else o for o in node.outputs))
        cast_name = unique_name(f"Cast_{name}_output", {n.name for n in graph.nodes})
        graph.nodes.append(Node(cast_name, "Cast", (inner,), (name,), {"to": onnx_elem_type(dtype)}, opset=graph.opset))
        graph.values[name] = Value(name, value.shape, dtype)
        graph.outputs = [name if o == inner else o for o in graph.outputs]
        added += 1
    return added
