"""Reading an offline model from a file or from host memory (the first step of aclmdlLoadFromFile /
aclmdlLoadFromMem / aclmdlQuerySize): the .om bytes decoded by cannrt.om.format."""

from __future__ import annotations

import os

from cannrt.errors import CannError
from cannrt.om import format as om_format
from cannrt.om.model import OfflineModel
from cannrt.runtime.model_codes import DESERIALIZE_MODEL, READ_MODEL_FAILURE


def model_from_bytes(data: bytes, where: str) -> OfflineModel:
    """The model in data; DESERIALIZE_MODEL for a truncated, foreign or newer file."""
    try:
        return om_format.loads(data)
    except om_format.OmFormatError as exc:
        raise CannError(DESERIALIZE_MODEL, f"{where} is not a model cannrt can load: {exc}") from None


def read_model(path: str | os.PathLike[str]) -> OfflineModel:
    """The model in the file at path; READ_MODEL_FAILURE if it cannot be read."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as exc:
        raise CannError(READ_MODEL_FAILURE, f"cannot read model file {os.fspath(path)!r}: {exc.strerror}") from None
    return model_from_bytes(data, repr(os.fspath(path)))
