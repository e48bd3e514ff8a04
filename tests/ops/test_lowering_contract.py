"""The lowering contract: lower() on Conv, Relu, Add, Gemm, MaxPool gives kernel steps whose
results on the simulated device match onnxruntime; bad nodes raise LoweringError."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_reference import on_device, reference

from cannrt.graph.lowering import LoweringError, Node, Value, fusable_activations, lower, supported_ops
from cannrt.runtime.core import Runtime

F32 = np.dtype(np.float32)


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _check(op_type: str, inputs: dict[str, np.ndarray], rtol: float = 1e-4, **attrs: object) -> None:
    expected = reference(op_type, inputs, **attrs)
    got = on_device(op_type, inputs, expected, **attrs)
    for e, g in zip(expected, got, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=rtol, atol=1e-4)


def test_the_first_ops_are_supported() -> None:
    assert {"Conv", "Relu", "Add", "Gemm", "MaxPool"} <= supported_ops()
    assert "Relu" in fusable_activations("Conv") and fusable_activations("Concat") == frozenset()


@pytest.mark.parametrize(
    "attrs, w_shape",
    [
        ({"pads": [1, 1, 1, 1]}, (8, 4, 3, 3)),
        ({"strides": [2, 2], "pads": [3, 3, 3, 3]}, (8, 4, 7, 7)),
        ({}, (16, 4, 1, 1)),
        ({"strides": [2, 2]}, (16, 4, 1, 1)),
        ({"group": 2, "dilations": [2, 2], "pads": [2, 1, 2, 2]}, (8, 2, 3, 3)),
        ({"strides": [2, 2], "auto_pad": "SAME_UPPER"}, (8, 4, 3, 3)),
        ({"strides": [2, 1], "auto_pad": "SAME_LOWER"}, (8, 4, 2, 2)),
        ({"group": 4, "pads": [1, 0, 1, 0]}, (8, 1, 3, 3)),  # depthwise, multiplier 2
    ],
)
def test_conv_matches_onnxruntime(rt: Runtime, attrs: dict[str, object], w_shape: tuple[int, ...]) -> None:
    inputs = {"x": _rand(2, 4, 11, 10, seed=1), "w": _rand(*w_shape, seed=2), "b": _rand(w_shape[0], seed=3)}
    _check("Conv", inputs, **attrs)


def test_relu_add_gemm_maxpool_match_onnxruntime(rt: Runtime) -> None:
    _check("Relu", {"x": _rand(3, 50, seed=4)})
    _check("Add", {"a": _rand(2, 3, 4, seed=5), "b": _rand(3, 1, seed=6)})
    _check(
        "Gemm",
        {"a": _rand(7, 5, seed=7), "b": _rand(6, 7, seed=8), "c": _rand(6, seed=9)},
        transA=1,
        transB=1,
        alpha=0.5,
    )
    _check("MaxPool", {"x": _rand(1, 3, 9, 9, seed=10)}, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    _check("MaxPool", {"x": _rand(1, 3, 8, 8, seed=11)}, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)


def test_a_fused_relu_applies_inside_the_conv(rt: Runtime) -> None:
    inputs = {"x": _rand(1, 3, 6, 6, seed=12), "w": _rand(4, 3, 3, 3, seed=13)}
    (plain,) = reference("Conv", inputs, pads=[1, 1, 1, 1])
    (fused,) = on_device("Conv", inputs, [plain], pads=[1, 1, 1, 1], activation=("Relu", {}))
    np.testing.assert_allclose(fused, np.maximum(plain, 0), rtol=1e-4, atol=1e-5)


def test_block_dim_follows_the_tiles_and_the_cores() -> None:
    values = {
        "x": Value("x", (1, 64, 56, 56), F32),
        "w": Value("w", (64, 64, 1, 1), F32),
        "y": Value("y", (1, 64, 56, 56), F32),
        "s": Value("s", (1, 2), F32),
        "t": Value("t", (1, 2), F32),
    }
    (conv,) = lower(Node("c", "Conv", ("x", "w"), ("y",)), values, {}, cores=24).steps
    assert conv.kernel == "nn.conv" and conv.block_dim == 24  # 3136 pixels / 128 = 25 tiles
    (relu,) = lower(Node("r", "Relu", ("s",), ("t",)), values, {}, cores=24).steps
    assert relu.block_dim == 1 and relu.args == ("s", "t")


def test_bad_nodes_raise_lowering_error_naming_the_node() -> None:
    values = {
        "x": Value("x", (1, 3, 8, 8), F32),
        "w": Value("w", (4, 5, 3, 3), F32),
        "y": Value("y", (1, 4, 6, 6), F32),
    }
    with pytest.raises(LoweringError, match=r"'bad' \(Conv\).*channels"):
        lower(Node("bad", "Conv", ("x", "w"), ("y",)), values, {}, 24)
    with pytest.raises(LoweringError, match=r"'u' \(NoSuchOp\)"):
        lower(Node("u", "NoSuchOp", ("x",), ("y",)), values, {}, 24)
    with pytest.raises(LoweringError, match="compile-time constant"):
        lower(Node("r", "Reshape", ("x", "w"), ("y",)), values, {}, 24)


@pytest.mark.parametrize(
    "op_type, inputs",
    [
        ("Add", {"a": _rand(2, 8, 5, 5, seed=14), "b": _rand(2, 8, 5, 5, seed=15)}),
        (
            "BatchNormalization",
            {
                "x": _rand(2, 8, 5, 5, seed=16),
                "s": _rand(8, seed=17),
                "b": _rand(8, seed=18),
                "m": _rand(8, seed=19),
                "v": np.abs(_rand(8, seed=20)) + 0.5,
            },
        ),
    ],
)
def test_add_and_batchnorm_fuse_a_following_activation(
    rt: Runtime, op_type: str, inputs: dict[str, np.ndarray]
) -> None:
    assert {"Relu", "LeakyRelu"} <= fusable_activations(op_type)
    (plain,) = reference(op_type, inputs)
    (relu,) = on_device(op_type, inputs, [plain], activation=("Relu", {}))
    np.testing.assert_allclose(relu, np.maximum(plain, 0), rtol=1e-5, atol=1e-6)
    (leaky,) = on_device(op_type, inputs, [plain], activation=("LeakyRelu", {"alpha": 0.1}))
    np.testing.assert_allclose(leaky, np.where(plain < 0, 0.1 * plain, plain), rtol=1e-5, atol=1e-6)


def test_an_activation_attached_to_an_integer_add_runs_as_a_second_launch(rt: Runtime) -> None:
    a = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    b = np.full((4,), 2, dtype=np.int32)
    (plain,) = reference("Add", {"a": a, "b": b})
    (got,) = on_device("Add", {"a": a, "b": b}, [plain], activation=("Relu", {}))
    assert got.dtype == np.int32 and np.array_equal(got, np.maximum(a + b, 0))


def test_clip_bounds_known_only_at_run_time_become_max_and_min_launches(rt: Runtime) -> None:
    inputs = {"x": _rand(4, 5, seed=21), "lo": np.array(-0.5, np.float32), "hi": np.array(0.25, np.float32)}
    (expected,) = reference("Clip", inputs)
    values = {k: Value(k, v.shape, v.dtype) for k, v in inputs.items()} | {"y": Value("y", (4, 5), F32)}
    steps = lower(Node("c", "Clip", ("x", "lo", "hi"), ("y",)), values, {}, 24).steps
    assert [s.kernel for s in steps] == ["nn.max", "nn.min"]
    (got,) = on_device("Clip", inputs, [expected])
    np.testing.assert_array_equal(got, expected)
    (folded,) = on_device("Clip", inputs, [expected], constants=("lo",))
    np.testing.assert_array_equal(folded, expected)


@pytest.mark.parametrize("spatial", [(9,), (5, 6, 7)])
def test_conv_and_pooling_in_one_and_three_spatial_axes(rt: Runtime, spatial: tuple[int, ...]) -> None:
    nd = len(spatial)
    inputs = {"x": _rand(2, 4, *spatial, seed=22), "w": _rand(6, 2, *([3] * nd), seed=23), "b": _rand(6, seed=24)}
    _check("Conv", inputs, group=2, pads=[1] * (2 * nd), strides=[2] * nd)
    _check("MaxPool", {"x": inputs["x"]}, kernel_shape=[2] * nd, strides=[1] * nd, dilations=[2] * nd)
    _check("AveragePool", {"x": inputs["x"]}, kernel_shape=[3] * nd, pads=[1] * (2 * nd), count_include_pad=1)


def test_a_large_convolution_runs_its_items_on_the_thread_team(host_runs_kernels: Runtime) -> None:
    from cannrt.kernels.nn import team

    inputs = {"x": _rand(1, 64, 24, 24, seed=25), "w": _rand(96, 64, 3, 3, seed=26), "b": _rand(96, seed=27)}
    assert team.TEAM_MIN_FLOPS <= 2.0 * 96 * 64 * 9 * 24 * 24
    before = team.TEAMS[0]
    _check("Conv", inputs, rtol=1e-3, pads=[1, 1, 1, 1])
    assert team.TEAMS[0] == before + 1
