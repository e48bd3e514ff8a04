"""Constant folding at import: shape subgraphs and ConstantOfShape become constants; numerics kept."""

from __future__ import annotations

import graph_models as gm
import light_models as lm
import numpy as np
import onnx
import pytest
from om_interpreter import run
from onnx import helper

from cannrt.graph import CompileOptions, compile_model
from cannrt.graph.folding import evaluate
from cannrt.graph.onnx_import import import_model


def test_shape_gather_concat_reshape_and_constant_of_shape_fold_away():
    graph = import_model(gm.shape_subgraph())
    assert [n.op_type for n in graph.nodes] == ["Reshape", "Relu", "Add"]
    reshape = graph.nodes[0]
    assert graph.constants[reshape.inputs[1]].tolist() == [2, -1]
    fill = graph.nodes[2].inputs[1]
    assert graph.constants[fill].shape == (2, 60) and np.all(graph.constants[fill] == 0.5)
    assert graph.values["y"].shape == (2, 60)


def test_folded_model_computes_what_onnxruntime_computes():
    model = gm.shape_subgraph()
    x = gm.RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    compiled = compile_model(model, CompileOptions(precision_mode="force_fp32"))
    # the Reshape shares its input's buffer: no task for it, the Relu reads the model's input
    assert [t.op_type for t in compiled.gears[0].tasks] == ["Relu", "Add"]
    (out,) = run(compiled, [x])
    np.testing.assert_allclose(out, lm.run_onnxruntime(model, {"x": x})[0], rtol=1e-6)


def test_light_models_keep_no_constant_of_shape():
    for name in ("squeezenet", "resnet50"):
        raw = onnx.load(lm.path(name))  # the shipped model: every weight a ConstantOfShape fill
        graph = import_model(raw)
        assert not any(n.op_type in ("ConstantOfShape", "Shape", "Constant") for n in graph.nodes)
        conv = next(n for n in graph.nodes if n.op_type == "Conv")
        assert np.all(graph.constants[conv.inputs[1]] == np.float32(0.02))


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "expected"),
    [
        ("Unsqueeze", [np.arange(3)], {"axes": (0, 2)}, np.arange(3).reshape(1, 3, 1)),
        ("Squeeze", [np.zeros((1, 3, 1)), np.array([-1])], {}, np.zeros((1, 3))),
        ("Reshape", [np.arange(6), np.array([0, -1])], {}, np.arange(6).reshape(6, 1)),
        ("Div", [np.array([-7, 7]), np.array([2, 2])], {}, np.array([-3, 3])),
        ("Slice", [np.arange(10), np.array([1]), np.array([8]), np.array([0]), np.array([3])], {}, np.array([1, 4, 7])),
        ("Gather", [np.array([5, 6, 7]), np.array([-1])], {"axis": 0}, np.array([7])),
        ("Range", [np.array(0), np.array(5), np.array(2)], {}, np.array([0, 2, 4])),
        ("Cast", [np.array([1.7, -1.7])], {"to": onnx.TensorProto.INT64}, np.array([1, -1])),
    ],
)
def test_numpy_folds(op, inputs, attrs, expected):
    node = helper.make_node(op, [f"i{k}" for k in range(len(inputs))], ["out"])
    result = evaluate(node, attrs, inputs, 13)
    assert result is not None
    np.testing.assert_array_equal(result[0], expected)


def test_an_op_without_a_numpy_fold_goes_through_the_reference_evaluator():
    node = helper.make_node("ReduceSum", ["a", "axes"], ["out"], keepdims=0)
    (out,) = evaluate(node, {"keepdims": 0}, [np.ones((2, 3), np.float32), np.array([1])], 13) or [None]
    np.testing.assert_array_equal(out, [3.0, 3.0])


def test_random_ops_are_never_folded():
    node = helper.make_node("RandomUniformLike", ["a"], ["out"])
    assert evaluate(node, {}, [np.ones(3, np.float32)], 13) is None
