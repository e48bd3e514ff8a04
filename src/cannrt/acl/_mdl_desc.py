"""acl.mdl model descriptions and datasets (aclmdlCreateDesc, aclmdlGetInputDims, aclmdlCreateDataset...).

As in pyACL, creators return the bare handle, plain getters a bare value (0 / "" when the
arguments are invalid), getters that can fail `(value, ret)`.
"""

from __future__ import annotations

from typing import Any

from cannrt.acl import constants as c
from cannrt.acl._buffers import BUFFERS
from cannrt.acl._mdl_tables import DATASETS, DESCS, Dataset, ModelDesc, dataset_of, desc_of, filled, model_of
from cannrt.acl._state import api, as_handle, as_int, as_str, fail
from cannrt.dtypes import reported_acl_type
from cannrt.errors import CannError, ErrorCode
from cannrt.om.model import IoDesc, OfflineModel

Dims = dict[str, Any]
NO_DIMS: Dims = {"name": "", "dimCount": 0, "dims": []}


# -- descriptions ---------------------------------------------------------------------------------
def create_desc() -> int:
    """A new, empty model description (aclmdlCreateDesc)."""
    return DESCS.add(ModelDesc())


@api()
def destroy_desc(model_desc: int) -> None:
    """Destroy a model description (aclmdlDestroyDesc)."""
    desc_of(model_desc)
    DESCS.remove(as_handle("model_desc", model_desc))


@api()
def get_desc(model_desc: int, model_id: int) -> None:
    """Fill a description from a loaded model (aclmdlGetDesc)."""
    desc = desc_of(model_desc)
    loaded = model_of(model_id)
    desc.model_id, desc.model = as_int("model_id", model_id), loaded.model


def _io(model_desc: object, index: object, outputs: bool) -> IoDesc:
    model = filled(model_desc)
    position = as_int("index", index)
    table = model.outputs if outputs else model.inputs
    if not 0 <= position < len(table):
        what = "output" if outputs else "input"
        raise fail(ErrorCode.INVALID_PARAM, f"{what} index {position} out of range: the model has {len(table)}")
    return table[position]


def _bare(getter: Any, model_desc: object, index: object, outputs: bool, default: Any) -> Any:
    try:
        return getter(_io(model_desc, index, outputs))
    except CannError:
        return default


def get_num_inputs(model_desc: int) -> int:
    """Inputs of the model (aclmdlGetNumInputs); 0 for a bad description."""
    try:
        return len(filled(model_desc).inputs)
    except CannError:
        return 0


def get_num_outputs(model_desc: int) -> int:
    """Outputs of the model (aclmdlGetNumOutputs); 0 for a bad description."""
    try:
        return len(filled(model_desc).outputs)
    except CannError:
        return 0


def get_input_size_by_index(model_desc: int, index: int) -> int:
    """Bytes of input `index` (the largest gear) (aclmdlGetInputSizeByIndex)."""
    return int(_bare(lambda io: io.size, model_desc, index, False, 0))


def get_output_size_by_index(model_desc: int, index: int) -> int:
    """Bytes of output `index`: prod(dims) x itemsize of the largest gear (aclmdlGetOutputSizeByIndex)."""
    return int(_bare(lambda io: io.size, model_desc, index, True, 0))


def get_input_name_by_index(model_desc: int, index: int) -> str:
    """Name of input `index` (aclmdlGetInputNameByIndex); "" when out of range."""
    return str(_bare(lambda io: io.name, model_desc, index, False, ""))


def get_output_name_by_index(model_desc: int, index: int) -> str:
    """Name of output `index` (aclmdlGetOutputNameByIndex)."""
    return str(_bare(lambda io: io.name, model_desc, index, True, ""))


def get_input_data_type(model_desc: int, index: int) -> int:
    """ACL data type of input `index` (aclmdlGetInputDataType); ACL_DT_UNDEFINED when out of range
    or of a type aclDataType has no code for (the graph engine's int2, uint2, uint4, FNUZ float8s)."""
    return int(_bare(lambda io: reported_acl_type(io.dtype), model_desc, index, False, c.ACL_DT_UNDEFINED))


def get_output_data_type(model_desc: int, index: int) -> int:
    """ACL data type of output `index` (aclmdlGetOutputDataType), as get_input_data_type reports it."""
    return int(_bare(lambda io: reported_acl_type(io.dtype), model_desc, index, True, c.ACL_DT_UNDEFINED))


def get_input_format(model_desc: int, index: int) -> int:
    """ACL format of input `index` (aclmdlGetInputFormat)."""
    return int(_bare(lambda io: io.format, model_desc, index, False, c.ACL_FORMAT_UNDEFINED))


