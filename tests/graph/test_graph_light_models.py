"""The nine light models: each compiles; the plan is within 1 % of its lower bound and never above the
unplanned sum, shares no bytes between live tensors; the .om round trip keeps the model; the task
list, run by the numpy interpreter, matches onnxruntime.

The three with large fully-connected layers (alexnet, vgg19, zfnet512: 240-550 MB of weights) cost
a minute of random weights and onnxruntime runs: with random weights they run with
CANNRT_SLOW_TESTS=1; as shipped (ConstantOfShape fills, folded at import) they always compile."""

from __future__ import annotations

import functools
import os

import light_models as lm
import numpy as np
import pytest
from checks import check_plan
from om_interpreter import run

from cannrt.graph import CompileOptions, compile_model
from cannrt.om import KernelTask, Section
from cannrt.om import format as om_format

RUN_SLOW = os.environ.get("CANNRT_SLOW_TESTS") == "1"
LARGE = ("bvlc_alexnet", "vgg19", "zfnet512")
ALL = [
    n if n not in LARGE else pytest.param(n, marks=pytest.mark.skipif(not RUN_SLOW, reason="CANNRT_SLOW_TESTS"))
    for n in lm.NAMES
]
DEFAULT_TOLERANCE = 1e-2
"""Under force_fp16 (atc's default): max |out - ref| <= 1e-2 x max |ref| (docs/model.md)."""


@functools.cache
def compiled(name: str, mode: str = "force_fp32"):  # type: ignore[no-untyped-def]
    return compile_model(lm.load(name), CompileOptions(precision_mode=mode))


@functools.cache
def reference(name: str) -> tuple[list[np.ndarray], np.ndarray]:
    model = lm.load(name)
    feeds = lm.input_for(model)
    return list(feeds.values()), lm.run_onnxruntime(model, feeds)[0]


@pytest.mark.parametrize("name", lm.NAMES)
def test_every_shipped_model_compiles_with_its_fills_folded(name):
    model = compile_model(lm.path(name), CompileOptions(plan_time_limit=1.0))
    check_plan(model)
    assert model.graph["passes"]["activations_fused"] > 0
    first = next(a for t in model.gears[0].tasks for a in t.args if getattr(a, "section", None) == Section.WEIGHT)
    weight = np.frombuffer(model.weights, np.float16, int(np.prod(first.shape)), first.offset)
    rows = weight.reshape(first.shape[0], -1)  # a 0.02 fill, times a per-channel BatchNorm scale
    assert np.isfinite(weight).all() and all(len(np.unique(row)) == 1 for row in rows)


@pytest.mark.parametrize("name", ALL)
def test_compiles_with_a_plan_at_the_bound(name):
    model = compiled(name)
    check_plan(model)
    gear = model.gears[0]
    assert model.num_streams == 1 and model.num_events == 0  # GE: a CNN on AI Core gets one stream
    assert all(isinstance(t, KernelTask) for t in gear.tasks)
    # zero copy: the first kernel reads the user's input buffer, the output is written in place
    assert any(a.section == Section.INPUT for t in gear.tasks for a in t.args if hasattr(a, "section"))
    assert any(a.section == Section.OUTPUT for t in gear.tasks for a in t.args if hasattr(a, "section"))
    assert gear.feature_map_size < gear.feature_map_unplanned  # lifetimes let buffers share memory
    assert model.weights[:512] == bytes(512) and len(model.weights) % 512 == 0


@pytest.mark.parametrize("name", ["squeezenet", "resnet50"])
def test_om_round_trip_keeps_the_compiled_model(name, tmp_path):
    model = compiled(name)
    om_format.save(model, tmp_path / "m.om")
    assert om_format.load(tmp_path / "m.om") == model


@pytest.mark.parametrize("name", ALL)
def test_task_list_matches_onnxruntime_under_force_fp32(name):
    inputs, ref = reference(name)
    (out,) = run(compiled(name), inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-5 * float(np.abs(ref).max()))


@pytest.mark.parametrize("name", ["squeezenet", "resnet50", "densenet121", "inception_v2"])
def test_default_precision_is_fp16_within_the_documented_tolerance(name):
    model = compiled(name, "force_fp16")
    check_plan(model)
    assert model.outputs[0].dtype == 1  # ACL_FLOAT16: the output keeps the last op's type
    assert model.inputs[0].dtype == 0  # the input stays fp32 (a Cast after it)
    inputs, ref = reference(name)
    (out,) = run(model, inputs)
    error = float(np.abs(out.astype(np.float32) - ref).max())
    assert error <= DEFAULT_TOLERANCE * float(np.abs(ref).max())
    assert model.gears[0].feature_map_size < compiled(name).gears[0].feature_map_size  # half the bytes
