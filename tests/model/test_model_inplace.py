"""Concat in place through the runtime: slices written straight into a user's output buffer at
their byte offsets, and into the work section from several streams, give onnxruntime's numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graph"))
import graph_models
import light_models

import cannrt
from cannrt.graph import CompileOptions, compile_model
from cannrt.om import KernelTask


def _model() -> onnx.ModelProto:
    """y1 = Concat(relu x, sigmoid x) in the work section; y = Concat(tanh y1, exp x) the output."""
    nodes = [
        *graph_models.halves_concat("y1", "concat1"),
        helper.make_node("Tanh", ["y1"], ["t"], name="t"),
        helper.make_node("Exp", ["x"], ["e"], name="e"),
        helper.make_node("Concat", ["t", "e"], ["y"], name="concat2", axis=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 9, 5, 7])
    graph = helper.make_graph(nodes, "inplace", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("parallel", [False, True])
def test_concat_slices_in_the_output_buffer_run_on_the_device(rt, parallel: bool) -> None:
    model = _model()
    options = CompileOptions(precision_mode="force_fp32", parallel_streams=parallel)
    offline = compile_model(model, options)
    kernels = [t.kernel for t in offline.gears[0].tasks if isinstance(t, KernelTask)]
    assert "nn.concat_into" not in kernels and len(kernels) == 4
    x = np.random.default_rng(3).standard_normal((1, 3, 5, 7)).astype(np.float32)
    want = light_models.run_onnxruntime(model, {"x": x})[0]
    with cannrt.Model(offline) as runner:
        for _ in range(2):  # a second execute computes again into the same buffers
            np.testing.assert_allclose(runner(x)[0], want, rtol=1e-6)
            x = x * -0.5
            want = light_models.run_onnxruntime(model, {"x": x})[0]
