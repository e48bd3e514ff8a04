"""Small ONNX models built in the tests (a helper module, not a test file)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(7)


def tensor(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def model(nodes, inputs, outputs, inits=(), opset: int = 13) -> onnx.ModelProto:  # type: ignore[no-untyped-def]
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def f32(name: str, shape) -> onnx.ValueInfoProto:  # type: ignore[no-untyped-def]
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def halves_concat(out: str, name: str) -> list[onnx.NodeProto]:
    """a = Relu(x) and b = Sigmoid(x), concatenated on the channels into `out` (node `name`)."""
    return [
        helper.make_node("Relu", ["x"], ["a"], name="a"),
        helper.make_node("Sigmoid", ["x"], ["b"], name="b"),
        helper.make_node("Concat", ["a", "b"], [out], name=name, axis=1),
    ]


def conv_bn_relu(channels: int = 8, activation: str = "Relu") -> onnx.ModelProto:
    """x (1,3,10,10) -> Conv (bias) -> BatchNormalization -> activation -> y."""
    w = RNG.standard_normal((channels, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(channels).astype(np.float32)
    scale, bias = RNG.uniform(0.5, 1.5, channels), RNG.standard_normal(channels)
    mean, var = RNG.standard_normal(channels), RNG.uniform(0.5, 1.5, channels)
    inits = [tensor("w", w), tensor("b", b)] + [
        tensor(n, a.astype(np.float32)) for n, a in (("s", scale), ("o", bias), ("m", mean), ("v", var))
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["n"], name="bn", epsilon=1e-3),
    ]
    if activation == "Clip":
        inits += [tensor("lo", np.array(0.0, np.float32)), tensor("hi", np.array(6.0, np.float32))]
        nodes.append(helper.make_node("Clip", ["n", "lo", "hi"], ["y"], name="act"))
    else:
        nodes.append(helper.make_node(activation, ["n"], ["y"], name="act"))
    return model(nodes, [f32("x", [1, 3, 10, 10])], [f32("y", [1, channels, 10, 10])], inits)


def shape_subgraph() -> onnx.ModelProto:
    """x (2,3,4,5): Shape -> Gather(0) -> Unsqueeze -> Concat([.., -1]) -> Reshape(x) -> Relu, plus a
    ConstantOfShape fill added to the result: every shape op folds away."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="unsqueeze"),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
        helper.make_node("Relu", ["r"], ["a"], name="relu"),
        helper.make_node(
            "ConstantOfShape",
            ["fill_shape"],
            ["fill"],
            name="fill",
            value=numpy_helper.from_array(np.array([0.5], np.float32)),
        ),
        helper.make_node("Add", ["a", "fill"], ["y"], name="add"),
    ]
    inits = [
        tensor("zero", np.array(0, np.int64)),
        tensor("axes", np.array([0], np.int64)),
        tensor("minus1", np.array([-1], np.int64)),
        tensor("fill_shape", np.array([2, 60], np.int64)),
    ]
    return model(nodes, [f32("x", [2, 3, 4, 5])], [f32("y", [2, 60])], inits)


def branches() -> onnx.ModelProto:
    """x -> Relu -> three independent branches (Sigmoid, Tanh -> Relu, Exp) -> Concat -> y."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="stem"),
        helper.make_node("Sigmoid", ["r"], ["a"], name="a"),
        helper.make_node("Tanh", ["r"], ["b0"], name="b0"),
        helper.make_node("Relu", ["b0"], ["b"], name="b1"),
        helper.make_node("Neg", ["r"], ["c"], name="c"),
        helper.make_node("Concat", ["a", "b", "c"], ["y"], name="concat", axis=1),
    ]
    return model(nodes, [f32("x", [1, 4, 8, 8])], [f32("y", [1, 12, 8, 8])])
