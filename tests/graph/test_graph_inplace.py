"""Concat in place: producers write straight into their slice of a Concat's output, the copies
disappear from the task list, nested concats nest, and the cases that must keep the copy keep it.
Every model also runs through the reference executor (work bytes start as garbage) against
onnxruntime, and its plan passes check_plan."""

from __future__ import annotations

import graph_models as gm
import light_models as lm
import numpy as np
import pytest
from checks import check_plan, check_races
from om_interpreter import run
from onnx import helper

from cannrt.graph import CompileOptions, compile_model
from cannrt.om import KernelTask, OfflineModel, Section

FP32 = CompileOptions(precision_mode="force_fp32")
COPIES = CompileOptions(precision_mode="force_fp32", concat_in_place=False)
CONCAT = "nn.concat_into"


def kernels(model: OfflineModel) -> list[KernelTask]:
    return [t for t in model.gears[0].tasks if isinstance(t, KernelTask)]


def copies(model: OfflineModel) -> list[KernelTask]:
    return [t for t in kernels(model) if t.kernel == CONCAT]


def written_by(model: OfflineModel, node: str) -> tuple[Section, int]:
    (task,) = [t for t in kernels(model) if t.node == node]
    out = task.args[1]
    return out.section, out.offset


def check_against_onnxruntime(model, compiled, shape) -> None:  # type: ignore[no-untyped-def]
    x = gm.RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(run(compiled, [x])[0], lm.run_onnxruntime(model, {"x": x})[0], rtol=1e-6)


