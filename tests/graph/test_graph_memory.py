"""Memory assignment: the weight section's layout, aliased reshapes, zero-copy I/O, the work size
aclmdlQuerySize reports, and dynamic batch gears."""

from __future__ import annotations

import graph_models as gm
import light_models as lm
import numpy as np
import pytest
from checks import check_plan
from om_interpreter import run
from onnx import helper

from cannrt.graph import CompileOptions, ShapeError, compile_model
from cannrt.graph.memory import WeightSection
from cannrt.om import KernelTask, MemcpyTask, Section

FP32 = CompileOptions(precision_mode="force_fp32")


def test_weights_start_at_512_each_rounded_up_to_512():
    section = WeightSection()
    a, b = np.ones(3, np.float32), np.arange(200, dtype=np.float32)
    assert section.place("a", a) == 512
    assert section.place("b", b) == 1024
    assert section.place("a", a.copy()) == 512  # the same weight again (another gear) is shared
    assert section.place("a", a + 1) == 1024 + 1024  # same name, other contents: its own place
    data = section.data()
    assert len(data) == section.size == 2560
    assert np.frombuffer(data[1024:1824], np.float32).tolist() == b.tolist()


def test_weights_are_placed_in_topological_order():
    model = compile_model(lm.load("squeezenet"), FP32)
    offsets = [a.offset for t in model.gears[0].tasks for a in t.args if getattr(a, "section", None) == Section.WEIGHT]
    assert offsets == sorted(offsets) and offsets[0] == 512


def test_a_reshape_aliases_its_input_and_the_plan_holds_it_once():
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["s"], name="reshape"),
        helper.make_node("Sigmoid", ["s"], ["t"], name="sigmoid"),
        helper.make_node("Flatten", ["t"], ["f"], name="flatten"),
        helper.make_node("Tanh", ["f"], ["y"], name="tanh"),
    ]
    model = gm.model(
        nodes, [gm.f32("x", [2, 6])], [gm.f32("y", [3, 4])], [gm.tensor("shape", np.array([3, 4], np.int64))]
    )
    compiled = compile_model(model, FP32)
    tasks = compiled.gears[0].tasks
    assert [t.op_type for t in tasks] == ["Relu", "Sigmoid", "Tanh"]
    relu_out, sigmoid_in = tasks[0].args[1], tasks[1].args[0]
    assert relu_out.offset == sigmoid_in.offset and sigmoid_in.shape == (3, 4)
    names = [p.name for p in compiled.gears[0].plan]
    assert "r" in names and "s" not in names
    check_plan(compiled)
    x = gm.RNG.standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_allclose(run(compiled, [x])[0], lm.run_onnxruntime(model, {"x": x})[0], rtol=1e-6)


def test_a_reshape_from_input_to_output_stays_a_copy():
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")]
    model = gm.model(nodes, [gm.f32("x", [2, 6])], [gm.f32("y", [12])], [gm.tensor("shape", np.array([12]))])
    compiled = compile_model(model, FP32)
    (task,) = compiled.gears[0].tasks
    assert isinstance(task, KernelTask) and task.args[0].section == Section.INPUT
    assert task.args[1].section == Section.OUTPUT


def test_constant_and_repeated_outputs_are_copied():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    model = gm.model(
        nodes,
        [gm.f32("x", [4])],
        [gm.f32("y", [4]), gm.f32("c", [4])],
        [gm.tensor("c", np.arange(4, dtype=np.float32))],
    )
    compiled = compile_model(model, FP32)
    copy = compiled.gears[0].tasks[-1]
    assert isinstance(copy, MemcpyTask) and copy.src.section == Section.WEIGHT and copy.dst.index == 1
    y, c = run(compiled, [np.array([-1, 2, -3, 4], np.float32)])
    assert y.tolist() == [0, 2, 0, 4] and c.tolist() == [0, 1, 2, 3]


def test_io_is_zero_copy_and_laid_out_after_the_feature_maps():
    compiled = compile_model(lm.load("squeezenet"), FP32)
    gear = compiled.gears[0]
    blocks = {p.name: p for p in gear.plan if p.name in ("data_0", "softmaxout_1")}
    assert blocks["data_0"].offset >= gear.feature_map_size
    assert gear.work_size == compiled.work_size >= gear.feature_map_size + 602112
    assert compiled.inputs[0].size == 602112 and compiled.outputs[0].size == 4000
    assert compiled.weight_size == len(compiled.weights)


def test_dynamic_batch_compiles_one_gear_per_batch_with_the_mbatch_input():
    model = lm.load("squeezenet")
    options = CompileOptions(
        precision_mode="force_fp32", input_shape={"data_0": [-1, 3, 224, 224]}, dynamic_batch_size=[1, 2, 4]
    )
    compiled = compile_model(model, options)
    assert [g.batch for g in compiled.gears] == [1, 2, 4]
    assert [io.name for io in compiled.inputs] == ["data_0", "ascend_mbatch_shape_data"]
    assert compiled.inputs[0].shape == (-1, 3, 224, 224) and compiled.inputs[0].size == 4 * 602112
    assert compiled.outputs[0].shape == (-1, 1000, 1, 1)
    assert compiled.gears[1].input_shapes == ((2, 3, 224, 224), (1,))
    weights = {a.offset for g in compiled.gears for t in g.tasks for a in t.args if getattr(a, "section", 0) == 1}
    one_gear = compile_model(model, CompileOptions(precision_mode="force_fp32"))
    assert len(compiled.weights) == len(one_gear.weights) and len(weights) == 52 + 4  # shared by the gears
    # (52 weights and biases; 4 convolutions' weights transformed for the Winograd kernels)
    for gear in range(3):
        check_plan(compiled, gear)
    x = lm.input_for(model, batch=2)["data_0"]
    (out,) = run(compiled, [x, np.array([2])], gear=1)
    ref = np.concatenate([lm.run_onnxruntime(model, {"data_0": x[i : i + 1]})[0] for i in range(2)])
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize(
    ("shape", "batches", "message"),
    [
        ({"data_0": [-1, 3, 224, 224]}, (), "add --dynamic_batch_size"),
        ({"data_0": [1, 3, 224, 224]}, (1, 2), "needs -1"),
        ({"data_0": [-1, 3, 224, 224]}, (2, 2), "distinct positive"),
    ],
)
def test_dynamic_batch_errors(shape, batches, message):
    with pytest.raises(ShapeError, match=message):
        compile_model(lm.load("squeezenet"), CompileOptions(input_shape=shape, dynamic_batch_size=batches))
