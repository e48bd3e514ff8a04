"""acl.mdl load, execute and unload (aclmdlLoadFromFile, aclmdlQuerySize, aclmdlExecute[Async]...)."""

from __future__ import annotations

import ctypes

import numpy as np

from cannrt.abi import CopyKind
from cannrt.acl._mdl_tables import MODELS, add_model, dataset_buffers, model_of
from cannrt.acl._state import STATE, api, as_handle, as_int, as_str, current_context, fail, runtime, stream_of
from cannrt.errors import ErrorCode
from cannrt.om.model import OfflineModel
from cannrt.runtime import host_check, memory_ops
from cannrt.runtime.model import MBATCH_INPUT, LoadedModel
from cannrt.runtime.model_codes import MODEL_INPUT_NOT_MATCH, MODEL_NOT_DYNAMIC
from cannrt.runtime.model_file import model_from_bytes, read_model


def _from_memory(ptr: object, size: object) -> OfflineModel:
    address, nbytes = as_handle("model", ptr), as_int("model_size", size)
    runtime()
    if address == 0 or nbytes <= 0 or not host_check.readable(address, nbytes):
        raise fail(ErrorCode.INVALID_PARAM, f"model memory 0x{address:x}+{nbytes} is not readable host memory")
    return model_from_bytes(ctypes.string_at(address, nbytes), f"the {nbytes} bytes at 0x{address:x}")


def _from_file(path: object) -> OfflineModel:
    name = as_str("model_path", path)
    runtime()
    return read_model(name)


def _load(model: OfflineModel, work: tuple[int, int] = (0, 0), weight: tuple[int, int] = (0, 0)) -> int:
    return add_model(LoadedModel(current_context(), model, work, weight))


def _memory(name: str, ptr: object, size: object) -> tuple[int, int]:
    return as_handle(name, ptr), as_int(f"{name}_size", size)


@api(0)
def load_from_file(model_path: str) -> int:
    """(model_id, ret): load an .om file into device memory the runtime allocates (aclmdlLoadFromFile)."""
    return _load(_from_file(model_path))


@api(0)
def load_from_mem(model: int, model_size: int) -> int:
    """(model_id, ret): load a model held in host memory (aclmdlLoadFromMem)."""
    return _load(_from_memory(model, model_size))


@api(0)
def load_from_file_with_mem(model_path: str, work_ptr: int, work_size: int, weight_ptr: int, weight_size: int) -> int:
    """(model_id, ret): load into the caller's work and weight memory, refusing less than
    query_size (aclmdlLoadFromFileWithMem); a null pointer lets the runtime allocate that block."""
    work, weight = _memory("work", work_ptr, work_size), _memory("weight", weight_ptr, weight_size)
    return _load(_from_file(model_path), work, weight)


@api(0)
def load_from_mem_with_mem(
    model: int, model_size: int, work_ptr: int, work_size: int, weight_ptr: int, weight_size: int
) -> int:
    """(model_id, ret): load_from_mem into the caller's memory (aclmdlLoadFromMemWithMem)."""
    work, weight = _memory("work", work_ptr, work_size), _memory("weight", weight_ptr, weight_size)
    return _load(_from_memory(model, model_size), work, weight)


@api(0, 0)
def query_size(file_name: str) -> tuple[int, int]:
    """(work_size, weight_size, ret) a model needs (aclmdlQuerySize)."""
    model = _from_file(file_name)
    return model.work_size, model.weight_size


@api(0, 0)
def query_size_from_mem(model: int, model_size: int) -> tuple[int, int]:
    """(work_size, weight_size, ret) of a model in host memory (aclmdlQuerySizeFromMem)."""
    found = _from_memory(model, model_size)
    return found.work_size, found.weight_size


@api()
def execute(model_id: int, input: int, output: int) -> None:
    """Run a loaded model and wait for it (aclmdlExecute)."""
    loaded = model_of(model_id)
    inputs, outputs = dataset_buffers(input, "input"), dataset_buffers(output, "output")
    try:
        loaded.execute(inputs, outputs)
    finally:
        STATE.flush_dump()


@api()
def execute_async(model_id: int, input: int, output: int, stream: int) -> None:
    """Queue a loaded model's tasks on stream (aclmdlExecuteAsync); synchronize the stream to wait."""
    loaded = model_of(model_id)
    inputs, outputs = dataset_buffers(input, "input"), dataset_buffers(output, "output")
    loaded.execute(inputs, outputs, stream_of(as_handle("stream", stream), submit=True))


@api()
def unload(model_id: int) -> None:
    """Wait for the model's work, then free its streams, events and memory (aclmdlUnload)."""
    loaded = model_of(model_id)
    loaded.unload()
    MODELS.pop(as_int("model_id", model_id), None)


@api()
def set_dynamic_batch_size(model_id: int, dataset: int, index: int, batch_size: int) -> None:
    """Choose the gear of a --dynamic_batch_size model for the next executes; the batch is written
    into the dataset's "ascend_mbatch_shape_data" buffer at `index` (aclmdlSetDynamicBatchSize)."""
    loaded = model_of(model_id)
    buffers = dataset_buffers(dataset, "input")
    position, batch = as_int("index", index), as_int("batch_size", batch_size)
    inputs = loaded.model.inputs
    if not inputs or inputs[-1].name != MBATCH_INPUT or all(g.batch == 0 for g in loaded.model.gears):
        raise fail(MODEL_NOT_DYNAMIC, f"model {loaded.model.name!r} was not compiled with --dynamic_batch_size")
    if position != len(inputs) - 1 or position >= len(buffers):
        raise fail(MODEL_INPUT_NOT_MATCH, f"index {position} is not the {MBATCH_INPUT} input ({len(inputs) - 1})")
    loaded.set_batch(batch)
    address, size = buffers[position]
    value = np.array([batch], dtype=np.int64)
    if address and size >= value.nbytes:
        memory_ops.memcpy(loaded.context, address, size, value.ctypes.data, value.nbytes, CopyKind.HOST_TO_DEVICE)
