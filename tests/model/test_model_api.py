"""cannrt.Model: an offline model called with numpy arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from hand_models import K, M, dense_model, dynamic_batch_model, reference, weights

import cannrt
from cannrt.om import format as om_format
from cannrt.runtime import model_codes


@pytest.fixture
def dense_path(rt, tmp_path: Path) -> Path:
    path = tmp_path / "dense.om"
    om_format.save(dense_model(streams=2), path)
    return path


def test_load_and_call_with_numpy(dense_path: Path) -> None:
    model = cannrt.Model.load(dense_path)
    assert [io.name for io in model.inputs] == ["x"]
    x = np.random.default_rng(4).standard_normal((M, K)).astype(np.float32)
    y0, y1 = model(x)
    want0, want1 = reference(x, *weights())
    np.testing.assert_allclose(y0, want0, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y1, want1, rtol=1e-5, atol=1e-6)
    (by_name, _) = model(x=x * 2)
    np.testing.assert_allclose(by_name, reference(x * 2, *weights())[0], rtol=1e-5, atol=1e-6)
    assert model.stats.device_ns > 0 and model.stats.wall_s >= model.stats.submit_s > 0
    model.close()


def test_bad_inputs_raise_with_the_numbers(dense_path: Path) -> None:
    with cannrt.Model.load(dense_path) as model:
        with pytest.raises(cannrt.CannError) as info:
            model(np.zeros((M, K + 1), np.float32))
        assert info.value.code == model_codes.MODEL_INPUT_NOT_MATCH
        assert (info.value.expected, info.value.given) == ((M, K), (M, K + 1))
        with pytest.raises(cannrt.CannError):
            model()
        with pytest.raises(cannrt.CannError):
            model(np.zeros((M, K), np.complex64))
        with pytest.raises(cannrt.CannError):
            model(y=np.zeros((M, K), np.float32))
    with pytest.raises(cannrt.CannError) as info:
        model(np.zeros((M, K), np.float32))
    assert info.value.code == model_codes.INVALID_MODEL_ID


def test_bad_files_raise(rt, tmp_path: Path) -> None:
    broken = tmp_path / "broken.om"
    broken.write_bytes(b"not a model")
    with pytest.raises(cannrt.CannError) as info:
        cannrt.Model.load(broken)
    assert info.value.code == model_codes.DESERIALIZE_MODEL
    with pytest.raises(cannrt.CannError) as info:
        cannrt.Model.load(tmp_path / "absent.om")
    assert info.value.code == model_codes.READ_MODEL_FAILURE


def test_dynamic_batch_follows_the_input(rt) -> None:
    model = cannrt.Model(dynamic_batch_model())
    for batch in (1, 4, 2):
        x = np.linspace(-1, 1, batch * 8, dtype=np.float32).reshape(batch, 8)
        (y,) = model(x)
        np.testing.assert_array_equal(y, np.maximum(x, 0))
    with pytest.raises(cannrt.CannError) as info:
        model(np.zeros((3, 8), np.float32))
    assert info.value.code == model_codes.GE_DYNAMIC_BATCH_SIZE_INVALID


def test_feature_map_bytes_of_the_plan(rt) -> None:
    figures = cannrt.Model(dense_model()).feature_map_bytes()
    assert (figures.planned, figures.unplanned, figures.lower_bound) == (1024, 512, 512)


def test_a_scalar_input_keeps_its_shape(rt) -> None:
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])
    s = onnx.helper.make_tensor_value_info("s", onnx.TensorProto.FLOAT, [])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Mul", ["x", "s"], ["y"])], "g", [x, s], [y])
    model = cannrt.Model.compile(onnx.helper.make_model(graph), precision_mode="force_fp32")
    (out,) = model(np.arange(3, dtype=np.float32), np.float32(2.5))
    np.testing.assert_allclose(out, np.arange(3) * 2.5)


def test_a_model_compiled_with_dynamic_batch_runs_every_gear(rt) -> None:
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 4])
    w = onnx.numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4) / 10, "w")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["x", "w"], ["t"]), onnx.helper.make_node("Relu", ["t"], ["y"])],
        "g", [x], [y], [w],
    )  # fmt: skip
    model = cannrt.Model.compile(
        onnx.helper.make_model(graph), precision_mode="force_fp32", input_shape={"x": [-1, 4]},
        dynamic_batch_size=[1, 2, 4],
    )  # fmt: skip
    assert model.offline.inputs[-1].name == "ascend_mbatch_shape_data"
    weights_ = np.arange(16, dtype=np.float32).reshape(4, 4) / 10
    for batch in (4, 1, 2):
        data = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
        (out,) = model(data)
        np.testing.assert_allclose(out, np.maximum(data @ weights_, 0), rtol=1e-5, atol=1e-6)
