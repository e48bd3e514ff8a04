"""ge transforms the constant weights of a 3x3 unit-stride Conv over enough channels for the
Winograd kernels once, at compile time (as it converts weights to a kernel's format offline): the
model carries them in its weight section, the launch reads them, and the numbers are the ones the
transform per call gives. Other Convs keep the direct kernels."""

from __future__ import annotations

import graph_models as gm
import light_models as lm
import numpy as np
import pytest
from om_interpreter import run
from onnx import helper

from cannrt.api.model import Model
from cannrt.dtypes import numpy_dtype
from cannrt.graph import CompileOptions, compile_model
from cannrt.kernels.nn.conv_winograd import transform_weights
from cannrt.om import KernelTask, OfflineModel, Section

FP32 = CompileOptions(precision_mode="force_fp32")


def _conv(c: int, m: int, *, size: int = 14, stride: int = 1, weights_given: bool = False):  # type: ignore[no-untyped-def]
    """y = Relu(Conv(x, w, b)) over a size x size image, pads 1; the weights an initializer or an input."""
    w = gm.RNG.standard_normal((m, c, 3, 3)).astype(np.float32)
    b = gm.RNG.standard_normal(m).astype(np.float32)
    out = (size + 2 - 3) // stride + 1
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[stride, stride]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    inputs = [gm.f32("x", (1, c, size, size))] + ([gm.f32("w", (m, c, 3, 3))] if weights_given else [])
    inits = [gm.tensor("b", b)] + ([] if weights_given else [gm.tensor("w", w)])
    return gm.model(nodes, inputs, [gm.f32("y", (1, m, out, out))], inits), w


def _kernel_task(offline: OfflineModel) -> KernelTask:
    (task,) = [t for t in offline.gears[0].tasks if isinstance(t, KernelTask)]
    return task


def test_the_constant_weights_of_a_3x3_conv_over_many_channels_are_transformed_once_into_the_model() -> None:
    model, w = _conv(64, 64)
    offline = compile_model(model, FP32)
    task = _kernel_task(offline)
    assert task.kernel == "nn.conv_bias_winograd" and task.node == "conv"
    u = task.args[2]
    assert u.section == Section.WEIGHT and u.shape == (16, 64, 64) and numpy_dtype(u.dtype) == np.float32
    stored = np.frombuffer(offline.weights, np.float32, count=16 * 64 * 64, offset=u.offset).reshape(16, 64, 64)
    assert np.array_equal(stored, transform_weights(w))
    x = gm.RNG.standard_normal((1, 64, 14, 14)).astype(np.float32)
    expected = lm.run_onnxruntime(model, {"x": x})[0]
    runner = Model(offline)
    got = runner(x)[0]
    runner.close()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(run(offline, [x])[0], got)  # the kernel reads the weight section's copy


@pytest.mark.parametrize(
    ("c", "m", "stride", "weights_given"),
    [
        (16, 64, 1, False),  # few input channels: the input transform outweighs the saving
        (64, 64, 2, False),  # strided
        (64, 64, 1, True),  # weights that come at execute: nothing to transform ahead
    ],
)
def test_other_convs_keep_the_direct_kernel(c: int, m: int, stride: int, weights_given: bool) -> None:
    model, w = _conv(c, m, stride=stride, weights_given=weights_given)
    offline = compile_model(model, FP32)
    assert _kernel_task(offline).kernel == "nn.conv_bias"
    x = gm.RNG.standard_normal((1, c, 14, 14)).astype(np.float32)
    feeds = {"x": x, "w": w} if weights_given else {"x": x}
    expected = lm.run_onnxruntime(model, feeds)[0]
    got = run(offline, list(feeds.values()))[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_the_transform_ahead_serves_every_gear_once() -> None:
    model, _ = _conv(64, 64)
    shape = {"x": (-1, 64, 14, 14)}
    options = CompileOptions(precision_mode="force_fp32", input_shape=shape, dynamic_batch_size=(1, 2))
    offline = compile_model(model, options)
    offsets = {t.args[2].offset for g in offline.gears for t in g.tasks if isinstance(t, KernelTask)}
    assert len(offline.gears) == 2 and len(offsets) == 1
