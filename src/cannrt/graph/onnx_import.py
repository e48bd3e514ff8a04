"""ONNX import (atc --framework=5): parse, check, infer shapes, fold constants, build the Graph.

Shape inference and folding alternate until nothing folds: folding a Shape -> Gather -> Concat chain
makes a Reshape's target constant, and the next inference pass then knows the shapes behind it.
Inference runs on a copy of the graph whose large constants are declared as typed inputs (only the
small ones, which shape arithmetic reads, carry data), so it stays cheap on models with large weights.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from onnx import helper, numpy_helper

from cannrt.graph.errors import ModelFileError, ShapeError, UnsupportedOpError
from cannrt.graph.folding import evaluate
from cannrt.graph.ir import Graph, constant_value, unique_name
from cannrt.graph.lowering import Node, Value
from cannrt.graph.onnx_proto import decode_attrs, np_dtype, onnx_elem_type, opset_of, static_shape, type_of

SMALL_CONSTANT_BYTES = 4096
"""Constants up to this size carry their data into shape inference (shape arithmetic reads them)."""
MAX_FOLD_ROUNDS = 8

Dims = tuple[int | str | None, ...] | None


def load_model(source: str | os.PathLike[str] | bytes | onnx.ModelProto) -> onnx.ModelProto:
    """The ModelProto of a path, bytes or proto; ModelFileError for a missing, foreign or invalid file."""
    data: bytes | onnx.ModelProto
    if isinstance(source, onnx.ModelProto):
        model = data = source
        where = "the model"
    else:
        where = str(source) if not isinstance(source, bytes) else "the model bytes"
        try:
            data = source if isinstance(source, bytes) else Path(source).read_bytes()
        except OSError as exc:
            raise ModelFileError(f"{where}: cannot read the model ({exc.strerror or exc})") from None
        try:
            model = onnx.load_model_from_string(data)
        except (DecodeError, ValueError, RuntimeError) as exc:
            raise ModelFileError(f"{where}: not an ONNX model ({type(exc).__name__}: {exc})") from None
    if not model.graph.node and not model.graph.output:
        raise ModelFileError(f"{where}: not an ONNX model (no graph)")
    try:
        onnx.checker.check_model(data)  # bytes go to the checker as they are (a proto is serialised)
    except (onnx.checker.ValidationError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelFileError(f"{where}: not a valid ONNX model: {first}") from None
    return model


def import_model(
    model: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    out_nodes: Sequence[tuple[str, int]] | None = None,
) -> Graph:
    """The folded, shape-inferred Graph of an ONNX model with the given input shapes."""
    graph = model.graph
    opset = opset_of(model)
    constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    types: dict[str, tuple[int, Dims]] = {info.name: type_of(info) for info in graph.input}
    inputs = [info.name for info in graph.input if info.name not in constants]
    _apply_input_shapes(inputs, types, dict(input_shapes or {}))
    nodes = _named(graph.node)
    live = list(nodes)
    shapes: dict[str, tuple[int, Dims]] = {}
    for _ in range(MAX_FOLD_ROUNDS):
        shapes = _infer(model, live, inputs, types, constants)
        live, folded = _fold(live, constants, shapes, opset)
        if not folded:
            break
    outputs = [info.name for info in graph.output]
    if out_nodes:
        outputs = _select_outputs(out_nodes, nodes)
    for name, proto in live:
        if proto.domain not in ("", "ai.onnx"):
            raise UnsupportedOpError(name, f"{proto.domain}.{proto.op_type}", "no kernel implements this domain")
    used = set(outputs) | {name for _, proto in live for name in proto.input}
    ir_nodes = [
        Node(name, proto.op_type, tuple(proto.input), _outputs(proto, used, shapes), decode_attrs(proto), opset)
        for name, proto in live
    ]
    values = _values(ir_nodes, inputs, types, shapes, constants)
    result = Graph(graph.name or "model", ir_nodes, values, constants, inputs, outputs, opset)
    result.prune()
    for name in result.outputs:
        if name not in result.values:
            raise ShapeError(f"output {name!r}: no node writes it and it is not a constant")
    return result


def _named(nodes: Sequence[onnx.NodeProto]) -> list[tuple[str, onnx.NodeProto]]:
    """Each node with a unique name: its own, or op type + index as atc names unnamed ONNX nodes."""
    taken: set[str] = set()
    named = []
    for i, node in enumerate(nodes):
        name = unique_name(node.name or f"{node.op_type}_{i}", taken)
        taken.add(name)
        named.append((name, node))
    return named


def _apply_input_shapes(inputs: list[str], types: dict[str, tuple[int, Dims]], given: dict[str, Sequence[int]]) -> None:
    for name, shape in given.items():
        if name not in inputs:
            raise ShapeError(f"--input_shape names {name!r}, which is not an input of the model (inputs: {inputs})")
        if any(int(d) < 0 for d in shape):
            raise ShapeError(f"--input_shape {name}: dims {list(shape)} must be known (>= 0) here")
        elem, dims = types[name]
        if dims is not None and len(dims) != len(shape):
            raise ShapeError(f"--input_shape {name}: {len(shape)} dims given, the model's input has {len(dims)}")
        types[name] = (elem, tuple(int(d) for d in shape))
    for name in inputs:
        elem, dims = types[name]
        if static_shape(dims) is None:
            shown = "unranked" if dims is None else ",".join("?" if not isinstance(d, int) else str(d) for d in dims)
            raise ShapeError(f"input {name!r} has dynamic dims ({shown}): give them with --input_shape")


def _infer(
    model: onnx.ModelProto,
    nodes: Sequence[tuple[str, onnx.NodeProto]],
    inputs: Sequence[str],
    types: Mapping[str, tuple[int, Dims]],
    constants: Mapping[str, np.ndarray],
) -> dict[str, tuple[int, Dims]]:
    """Element types and dims of every value, from onnx shape inference with data propagation."""
    used = {name for _, node in nodes for name in node.input} | {o.name for o in model.graph.output}
    small, typed = [], []
    for name, array in constants.items():
        if name not in used:
            continue
        if array.nbytes <= SMALL_CONSTANT_BYTES:
            small.append(numpy_helper.from_array(array, name))
        else:
            typed.append(helper.make_tensor_value_info(name, onnx_elem_type(array.dtype), array.shape))
    graph_inputs = [helper.make_tensor_value_info(name, types[name][0], types[name][1]) for name in inputs]
    outputs = [helper.make_tensor_value_info(o.name, type_of(o)[0], None) for o in model.graph.output]
    graph = helper.make_graph([node for _, node in nodes], "infer", graph_inputs + typed, outputs, small)
    probe = helper.make_model(graph, opset_imports=model.opset_import, ir_version=max(model.ir_version, 4))
    try:
        inferred = onnx.shape_inference.infer_shapes(probe, check_type=True, strict_mode=True, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        raise ShapeError(f"shape inference failed: {str(exc).strip().splitlines()[-1]}") from None
    g = inferred.graph
    result = {info.name: type_of(info) for info in (*g.value_info, *g.output, *g.input)}
    for name in inputs:
        result[name] = types[name]
    return result


def _fold(
    nodes: list[tuple[str, onnx.NodeProto]],
    constants: dict[str, np.ndarray],
    shapes: Mapping[str, tuple[int, Dims]],
    opset: int,
) -> tuple[list[tuple[str, onnx.NodeProto]], int]:
    """Evaluate every node whose inputs are constant (and Shape / Size of a known shape)."""
    kept, folded = [], 0
    for name, node in nodes:
        outputs = None
        if all(not i or i in constants for i in node.input):
            values = [constants[i] if i else None for i in node.input]
            outputs = evaluate(node, decode_attrs(node), values, opset)
        elif node.op_type in ("Shape", "Size") and node.input[0] in shapes:
            dims = static_shape(shapes[node.input[0]][1])
            if dims is not None:
                placeholder = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), dims, [0] * len(dims))
                outputs = evaluate(node, decode_attrs(node), [placeholder], opset)
        if outputs is None or len(outputs) < len([o for o in node.output if o]):
            kept.append((name, node))
            continue
        for out, value in zip(node.output, outputs, strict=False):
            if out:
                constants[out] = value
        folded += 1
    return kept, folded


def _outputs(node: onnx.NodeProto, used: set[str], shapes: Mapping[str, tuple[int, Dims]]) -> tuple[str, ...]:
    """A node's outputs, those nothing reads and inference gave no shape (Dropout's mask) left absent."""
    return tuple(o if o in used or static_shape(shapes.get(o, (0, None))[1]) is not None else "" for o in node.output)


def _select_outputs(out_nodes: Sequence[tuple[str, int]], nodes: Sequence[tuple[str, onnx.NodeProto]]) -> list[str]:
    by_name = dict(nodes)
    outputs = []
    for node_name, index in out_nodes:
        if node_name not in by_name:
            raise ShapeError(f"--out_nodes names node {node_name!r}, which the model does not have")
        node = by_name[node_name]
        if not 0 <= index < len(node.output):
            raise ShapeError(f"--out_nodes {node_name}:{index}: the node has {len(node.output)} outputs")
        outputs.append(node.output[index])
    return outputs


def _values(
    nodes: Sequence[Node],
    inputs: Sequence[str],
    types: Mapping[str, tuple[int, Dims]],
    shapes: Mapping[str, tuple[int, Dims]],
    constants: Mapping[str, np.ndarray],
) -> dict[str, Value]:
    values = {name: constant_value(name, array) for name, array in constants.items()}
    for name in inputs:
        elem, dims = types[name]
        values[name] = Value(name, static_shape(dims) or (), np_dtype(elem))
    for node in nodes:
        for k, out in enumerate(node.outputs):
            if not out:
                continue
            elem, dims = shapes.get(out, (0, None))
            shape = static_shape(dims)
            if shape is None or not elem:
                raise ShapeError(
                    f"cannot infer the shape of {out!r}, output {k} of node {node.name!r} ({node.op_type})"
                )
            values[out] = Value(out, shape, np_dtype(elem))
    return values
