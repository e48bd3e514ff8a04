"""What acl.mdl keeps between calls: loaded models by id, model descriptions, datasets."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field

from cannrt.acl._buffers import BUFFERS, DataBuffer
from cannrt.acl._handles import HandleTable, Kind
from cannrt.acl._state import as_handle, as_int, fail, on_finalize, require, runtime
from cannrt.errors import ErrorCode
from cannrt.om.model import OfflineModel
from cannrt.runtime.model import LoadedModel
from cannrt.runtime.model_codes import INVALID_MODEL_ID


@dataclass
class ModelDesc:
    """aclmdlDesc: filled by get_desc from a loaded model."""

    model_id: int = 0
    model: OfflineModel | None = None


@dataclass
class Dataset:
    """aclmdlDataset: data buffer handles, in input or output order."""

    buffers: list[int] = field(default_factory=list)


DESCS: HandleTable[ModelDesc] = HandleTable(Kind.MODEL_DESC)
DATASETS: HandleTable[Dataset] = HandleTable(Kind.DATASET)
MODELS: dict[int, LoadedModel] = {}
_ids = itertools.count(1)
_lock = threading.Lock()


def add_model(model: LoadedModel) -> int:
    """A new model id (1, 2, ...) for a loaded model."""
    with _lock:
        model_id = next(_ids)
        MODELS[model_id] = model
        return model_id


def model_of(model_id: object) -> LoadedModel:
    """The loaded model behind an id; ACL_ERROR_INVALID_MODEL_ID for an unknown or unloaded one."""
    number = as_int("model_id", model_id)
    runtime()
    model = MODELS.get(number)
    if model is None or model.unloaded:
        raise fail(INVALID_MODEL_ID, f"model id {number} is not a loaded model")
    return model


def desc_of(desc: object) -> ModelDesc:
    """A model description; INVALID_PARAM for a bad handle."""
    return require(DESCS, "model_desc", desc, "a model description from create_desc")


def filled(desc: object) -> OfflineModel:
    """The model a description describes; INVALID_PARAM before get_desc."""
    found = desc_of(desc)
    if found.model is None:
        raise fail(ErrorCode.INVALID_PARAM, "the model description was not filled by get_desc")
    return found.model


def dataset_of(dataset: object) -> Dataset:
    """A dataset; INVALID_PARAM for a bad handle."""
    return require(DATASETS, "dataset", dataset, "a dataset from create_dataset")


def dataset_buffers(dataset: object, what: str) -> list[tuple[int, int]]:
    """(address, size) of each buffer of a dataset, read now (update_data_buffer may move them)."""
    found = dataset_of(as_handle(what, dataset))
    pairs = []
    for index, handle in enumerate(found.buffers):
        buffer: DataBuffer | None = BUFFERS.get(handle)
        if buffer is None:
            raise fail(ErrorCode.INVALID_PARAM, f"{what} buffer {index} was destroyed")
        pairs.append((buffer.address, buffer.size))
    return pairs


@on_finalize
def _forget_all() -> None:
    """Unload every model still loaded, drop descriptions and datasets (acl.finalize)."""
    for model in list(MODELS.values()):
        if not model.unloaded:
            try:
                model.unload()
            except Exception:  # the device may be reset already; finalize goes on
                model.unloaded = True
    MODELS.clear()
    DESCS.clear()
    DATASETS.clear()
