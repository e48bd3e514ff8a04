"""Constant folding: a node whose inputs are all known is evaluated at compile time (GE's ConstantFolding).

The shape subgraphs of exported models (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) and
ConstantOfShape fills are evaluated here in numpy; any other op with constant inputs goes through
onnx's reference evaluator. A node that cannot be evaluated is left for the kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx

from cannrt.graph.onnx_proto import np_dtype
from cannrt.kernels.casting import cast_array, round_mode_code

FOLD_LIMIT_BYTES = 1 << 31
"""A folded output above this many bytes is left to the kernels (it would only cost host memory)."""

Inputs = Sequence[np.ndarray | None]
Attrs = dict[str, Any]


def _axes(attrs: Attrs, inputs: Inputs, index: int) -> list[int] | None:
    """An axes list given as an attribute (older opsets) or as input `index` (newer ones)."""
    if len(inputs) > index and inputs[index] is not None:
        return [int(a) for a in np.asarray(inputs[index]).reshape(-1)]
    if "axes" in attrs:
        return [int(a) for a in attrs["axes"]]
    return None


def _unsqueeze(attrs: Attrs, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    axes = _axes(attrs, inputs, 1) or []
    rank = x.ndim + len(axes)
    shape = list(x.shape)
    for axis in sorted(a % rank for a in axes):
        shape.insert(axis, 1)
    return [x.reshape(shape)]


def _squeeze(attrs: Attrs, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    axes = _axes(attrs, inputs, 1)
    if axes is None:
        return [np.squeeze(x)]
    return [np.squeeze(x, axis=tuple(a % x.ndim for a in axes))]


def _reshape(attrs: Attrs, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    shape = [int(d) for d in np.asarray(inputs[1]).reshape(-1)]
    if not attrs.get("allowzero", 0):
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return [x.reshape(shape)]


def _flatten(attrs: Attrs, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    axis = int(attrs.get("axis", 1)) % (x.ndim + 1) if x.ndim else 0
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    return [x.reshape(outer, -1) if x.size else x.reshape(outer, int(np.prod(x.shape[axis:])))]


def _slice(attrs: Attrs, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    if len(inputs) > 1:
        starts, ends = (np.asarray(v).reshape(-1).tolist() for v in inputs[1:3])
        axes = _axes({}, inputs, 3) or list(range(len(starts)))
        steps = np.asarray(inputs[4]).reshape(-1).tolist() if len(inputs) > 4 and inputs[4] is not None else None
    else:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes = list(attrs.get("axes", range(len(starts))))
        steps = None
    index = [slice(None)] * x.ndim
    for i, axis in enumerate(axes):
        step = int(steps[i]) if steps else 1
        index[int(axis) % x.ndim] = slice(int(starts[i]), int(ends[i]), step)
    return [x[tuple(index)]]


def _constant(attrs: Attrs, inputs: Inputs) -> list[np.ndarray]:
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64)):
        if key in attrs:
            return [np.array(attrs[key], dtype=dtype)]
    if "value_ints" in attrs:
        return [np.array(attrs["value_ints"], dtype=np.int64)]
    if "value" in attrs:
        return [np.asarray(attrs["value"])]
    raise ValueError("Constant without a value this compiler reads")


def _constant_of_shape(attrs: Attrs, inputs: Inputs) -> list[np.ndarray]:
    shape = [int(d) for d in np.asarray(inputs[0]).reshape(-1)]
    fill = np.asarray(attrs.get("value", np.zeros(1, np.float32))).reshape(-1)
    return [np.full(shape, fill[0], dtype=fill.dtype)]


def _shape(attrs: Attrs, inputs: Inputs) -> list[np.ndarray]:
    shape = np.asarray(np.asarray(inputs[0]).shape, dtype=np.int64)
    return [shape[attrs.get("start", 0) : attrs.get("end", None)]]


def _cast(attrs: Attrs, inputs: Inputs) -> list[np.ndarray]:
    mode = round_mode_code(attrs.get("round_mode", "up"))  # an unknown mode: not folded, the lowering refuses it
    return [cast_array(np.asarray(inputs[0]), np_dtype(int(attrs["to"])), int(attrs.get("saturate", 1)), mode)]


def _div(attrs: Attrs, inputs: Inputs) -> list[np.ndarray]:
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return [np.trunc(a / b).astype(np.result_type(a, b))]  # ONNX integer Div truncates
    return [(a / b).astype(np.result_type(a, b))]


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[Attrs, Inputs], list[np.ndarray]]:
    def run(attrs: Attrs, inputs: Inputs) -> list[np.ndarray]:
        a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
        out = fn(a, b)
        return [out if out.dtype == bool else out.astype(np.result_type(a, b))]

    return run


def _gather(attrs: Attrs, inputs: Inputs) -> list[np.ndarray]:
    x, idx = np.asarray(inputs[0]), np.asarray(inputs[1])
    axis = int(attrs.get("axis", 0))
    return [np.take(x, np.where(idx < 0, idx + x.shape[axis], idx), axis=axis)]


NUMPY_FOLDS: dict[str, Callable[[Attrs, Inputs], list[np.ndarray]]] = {
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
    "Shape": _shape,
    "Size": lambda a, i: [np.array(np.asarray(i[0]).size, dtype=np.int64)],
    "Gather": _gather,
    "Concat": lambda a, i: [np.concatenate([np.asarray(x) for x in i if x is not None], axis=int(a["axis"]))],
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Slice": _slice,
    "Cast": _cast,
    "Identity": lambda a, i: [np.asarray(i[0])],
    "Transpose": lambda a, i: [np.transpose(np.asarray(i[0]), a.get("perm"))],
    "Add": _binary(np.add),
    "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply),
    "Div": _div,
    "Equal": _binary(np.equal),
    "Less": _binary(np.less),
    "Greater": _binary(np.greater),
    "Min": _binary(np.minimum),
    "Max": _binary(np.maximum),
    "Neg": lambda a, i: [np.negative(np.asarray(i[0]))],
    "Sqrt": lambda a, i: [np.sqrt(np.asarray(i[0]))],
    "Range": lambda a, i: [np.arange(*(np.asarray(x).item() for x in i)).astype(np.asarray(i[0]).dtype)],
    "Where": lambda a, i: [np.where(*(np.asarray(x) for x in i))],
}

NEVER_FOLD = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial"})


def evaluate(node: onnx.NodeProto, attrs: Attrs, inputs: Inputs, opset: int) -> list[np.ndarray] | None:
    """The outputs of a node whose inputs are all constant (absent optional inputs None), or None
    when it cannot be evaluated (unknown op, an error, a random op, or outputs too large to keep)."""
    op = node.op_type
    if op in NEVER_FOLD or node.domain not in ("", "ai.onnx"):
        return None
    outputs: list[np.ndarray] | None
    try:
        if op in NUMPY_FOLDS:
            outputs = NUMPY_FOLDS[op](attrs, inputs)
        elif op == "Dropout":
            data = np.asarray(inputs[0])
            outputs = [data, np.ones(data.shape, dtype=np.bool_)][: len(node.output)]
        else:
            outputs = _reference(node, inputs, opset)
    except Exception:
        return None
    if outputs is None or sum(np.asarray(o).nbytes for o in outputs) > FOLD_LIMIT_BYTES:
        return None
    return [np.asarray(o) for o in outputs]


def _reference(node: onnx.NodeProto, inputs: Inputs, opset: int) -> list[np.ndarray] | None:
    from onnx.reference import ReferenceEvaluator

    names = [name for name in node.input]
    feeds = {name: value for name, value in zip(names, inputs, strict=False) if name and value is not None}
    evaluator = ReferenceEvaluator(node, opsets={"": opset})
    return [np.asarray(o) for o in evaluator.run(None, feeds)]
