"""acl.mdl with pyACL's names and return shapes, on offline models built by hand (tests/model)."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))
from hand_models import K, M, N, dense_model, dynamic_batch_model, reference, weights

from cannrt.acl import mdl
from cannrt.om import format as om_format

ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST = 1, 2


@pytest.fixture
def dense_om(tmp_path: Path) -> Path:
    path = tmp_path / "dense.om"
    om_format.save(dense_model(), path)
    return path


def _device(acl: ModuleType, data: np.ndarray | int) -> tuple[int, int]:
    size = data if isinstance(data, int) else data.nbytes
    ptr, ret = acl.rt.malloc(size, 0)
    assert ret == 0
    if not isinstance(data, int):
        assert acl.rt.memcpy(ptr, size, acl.util.numpy_to_ptr(data), size, ACL_MEMCPY_HOST_TO_DEVICE) == 0
    return ptr, size


def _dataset(acl: ModuleType, buffers: list[tuple[int, int]]) -> int:
    dataset = acl.mdl.create_dataset()
    for ptr, size in buffers:
        result, ret = acl.mdl.add_dataset_buffer(dataset, acl.create_data_buffer(ptr, size))
        assert (result, ret) == (dataset, 0)
    return dataset


def _read(acl: ModuleType, ptr: int, shape: tuple[int, ...]) -> np.ndarray:
    host = np.empty(shape, np.float32)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), host.nbytes, ptr, host.nbytes, ACL_MEMCPY_DEVICE_TO_HOST) == 0
    return host


def test_quick_start_flow_and_description(acl: ModuleType, dense_om: Path) -> None:
    model_id, ret = acl.mdl.load_from_file(str(dense_om))
    assert ret == 0 and model_id >= 1
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(desc, model_id) == 0
    assert (acl.mdl.get_num_inputs(desc), acl.mdl.get_num_outputs(desc)) == (1, 2)
    assert acl.mdl.get_input_size_by_index(desc, 0) == M * K * 4
    assert acl.mdl.get_output_size_by_index(desc, 1) == M * N * 4
    assert acl.mdl.get_input_dims(desc, 0) == ({"name": "x", "dimCount": 2, "dims": [M, K]}, 0)
    assert acl.mdl.get_output_dims(desc, 0) == ({"name": "y0", "dimCount": 2, "dims": [M, N]}, 0)
    assert acl.mdl.get_input_name_by_index(desc, 0) == "x"
    assert acl.mdl.get_output_name_by_index(desc, 1) == "y1"
    assert (acl.mdl.get_input_data_type(desc, 0), acl.mdl.get_output_format(desc, 0)) == (0, 2)
    assert acl.mdl.get_input_index_by_name(desc, "x") == (0, 0)
    _, ret = acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data")
    assert ret != 0  # acllite asks on every execute: a static model says no
    assert acl.mdl.get_dynamic_batch(desc) == ({"batchCount": 0, "batch": []}, 0)
    x = np.random.default_rng(0).standard_normal((M, K)).astype(np.float32)
    inputs = _dataset(acl, [_device(acl, x)])
    outs = [_device(acl, M * N * 4), _device(acl, M * N * 4)]
    outputs = _dataset(acl, outs)
    assert acl.mdl.get_dataset_num_buffers(outputs) == 2
    assert acl.mdl.get_dataset_buffer(outputs, 5) == 0
    assert acl.mdl.execute(model_id, inputs, outputs) == 0
    dims, ret = acl.mdl.get_cur_output_dims(desc, 0)
    assert (dims["dims"], ret) == ([M, N], 0)
    for (ptr, _), want in zip(outs, reference(x, *weights()), strict=True):
        np.testing.assert_allclose(_read(acl, ptr, (M, N)), want, rtol=1e-5, atol=1e-6)
    assert acl.mdl.unload(model_id) == 0
    assert acl.mdl.destroy_dataset(inputs) == 0
    assert acl.mdl.destroy_desc(desc) == 0


def test_execute_async_on_a_stream(acl: ModuleType, dense_om: Path) -> None:
    model_id, _ = acl.mdl.load_from_file(str(dense_om))
    stream, _ = acl.rt.create_stream()
    x = np.ones((M, K), np.float32)
    outs = [_device(acl, M * N * 4), _device(acl, M * N * 4)]
    inputs, outputs = _dataset(acl, [_device(acl, x)]), _dataset(acl, outs)
    assert acl.mdl.execute_async(model_id, inputs, outputs, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    np.testing.assert_allclose(_read(acl, outs[0][0], (M, N)), reference(x, *weights())[0], rtol=1e-5)
    assert acl.mdl.execute(model_id, inputs, outputs) != 0  # one loaded model: async, never sync too


def test_load_from_mem_and_query_sizes(acl: ModuleType, dense_om: Path) -> None:
    om = dense_model()
    data = dense_om.read_bytes()
    host = np.frombuffer(data, np.uint8).copy()
    ptr = acl.util.numpy_to_ptr(host)
    assert acl.mdl.query_size(str(dense_om)) == (om.work_size, om.weight_size, 0)
    assert acl.mdl.query_size_from_mem(ptr, host.nbytes) == (om.work_size, om.weight_size, 0)
    model_id, ret = acl.mdl.load_from_mem(ptr, host.nbytes)
    assert ret == 0
    work, weight = _device(acl, om.work_size), _device(acl, om.weight_size)
    other, ret = acl.mdl.load_from_file_with_mem(str(dense_om), *work, *weight)
    assert ret == 0 and other != model_id
    small, ret = acl.mdl.load_from_file_with_mem(str(dense_om), work[0], om.work_size - 1, *weight)
    assert (small, ret) == (0, acl.ACL_ERROR_GE_PARAM_INVALID)


def test_bad_input_gets_documented_codes(acl: ModuleType, dense_om: Path, tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.om"
    truncated.write_bytes(dense_om.read_bytes()[:300])
    foreign = tmp_path / "foreign.om"
    foreign.write_bytes(b"IMOD" + bytes(1000))
    assert acl.mdl.load_from_file(str(truncated)) == (0, acl.ACL_ERROR_DESERIALIZE_MODEL)
    assert acl.mdl.load_from_file(str(foreign)) == (0, acl.ACL_ERROR_DESERIALIZE_MODEL)
    assert acl.mdl.load_from_file(str(tmp_path / "missing.om")) == (0, acl.ACL_ERROR_READ_MODEL_FAILURE)
    assert acl.mdl.query_size(str(truncated))[-1] == acl.ACL_ERROR_DESERIALIZE_MODEL
    model_id, _ = acl.mdl.load_from_file(str(dense_om))
    x = np.ones((M, K), np.float32)
    ptr, size = _device(acl, x)
    outs = [_device(acl, M * N * 4), _device(acl, M * N * 4)]
    inputs, outputs = _dataset(acl, [(ptr, size)]), _dataset(acl, outs)
    assert acl.mdl.execute(model_id, _dataset(acl, []), outputs) == acl.ACL_ERROR_MODEL_INPUT_NOT_MATCH
    assert acl.mdl.execute(model_id, inputs, _dataset(acl, outs[:1])) == acl.ACL_ERROR_MODEL_OUTPUT_NOT_MATCH
    short = _dataset(acl, [(ptr, size - 4)])
    assert acl.mdl.execute(model_id, short, outputs) == acl.ACL_ERROR_MODEL_INPUT_NOT_MATCH
    assert acl.mdl.execute(999, inputs, outputs) == acl.ACL_ERROR_INVALID_MODEL_ID
    assert acl.mdl.unload(model_id) == 0
    assert acl.mdl.execute(model_id, inputs, outputs) == acl.ACL_ERROR_INVALID_MODEL_ID
    assert acl.mdl.unload(model_id) == acl.ACL_ERROR_INVALID_MODEL_ID
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(desc, model_id) == acl.ACL_ERROR_INVALID_MODEL_ID
    assert acl.mdl.get_num_inputs(desc) == 0  # not filled
    assert acl.rt.get_device() == (0, 0)  # the runtime is still usable


def test_dynamic_batch(acl: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "dyn.om"
    om_format.save(dynamic_batch_model(), path)
    model_id, _ = acl.mdl.load_from_file(str(path))
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, model_id)
    assert acl.mdl.get_dynamic_batch(desc) == ({"batchCount": 3, "batch": [1, 2, 4]}, 0)
    assert acl.mdl.get_input_dims(desc, 0)[0]["dims"] == [-1, 8]
    assert acl.mdl.get_output_dims(desc, 0)[0]["dims"] == [4, 8]
    index, ret = acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data")
    assert (index, ret) == (1, 0)
    x = np.arange(32, dtype=np.float32).reshape(4, 8) - 16
    inputs = _dataset(acl, [_device(acl, x), _device(acl, 8)])
    out = _device(acl, 4 * 32)
    outputs = _dataset(acl, [out])
    assert acl.mdl.set_dynamic_batch_size(model_id, inputs, index, 3) == acl.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID
    assert acl.mdl.set_dynamic_batch_size(model_id, inputs, index, 2) == 0
    assert acl.mdl.execute(model_id, inputs, outputs) == 0
    assert acl.mdl.get_cur_output_dims(desc, 0)[0]["dims"] == [2, 8]
    np.testing.assert_array_equal(_read(acl, out[0], (2, 8)), np.maximum(x[:2], 0))


def test_static_model_refuses_dynamic_batch(acl: ModuleType, dense_om: Path) -> None:
    model_id, _ = acl.mdl.load_from_file(str(dense_om))
    dataset = _dataset(acl, [_device(acl, 8)])
    assert acl.mdl.set_dynamic_batch_size(model_id, dataset, 0, 1) == acl.ACL_ERROR_MODEL_NOT_DYNAMIC


def _arity(fn: object) -> int:
    params = inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
    return sum(p.default is inspect.Parameter.empty for p in params)


@pytest.mark.parametrize("name", sorted(n for n in mdl.__all__ if _arity(getattr(mdl, n)) > 0))
def test_wrong_argument_types_raise_type_error(acl: ModuleType, name: str) -> None:
    fn = getattr(acl.mdl, name)
    with pytest.raises(TypeError):
        fn(*[object()] * _arity(fn))