def get_output_format(model_desc: int, index: int) -> int:
    """ACL format of output `index` (aclmdlGetOutputFormat)."""
    return int(_bare(lambda io: io.format, model_desc, index, True, c.ACL_FORMAT_UNDEFINED))


def _dims(name: str, shape: tuple[int, ...]) -> Dims:
    return {"name": name, "dimCount": len(shape), "dims": [int(d) for d in shape]}


def _largest_gear(model: OfflineModel) -> int:
    return max(range(len(model.gears)), key=lambda i: model.gears[i].batch)


@api(NO_DIMS)
def get_input_dims(model_desc: int, index: int) -> Dims:
    """(dims, ret): {"name", "dimCount", "dims"} of input `index`, -1 in dynamic positions (aclmdlGetInputDims)."""
    io = _io(model_desc, index, False)
    return _dims(io.name, io.shape)


get_input_dims_v2 = get_input_dims  # aclmdlGetInputDimsV2: the same for models without AIPP


@api(NO_DIMS)
def get_output_dims(model_desc: int, index: int) -> Dims:
    """(dims, ret) of output `index`; the largest gear of a dynamic model (aclmdlGetOutputDims)."""
    io = _io(model_desc, index, True)
    model = filled(model_desc)
    gear = model.gears[_largest_gear(model)]
    shape = gear.output_shapes[as_int("index", index)] if -1 in io.shape else io.shape
    return _dims(io.name, shape)


@api(NO_DIMS)
def get_cur_output_dims(model_desc: int, index: int) -> Dims:
    """(dims, ret) of output `index` in the gear the model runs now (aclmdlGetCurOutputDims)."""
    io = _io(model_desc, index, True)
    desc = desc_of(model_desc)
    gear = desc.model.gears[model_of(desc.model_id).gear] if desc.model else None
    shape = gear.output_shapes[as_int("index", index)] if gear is not None else io.shape
    return _dims(io.name, shape)


def _index_by_name(model_desc: object, name: object, outputs: bool) -> int:
    label = as_str("name", name)
    table = filled(model_desc).outputs if outputs else filled(model_desc).inputs
    for index, io in enumerate(table):
        if io.name == label:
            return index
    what = "output" if outputs else "input"
    raise fail(ErrorCode.INVALID_PARAM, f"the model has no {what} named {label!r}")


@api(0)
def get_input_index_by_name(model_desc: int, name: str) -> int:
    """(index, ret) of the input named `name`; a non-zero ret if there is none, e.g.
    "ascend_mbatch_shape_data" of a static model (aclmdlGetInputIndexByName)."""
    return _index_by_name(model_desc, name, False)


@api(0)
def get_output_index_by_name(model_desc: int, name: str) -> int:
    """(index, ret) of the output named `name` (aclmdlGetOutputIndexByName)."""
    return _index_by_name(model_desc, name, True)


@api({"batchCount": 0, "batch": []})
def get_dynamic_batch(model_desc: int) -> dict[str, Any]:
    """({"batchCount", "batch"}, ret): the gears of a --dynamic_batch_size model, none for a
    static one (aclmdlGetDynamicBatch)."""
    model = filled(model_desc)
    batches = [g.batch for g in model.gears if g.batch > 0]
    return {"batchCount": len(batches), "batch": batches}


# -- datasets -------------------------------------------------------------------------------------
def create_dataset() -> int:
    """A new, empty dataset (aclmdlCreateDataset)."""
    return DATASETS.add(Dataset())


@api()
def destroy_dataset(dataset: int) -> None:
    """Destroy a dataset, not its data buffers (aclmdlDestroyDataset)."""
    dataset_of(dataset)
    DATASETS.remove(as_handle("dataset", dataset))


@api(0)
def add_dataset_buffer(dataset: int, data_buffer: int) -> int:
    """(dataset, ret): append a data buffer (aclmdlAddDatasetBuffer)."""
    found = dataset_of(dataset)
    handle = as_handle("data_buffer", data_buffer)
    if BUFFERS.get(handle) is None:
        raise fail(ErrorCode.INVALID_PARAM, f"{data_buffer!r} is not a data buffer")
    found.buffers.append(handle)
    return as_handle("dataset", dataset)


def get_dataset_num_buffers(dataset: int) -> int:
    """Buffers in a dataset (aclmdlGetDatasetNumBuffers); 0 for a bad handle."""
    found = DATASETS.get(as_handle("dataset", dataset))
    return len(found.buffers) if found else 0


def get_dataset_buffer(dataset: int, index: int) -> int:
    """The data buffer at `index` (aclmdlGetDatasetBuffer); 0 when absent."""
    found, position = DATASETS.get(as_handle("dataset", dataset)), as_int("index", index)
    if found is None or not 0 <= position < len(found.buffers):
        return 0
    return found.buffers[position]
