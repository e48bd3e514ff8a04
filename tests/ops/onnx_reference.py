"""Single-node ONNX models for the op tests: built with onnx.helper, run by onnxruntime (the
reference) and by cannrt through lower() + the kernels on the simulated device."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import onnxruntime
from device_runner import run_nodes
from onnx import helper

from cannrt.graph.lowering import Node, Value


def reference(
    op_type: str, inputs: Mapping[str, np.ndarray], outputs: int = 1, opset: int = 17, **attrs: Any
) -> list[np.ndarray]:
    """onnxruntime's CPU result of one node."""
    names = [f"y{i}" for i in range(outputs)]
    graph = helper.make_graph(
        [helper.make_node(op_type, list(inputs), names, **attrs)],
        "single",
        [
            helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for k, v in inputs.items()
        ],
        [onnx.ValueInfoProto(name=n) for n in names],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [np.asarray(r) for r in session.run(None, dict(inputs))]


def on_device(
    op_type: str,
    inputs: Mapping[str, np.ndarray],
    expected: list[np.ndarray],
    constants: tuple[str, ...] = (),
    opset: int = 17,
    **attrs: Any,
) -> list[np.ndarray]:
    """cannrt's result of the same node; output shapes and dtypes from the reference's."""
    names = tuple(f"y{i}" for i in range(len(expected)))
    values = {k: Value(k, v.shape, v.dtype) for k, v in inputs.items()}
    values.update({n: Value(n, e.shape, e.dtype) for n, e in zip(names, expected, strict=True)})
    node = Node("node", op_type, tuple(inputs), names, attrs, opset)
    folded = {k: inputs[k] for k in constants}
    result = run_nodes([node], values, inputs, names, folded)
    return [result[n] for n in names]
