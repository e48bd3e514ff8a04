"""Bad input to the graph engine: one clear GraphError naming the file, node, tensor or option."""

from __future__ import annotations

import graph_models as gm
import light_models as lm
import numpy as np
import pytest
from onnx import helper

from cannrt.graph import CompileOptions, GraphError, ModelFileError, ShapeError, UnsupportedOpError, compile_model


def test_a_file_that_is_not_onnx(tmp_path):
    path = tmp_path / "x.onnx"
    path.write_bytes(b"\x00\xffnot a protobuf at all" * 10)
    with pytest.raises(ModelFileError, match="not an ONNX model"):
        compile_model(path)
    with pytest.raises(ModelFileError, match="cannot read"):
        compile_model(tmp_path / "missing.onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(ModelFileError, match="no graph"):
        compile_model(tmp_path / "empty.onnx")


def test_an_unsupported_op_names_the_node_and_its_type():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="ok"), helper.make_node("Det", ["r"], ["y"], name="det_7")]
    model = gm.model(nodes, [gm.f32("x", [3, 3])], [gm.f32("y", [])])
    with pytest.raises(UnsupportedOpError, match="node 'det_7': op type 'Det' is not supported") as info:
        compile_model(model)
    assert (info.value.node, info.value.op_type) == ("det_7", "Det")


def test_a_custom_domain_op_is_unsupported():
    node = helper.make_node("FusedConv", ["x"], ["y"], name="fc", domain="com.microsoft")
    graph = helper.make_graph([node], "g", [gm.f32("x", [2])], [gm.f32("y", [2])])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)]
    )
    with pytest.raises(UnsupportedOpError, match=r"com\.microsoft\.FusedConv"):
        compile_model(model)


def test_a_lowering_error_is_one_line_with_the_node():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="dyn_reshape")]
    model = gm.model(
        nodes, [gm.f32("x", [2, 3]), helper.make_tensor_value_info("s", 7, [2])], [gm.f32("y", ["a", "b"])]
    )
    with pytest.raises(GraphError, match="dyn_reshape") as info:
        compile_model(model, CompileOptions(input_shape={"x": [2, 3], "s": [2]}))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ({"nope": [1, 3, 224, 224]}, "not an input of the model"),
        ({"data_0": [1, 3, 224]}, "3 dims given"),
        ({"data_0": [1, 3, 7, 7]}, r"shape inference failed|node '\w+' \(MaxPool\)"),
    ],
)
def test_bad_input_shapes(shapes, message):
    with pytest.raises(GraphError, match=message):
        compile_model(lm.load("squeezenet"), CompileOptions(input_shape=shapes))


def test_dynamic_dims_without_an_input_shape():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    model = gm.model(nodes, [gm.f32("x", ["N", 3])], [gm.f32("y", ["N", 3])])
    with pytest.raises(ShapeError, match=r"input 'x' has dynamic dims \(\?,3\)|dynamic dims \(N,3\)"):
        compile_model(model)
    compiled = compile_model(model, CompileOptions(input_shape={"x": [5, 3]}))
    assert compiled.inputs[0].shape == (5, 3)


def test_unknown_soc_and_format():
    model = gm.model([helper.make_node("Relu", ["x"], ["y"])], [gm.f32("x", [2])], [gm.f32("y", [2])])
    with pytest.raises(GraphError, match="soc_version 'Ascend310'"):
        compile_model(model, CompileOptions(soc_version="Ascend310"))
    with pytest.raises(GraphError, match="input_format 'NHWC'"):
        compile_model(model, CompileOptions(input_format="NHWC"))
    assert np.dtype(np.float32)  # the model itself is fine
    assert compile_model(model, CompileOptions(input_format="ND")).inputs[0].format == 2
