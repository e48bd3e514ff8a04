"""--precision_mode: which type each node computes in, where the Casts go, atc's default."""

from __future__ import annotations

import graph_models as gm
import numpy as np
import pytest
from om_interpreter import run
from onnx import helper

from cannrt.graph import CompileOptions, GraphError, compile_model, prepare_graph
from cannrt.graph.precision import DEFAULT_MODE

FP16, FP32 = np.dtype(np.float16), np.dtype(np.float32)


def _conv_softmax():  # type: ignore[no-untyped-def]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Softmax", ["c"], ["y"], name="softmax", axis=1),
    ]
    w = gm.tensor("w", gm.RNG.standard_normal((4, 3, 1, 1)).astype(np.float32))
    return gm.model(nodes, [gm.f32("x", [1, 3, 5, 5])], [gm.f32("y", [1, 4, 5, 5])], [w])


def _types(graph):  # type: ignore[no-untyped-def]
    return {n.name: graph.values[n.outputs[0]].dtype for n in graph.nodes}


def test_atc_default_is_force_fp16():
    assert DEFAULT_MODE == "force_fp16" and CompileOptions().precision_mode == "force_fp16"


def test_force_fp16_casts_the_input_converts_the_weights_and_leaves_the_output_fp16():
    graph = prepare_graph(_conv_softmax(), CompileOptions(), {})
    types = _types(graph)
    assert types["conv"] == FP16 and types["softmax"] == FP16
    cast = next(n for n in graph.nodes if n.op_type == "Cast")
    assert cast.inputs == ("x",) and graph.values["x"].dtype == FP32
    conv = next(n for n in graph.nodes if n.op_type == "Conv")
    assert graph.constants[conv.inputs[1]].dtype == FP16  # converted at compile time, no Cast
    assert graph.values["y"].dtype == FP16


def test_allow_fp32_to_fp16_runs_matrix_ops_in_fp16_and_vector_ops_in_fp32():
    graph = prepare_graph(_conv_softmax(), CompileOptions(precision_mode="allow_fp32_to_fp16"), {})
    types = _types(graph)
    assert types["conv"] == FP16 and types["softmax"] == FP32
    assert sum(n.op_type == "Cast" for n in graph.nodes) == 2  # into the Conv, out of it


@pytest.mark.parametrize("mode", ["force_fp32", "must_keep_origin_dtype"])
def test_fp32_modes_change_nothing_in_an_fp32_model(mode):
    graph = prepare_graph(_conv_softmax(), CompileOptions(precision_mode=mode), {})
    assert set(_types(graph).values()) == {FP32} and graph.stats["casts_inserted"] == 0


def test_output_type_fp32_adds_a_cast_at_the_end_and_the_numbers_follow():
    model = _conv_softmax()
    compiled = compile_model(model, CompileOptions(output_type="FP32"))
    assert compiled.outputs[0].dtype == 0 and compiled.outputs[0].name == "y"
    x = gm.RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)
    (fp16,) = run(compiled, [x])
    (fp32,) = run(compile_model(model, CompileOptions(precision_mode="force_fp32")), [x])
    assert fp16.dtype == np.float32
    np.testing.assert_allclose(fp16, fp32, atol=2e-3)


def test_output_type_per_output_and_errors():
    model = _conv_softmax()
    assert compile_model(model, CompileOptions(output_type="softmax:0:FP32")).outputs[0].dtype == 0
    with pytest.raises(GraphError, match="not an output"):
        compile_model(model, CompileOptions(output_type="conv:0:FP32"))
    with pytest.raises(GraphError, match="expected FP32"):
        compile_model(model, CompileOptions(output_type="FP64"))
    with pytest.raises(GraphError, match="precision_mode"):
        compile_model(model, CompileOptions(precision_mode="fp8"))
