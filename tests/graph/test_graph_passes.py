"""The passes keep the function: the rewritten graph, exported back to ONNX, runs on onnxruntime to
the original model's outputs; and they do rewrite (counts, node lists)."""

from __future__ import annotations

import graph_models as gm
import light_models as lm
import numpy as np
import pytest
from checks import graph_to_onnx
from onnx import helper

from cannrt.graph import CompileOptions, prepare_graph
from cannrt.graph.onnx_import import import_model
from cannrt.graph.passes import fuse_activations, remove_identities

KEEP = CompileOptions(precision_mode="must_keep_origin_dtype")


def _same_function(original, graph, feeds, rtol=1e-5):  # type: ignore[no-untyped-def]
    expected = lm.run_onnxruntime(original, feeds)
    actual = lm.run_onnxruntime(graph_to_onnx(graph), feeds)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=rtol, atol=rtol * float(np.abs(e).max()))


@pytest.mark.parametrize("activation", ["Relu", "Sigmoid", "Clip", "LeakyRelu"])
def test_batchnorm_folds_into_conv_and_the_activation_fuses(activation):
    model = gm.conv_bn_relu(activation=activation)
    graph = prepare_graph(model, KEEP, {})
    assert graph.stats["batchnorms_folded"] == 1 and graph.stats["activations_fused"] == 1
    (conv,) = graph.nodes
    assert conv.op_type == "Conv" and conv.attrs["activation"][0] == activation
    if activation == "Clip":  # opset-11 min / max inputs become the fused activation's attributes
        assert conv.attrs["activation"][1] == {"min": 0.0, "max": 6.0}
    x = gm.RNG.standard_normal((1, 3, 10, 10)).astype(np.float32)
    _same_function(model, graph, {"x": x})


@pytest.mark.parametrize("name", ["resnet50", "densenet121", "inception_v2", "squeezenet", "shufflenet"])
def test_light_models_keep_their_function_after_the_passes(name):
    model = lm.load(name)
    graph = prepare_graph(model, KEEP, {})
    assert not any(n.op_type in ("BatchNormalization", "Dropout", "Identity") for n in graph.nodes) or name in (
        "densenet121",  # BatchNormalizations after a Concat stay (nothing to fold into)
        "inception_v2",
    )
    _same_function(model, graph, lm.input_for(model), rtol=1e-4)


def test_densenet_per_channel_mul_and_add_fold_into_the_batchnorm_before_them():
    graph = prepare_graph(lm.load("densenet121"), KEEP, {})
    assert graph.stats["channel_affines_folded"] == 242
    assert not any(n.op_type in ("Mul", "Add", "Unsqueeze") for n in graph.nodes)


def test_identity_and_dropout_are_removed_but_not_between_input_and_output():
    nodes = [
        helper.make_node("Identity", ["x"], ["i"], name="id"),
        helper.make_node("Dropout", ["i"], ["d"], name="drop"),
        helper.make_node("Relu", ["d"], ["y"], name="relu"),
        helper.make_node("Identity", ["y"], ["z"], name="to_output"),
        helper.make_node("Identity", ["x"], ["w"], name="input_to_output"),
    ]
    model = gm.model(nodes, [gm.f32("x", [2, 3])], [gm.f32("z", [2, 3]), gm.f32("w", [2, 3])])
    graph = import_model(model)
    assert remove_identities(graph) == 3
    assert [(n.name, n.inputs, n.outputs) for n in graph.nodes] == [
        ("relu", ("x",), ("z",)),  # the Relu writes the output the Identity after it wrote
        ("input_to_output", ("x",), ("w",)),  # kept: an output that is a copy of an input
    ]
    x = gm.RNG.standard_normal((2, 3)).astype(np.float32)
    _same_function(model, graph, {"x": x})


def test_dropout_whose_mask_is_read_stays():
    nodes = [
        helper.make_node("Dropout", ["x"], ["d", "mask"], name="drop"),
        helper.make_node("Cast", ["mask"], ["y"], name="cast", to=1),
    ]
    graph = import_model(gm.model(nodes, [gm.f32("x", [4])], [gm.f32("y", [4])]))
    assert remove_identities(graph) == 0


def test_no_fusion_when_the_conv_output_has_another_reader():
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "c"], ["y"], name="add"),
    ]
    w = gm.tensor("w", gm.RNG.standard_normal((2, 1, 1, 1)).astype(np.float32))
    model = gm.model(nodes, [gm.f32("x", [1, 1, 3, 3])], [gm.f32("y", [1, 2, 3, 3])], [w])
    graph = import_model(model)
    assert fuse_activations(graph) == 0


def test_resnets_residual_sum_takes_the_relu_after_it_as_an_add_does():
    graph = prepare_graph(lm.load("resnet50"), KEEP, {})
    sums = [n for n in graph.nodes if n.op_type == "Sum"]
    assert len(sums) == 16 and all(n.attrs["activation"][0] == "Relu" for n in sums)  # the op keeps its type
    assert not any(n.op_type == "Relu" for n in graph.nodes)
    _same_function(lm.load("resnet50"), graph, lm.input_for(lm.load("resnet50")), rtol=1e-4)


@pytest.mark.parametrize("count", [1, 2, 3])
def test_a_sum_of_any_count_with_its_relu_fused_computes_relu_of_the_sum(count):
    import cannrt
    from cannrt.graph import compile_model

    names = [f"x{i}" for i in range(count)]
    infos = [helper.make_tensor_value_info(n, 1, [2, 5]) for n in names]
    nodes = [helper.make_node("Sum", names, ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    out = helper.make_tensor_value_info("y", 1, [2, 5])
    model = helper.make_model(helper.make_graph(nodes, "sum_relu", infos, [out]))
    feeds = [gm.RNG.standard_normal((2, 5)).astype(np.float32) for _ in names]
    with cannrt.Model(compile_model(model, KEEP)) as run:
        (y,) = run(*feeds)
    np.testing.assert_allclose(y, np.maximum(np.sum(feeds, axis=0), 0), rtol=1e-6)
    assert prepare_graph(model, KEEP, {}).stats["activations_fused"] == 1
