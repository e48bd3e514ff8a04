"""Graph passes a GE user recognises: Identity/Dropout removed, BatchNormalization (and per-channel
Mul/Add by constants) folded into the Conv before it, activations fused into the producing Conv/Gemm/MatMul.

Each pass rewrites the Graph in place and returns how many nodes it rewrote; the rewritten graph
computes the same function (tests run both through onnxruntime).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from cannrt.graph.ir import Graph, constant_value, unique_name
from cannrt.graph.lowering import Node, fusable_activations

PASSTHROUGH = frozenset({"Identity", "Dropout"})


def remove_identities(graph: Graph) -> int:
    """Identity and inference Dropout: readers of the output read the input instead (GE's
    IdentityRemovePass / DropOutPass). Kept (lowered as a copy) only where an output would
    otherwise be a graph input or another output."""
    removed = 0
    for name in [n.name for n in graph.nodes if n.op_type in PASSTHROUGH]:
        node = next(n for n in graph.nodes if n.name == name)  # renames replace the node objects
        if not node.inputs or not _is_passthrough(graph, node):
            continue
        source, target = node.inputs[0], node.outputs[0]
        if target not in graph.outputs:
            graph.remove(node)
            graph.rename(target, source)
        elif (producer := graph.producer_of(source)) is not None and source not in graph.outputs:
            # the producer writes the graph output directly; its other readers follow the new name
            graph.remove(node)
            graph.rename(source, target)
            outputs = tuple(target if o == source else o for o in producer.outputs)
            graph.nodes[graph.index(producer)] = replace(producer, outputs=outputs)
        else:
            continue
        removed += 1
    graph.prune()
    return removed


def _is_passthrough(graph: Graph, node: Node) -> bool:
    if node.op_type == "Identity":
        return True
    mask = node.outputs[1] if len(node.outputs) > 1 else ""
    mask_used = bool(mask) and (bool(graph.readers_of(mask)) or mask in graph.outputs)
    training = len(node.inputs) > 2 and node.inputs[2]
    if training:
        flag = graph.constants.get(node.inputs[2])
        if flag is None or bool(np.asarray(flag).reshape(-1)[0]):
            return False
    return not mask_used


def _single_reader(graph: Graph, name: str) -> Node | None:
    """The one node reading name, if exactly one does and name is not a graph output."""
    readers = graph.readers_of(name)
    if len(readers) != 1 or name in graph.outputs:
        return None
    return readers[0]


def _conv_params(graph: Graph, conv: Node) -> tuple[np.ndarray, np.ndarray] | None:
    """(weight, bias) of a Conv with constant ones (bias zeros when absent)."""
    if conv.op_type != "Conv" or len(conv.inputs) < 2 or conv.inputs[1] not in graph.constants:
        return None
    if "activation" in conv.attrs:
        return None
    weight = graph.constants[conv.inputs[1]]
    if len(conv.inputs) > 2 and conv.inputs[2]:
        if conv.inputs[2] not in graph.constants:
            return None
        bias = graph.constants[conv.inputs[2]]
    else:
        bias = np.zeros(weight.shape[0], weight.dtype)
    return weight, bias


def _set_conv(graph: Graph, conv: Node, weight: np.ndarray, bias: np.ndarray, output: str, why: str) -> None:
    """Replace conv by one with these weights writing `output`."""
    taken = set(graph.values)
    w_name = unique_name(f"{conv.inputs[1]}::{why}", taken)
    b_name = unique_name(f"{conv.name}::bias::{why}", taken | {w_name})
    for name, array in ((w_name, weight), (b_name, bias)):
        graph.constants[name] = array
        graph.values[name] = constant_value(name, array)
    index = graph.index(conv)
    graph.nodes[index] = replace(conv, inputs=(conv.inputs[0], w_name, b_name), outputs=(output,))


def fold_batchnorm(graph: Graph) -> int:
    """Conv -> BatchNormalization with constant parameters becomes one Conv (GE's BN fusion):
    W' = W * s, b' = (b - mean) * s + beta with s = scale / sqrt(var + epsilon)."""
    folded = 0
    for bn in list(graph.nodes):
        if bn.op_type != "BatchNormalization" or any(o for o in bn.outputs[1:]):
            continue
        conv = _producer(graph, bn.inputs[0])
        params = [graph.constants.get(name) for name in bn.inputs[1:5]]
        if conv is None or _single_reader(graph, bn.inputs[0]) is not bn or any(p is None for p in params):
            continue
        conv_params = _conv_params(graph, conv)
        if conv_params is None or bn.attrs.get("spatial", 1) != 1 or bn.attrs.get("training_mode", 0):
            continue
        weight, bias = conv_params
        gamma, beta, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in params)
        if not all(p.size == weight.shape[0] for p in (gamma, beta, mean, var)):
            continue
        scale = gamma / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
        new_w = (weight.astype(np.float64) * scale.reshape(-1, *[1] * (weight.ndim - 1))).astype(weight.dtype)
        new_b = ((bias.astype(np.float64) - mean) * scale + beta).astype(weight.dtype)
        graph.remove(bn)
        _set_conv(graph, conv, new_w, new_b, bn.outputs[0], "bn")
        folded += 1
    graph.prune()
    return folded


def _channel_constant(graph: Graph, node: Node, rank: int, channels: int) -> tuple[str, np.ndarray] | None:
    """(other input, per-channel vector) when node multiplies/adds a constant varying only along axis 1."""
    if node.op_type not in ("Mul", "Add") or len(node.inputs) != 2:
        return None
    for k in (0, 1):
        const, other = node.inputs[k], node.inputs[1 - k]
        if const not in graph.constants or other in graph.constants:
            continue
        array = np.asarray(graph.constants[const])
        if array.ndim > rank:
            return None
        shape = (1,) * (rank - array.ndim) + array.shape
        if rank < 2 or any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, channels):
            return None
        if graph.values[node.outputs[0]].shape != graph.values[other].shape:
            return None
        return other, np.broadcast_to(array.reshape(-1).astype(np.float64), (channels,))
    return None


def fold_channel_affine(graph: Graph) -> int:
    """Mul / Add by a per-channel constant after a Conv (into W and b) or a BatchNormalization
    (into scale and bias): densenet's BN -> Mul -> Add becomes one BN, or nothing after a Conv."""
    folded = 0
    changed = True
    while changed:
        changed = False
        for node in list(graph.nodes):
            if node.op_type not in ("Mul", "Add") or node.outputs[0] not in graph.values:
                continue
            out = graph.values[node.outputs[0]]
            if len(out.shape) < 2 or out.dtype.kind != "f":
                continue
            found = _channel_constant(graph, node, len(out.shape), out.shape[1])
            if found is None:
                continue
            source, vector = found
            producer = _producer(graph, source)
            if producer is None or _single_reader(graph, source) is not node:
                continue
            if _fold_into(graph, producer, node, vector):
                folded += 1
                changed = True
    graph.prune()
    return folded


def _fold_into(graph: Graph, producer: Node, node: Node, vector: np.ndarray) -> bool:
    mul = node.op_type == "Mul"
    if producer.op_type == "Conv":
        params = _conv_params(graph, producer)
        if params is None:
            return False
        weight, bias = params
        w = weight.astype(np.float64)
        if mul:
            w = w * vector.reshape(-1, *[1] * (weight.ndim - 1))
        b = bias.astype(np.float64) * vector if mul else bias.astype(np.float64) + vector
        graph.remove(node)
        _set_conv(
            graph, producer, w.astype(weight.dtype), b.astype(weight.dtype), node.outputs[0], node.op_type.lower()
        )
        return True
    if (
        producer.op_type == "BatchNormalization"
        and not any(producer.outputs[1:])
        and "activation" not in producer.attrs
    ):
        names = producer.inputs[1:3]
        if any(name not in graph.constants for name in names) or producer.attrs.get("spatial", 1) != 1:
            return False
        gamma, beta = (graph.constants[name] for name in names)
        g64, b64 = gamma.astype(np.float64).reshape(-1), beta.astype(np.float64).reshape(-1)
        if g64.size != vector.size:
            return False
        new_g, new_b = (g64 * vector, b64 * vector) if mul else (g64, b64 + vector)
        taken = set(graph.values)
        g_name = unique_name(f"{producer.name}::scale::{node.op_type.lower()}", taken)
        b_name = unique_name(f"{producer.name}::bias::{node.op_type.lower()}", taken | {g_name})
        for name, array in ((g_name, new_g.astype(gamma.dtype)), (b_name, new_b.astype(beta.dtype))):
            graph.constants[name] = array
            graph.values[name] = constant_value(name, array)
        inputs = (producer.inputs[0], g_name, b_name, *producer.inputs[3:])
        graph.remove(node)
        index = graph.index(producer)
        graph.nodes[index] = replace(producer, inputs=inputs, outputs=(node.outputs[0], *producer.outputs[1:]))
        return True
    return False


def fuse_activations(graph: Graph) -> int:
    """Conv / Gemm / MatMul followed by an activation its kernel applies (lowering's
    fusable_activations) become one node with attrs["activation"] = (op type, attributes)."""
    fused = 0
    for node in list(graph.nodes):
        allowed = fusable_activations(node.op_type)
        if not allowed or "activation" in node.attrs or len(node.outputs) != 1:
            continue
        act = _single_reader(graph, node.outputs[0])
        if act is None or act.op_type not in allowed or act.inputs[0] != node.outputs[0]:
            continue
        attrs = _activation_attrs(graph, act)
        if attrs is None:
            continue
        graph.remove(act)
        index = graph.index(node)
        graph.nodes[index] = replace(
            node, outputs=(act.outputs[0],), attrs={**node.attrs, "activation": (act.op_type, attrs)}
        )
        fused += 1
    graph.prune()
    return fused


def _activation_attrs(graph: Graph, act: Node) -> dict[str, Any] | None:
    """The activation's attributes, Clip's opset-11 min / max inputs folded in (None if not constant)."""
    attrs = dict(act.attrs)
    if act.op_type == "Clip":
        for k, key in ((1, "min"), (2, "max")):
            if len(act.inputs) > k and act.inputs[k]:
                if act.inputs[k] not in graph.constants:
                    return None
                attrs[key] = float(np.asarray(graph.constants[act.inputs[k]]).reshape(-1)[0])
    elif len(act.inputs) > 1:
        return None
    return attrs


def _producer(graph: Graph, name: str) -> Node | None:
    return graph.producer_of(name)


def run_passes(graph: Graph) -> dict[str, int]:
    """The passes in GE's order; the number of rewrites of each (the model's JSON lists them)."""
    return {
        "identities_removed": remove_identities(graph),
        "batchnorms_folded": fold_batchnorm(graph),
        "channel_affines_folded": fold_channel_affine(graph),
        "activations_fused": fuse_activations(graph),
    }