def chain() -> object:
    """densenet's pattern: y1 = Concat(a, b), y2 = Concat(y1, c) with c computed from y1; a is read
    again at the very end (its slice must outlive the concats)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="a"),
        helper.make_node("Sigmoid", ["a"], ["b"], name="b"),
        helper.make_node("Concat", ["a", "b"], ["y1"], name="concat1", axis=1),
        helper.make_node("Tanh", ["y1"], ["c0"], name="c0"),
        helper.make_node("Slice", ["c0", "starts", "ends", "axes"], ["c"], name="c"),
        helper.make_node("Concat", ["y1", "c"], ["y2"], name="concat2", axis=1),
        helper.make_node("Neg", ["y2"], ["n"], name="neg"),
        helper.make_node("Exp", ["a"], ["e"], name="late"),
        helper.make_node("Concat", ["n", "e"], ["y"], name="out", axis=1),
    ]
    inits = [gm.tensor(k, np.array(v, np.int64)) for k, v in (("starts", [0]), ("ends", [3]), ("axes", [1]))]
    return gm.model(nodes, [gm.f32("x", [1, 4, 5, 6])], [gm.f32("y", [1, 15, 5, 6])], inits)


def test_a_concat_chain_is_placed_in_place_and_nests():
    model = chain()
    compiled = compile_model(model, FP32)
    assert copies(compiled) == []
    assert "Concat" not in {t.op_type for t in kernels(compiled)}
    plane = 5 * 6 * 4
    (section, a_at), b, c = (written_by(compiled, n) for n in ("a", "b", "c"))
    assert section == Section.WORK and b == (Section.WORK, a_at + 4 * plane) and c == (Section.WORK, a_at + 8 * plane)
    # y is the model output: its slices are written straight into the user's buffer
    assert written_by(compiled, "neg") == (Section.OUTPUT, 0)
    assert written_by(compiled, "late") == (Section.OUTPUT, 11 * plane)
    check_plan(compiled)
    check_against_onnxruntime(model, compiled, (1, 4, 5, 6))
    described = {n["name"]: n for n in compiled.graph["nodes"]}
    assert described["concat2"]["in_place"] == {"c": 8 * plane, "y1": 0}


def test_nested_slices_sum_their_offsets_in_the_work_section():
    nodes = [
        *gm.halves_concat("y1", "concat1"),
        helper.make_node("Tanh", ["x"], ["c"], name="c"),
        helper.make_node("Concat", ["c", "y1"], ["y2"], name="concat2", axis=1),
        helper.make_node("Neg", ["y2"], ["y"], name="neg"),
    ]
    model = gm.model(nodes, [gm.f32("x", [1, 2, 3, 4])], [gm.f32("y", [1, 6, 3, 4])])
    compiled = compile_model(model, FP32)
    assert copies(compiled) == []
    (section, c_at), (_, a_at), (_, b_at) = (written_by(compiled, n) for n in ("c", "a", "b"))
    plane = 3 * 4 * 4
    assert section == Section.WORK and a_at == c_at + 2 * plane and b_at == c_at + 4 * plane
    (neg,) = [t for t in kernels(compiled) if t.node == "neg"]
    assert neg.args[0].offset == c_at and neg.args[0].shape == (1, 6, 3, 4)
    check_plan(compiled)
    check_against_onnxruntime(model, compiled, (1, 2, 3, 4))


@pytest.mark.parametrize(
    ("case", "kept"),
    [
        ("model input", ["x"]),
        ("constant", ["k"]),
        ("two concats", ["r"]),
        ("twice in one", ["r"]),
        ("batch 2", ["r", "s"]),
        ("input is an output", ["r"]),
    ],
)
def test_refused_inputs_keep_their_copy(case, kept):
    shape = [2, 3, 4, 4] if case == "batch 2" else [1, 3, 4, 4]
    relu = helper.make_node("Relu", ["x"], ["r"], name="relu")
    sig = helper.make_node("Sigmoid", ["x"], ["s"], name="sig")
    outputs, inits = [gm.f32("y", [shape[0], 6, 4, 4])], []
    if case == "model input":
        nodes = [relu, helper.make_node("Concat", ["x", "r"], ["y"], name="cat", axis=1)]
    elif case == "constant":
        inits = [gm.tensor("k", gm.RNG.standard_normal(shape).astype(np.float32))]
        nodes = [relu, helper.make_node("Concat", ["r", "k"], ["y"], name="cat", axis=1)]
    elif case == "two concats":
        nodes = [
            relu,
            sig,
            helper.make_node("Concat", ["r", "s"], ["y1"], name="cat1", axis=1),
            helper.make_node("Concat", ["s", "r"], ["y2"], name="cat2", axis=1),
            helper.make_node("Add", ["y1", "y2"], ["y"], name="add"),
        ]
        kept = ["s", "r"]  # cat1 takes both; cat2 copies both
    elif case == "twice in one":
        nodes = [relu, helper.make_node("Concat", ["r", "r"], ["y"], name="cat", axis=1)]
    elif case == "batch 2":
        nodes = [relu, sig, helper.make_node("Concat", ["r", "s"], ["y"], name="cat", axis=1)]
    else:
        nodes = [relu, sig, helper.make_node("Concat", ["r", "s"], ["y"], name="cat", axis=1)]
        outputs.append(gm.f32("r", shape))
    model = gm.model(nodes, [gm.f32("x", shape)], outputs, inits)
    compiled = compile_model(model, FP32)
    assert len(copies(compiled)) == len(kept)
    sources = {t.args[0].section for t in copies(compiled)}
    # a copy reads its input where it lives: r of "twice in one" sits in the output's first slice
    where = {"model input": Section.INPUT, "constant": Section.WEIGHT, "two concats": Section.WORK}
    expected = where.get(case, Section.WORK if case == "batch 2" else Section.OUTPUT)
    assert sources == {expected}
    check_plan(compiled)
    x = gm.RNG.standard_normal(shape).astype(np.float32)
    for got, want in zip(run(compiled, [x]), lm.run_onnxruntime(model, {"x": x}), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_disabled_keeps_every_copy():
    compiled = compile_model(chain(), COPIES)
    assert len(copies(compiled)) == 6
    check_against_onnxruntime(chain(), compiled, (1, 4, 5, 6))


def test_parallel_streams_stay_race_free_with_slices_written_from_several_streams():
    model = gm.branches()
    parallel = CompileOptions(precision_mode="force_fp32", parallel_streams=True, max_streams=4)
    compiled = compile_model(model, parallel)
    assert copies(compiled) == [] and compiled.num_streams == 3
    check_plan(compiled)
    check_races(compiled)
    check_against_onnxruntime(model, compiled, (1, 4, 8, 8))


@pytest.mark.parametrize(("name", "concats"), [("squeezenet", 16), ("densenet121", 116)])
def test_light_models_lose_their_concat_copies_and_keep_their_outputs(name, concats):
    model = lm.load(name)
    before, after = compile_model(model, COPIES), compile_model(model, FP32)
    assert len(copies(before)) == concats and copies(after) == []
    assert len(after.gears[0].tasks) == len(before.gears[0].tasks) - concats
    check_plan(after)
    feeds = lm.input_for(model)
    np.testing.assert_allclose(run(after, list(feeds.values()))[0], run(before, list(feeds.values()))[0], rtol=0)


def test_a_concat_read_through_a_reshape_output_places_its_inputs_in_the_output_buffer():
    nodes = [
        *gm.halves_concat("y", "cat"),
        helper.make_node("Flatten", ["y"], ["f"], name="flat"),
        helper.make_node("Neg", ["y"], ["n"], name="neg"),
    ]
    model = gm.model(nodes, [gm.f32("x", [1, 2, 3, 4])], [gm.f32("f", [1, 48]), gm.f32("n", [1, 4, 3, 4])])
    compiled = compile_model(model, FP32)
    assert copies(compiled) == [] and written_by(compiled, "b") == (Section.OUTPUT, 2 * 3 * 4 * 4)
    (neg,) = [t for t in kernels(compiled) if t.node == "neg"]
    assert (neg.args[0].section, neg.args[0].offset, neg.args[0].index) == (Section.OUTPUT, 0, 0)
    check_plan(compiled)
    x = gm.RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    for got, want in zip(run(compiled, [x]), lm.run_onnxruntime(model, {"x": x}), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
