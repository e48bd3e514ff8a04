"""Data buffers and tensor descriptions (aclCreateDataBuffer, aclCreateTensorDesc and getters).

As in pyACL, the creators return the handle alone (0 when the arguments are invalid) and
destroy_data_buffer returns ret.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cannrt.abi.params import shape_nbytes
from cannrt.abi.sqe import DescriptorError
from cannrt.acl import constants as c
from cannrt.acl._handles import HandleTable, Kind
from cannrt.acl._state import api, as_handle, as_int, as_int_list, as_str, fail, on_finalize, record_error, require
from cannrt.dtypes import ACL_TO_NUMPY, ACL_TYPES, FORMAT_CODES
from cannrt.errors import ErrorCode

FORMATS = frozenset(FORMAT_CODES.values())


@dataclass
class DataBuffer:
    """aclDataBuffer: a pointer and a size in bytes."""

    address: int
    size: int


@dataclass
class TensorDesc:
    """aclTensorDesc: data type, shape and format of a tensor."""

    dtype: int
    shape: tuple[int, ...]
    format: int
    name: str = ""

    @property
    def element_count(self) -> int:
        """Number of elements (1 for a scalar); the shape was checked to fit int64."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes the tensor occupies."""
        return self.element_count * ACL_TO_NUMPY[self.dtype].itemsize


BUFFERS: HandleTable[DataBuffer] = HandleTable(Kind.DATA_BUFFER)
DESCS: HandleTable[TensorDesc] = HandleTable(Kind.TENSOR_DESC)
on_finalize(BUFFERS.clear)
on_finalize(DESCS.clear)


# -- data buffers -------------------------------------------------------------------------------
def create_data_buffer(data: int, size: int) -> int:
    """A data buffer over size bytes at data (aclCreateDataBuffer); (0, 0) describes an absent input."""
    address, nbytes = as_handle("data", data), as_int("size", size)
    if nbytes < 0 or (address == 0 and nbytes != 0):
        record_error(ErrorCode.INVALID_PARAM, f"create_data_buffer: bad pointer 0x{address:x} / size {nbytes}")
        return 0
    return BUFFERS.add(DataBuffer(address, nbytes))


def buffer_of(handle: object) -> DataBuffer:
    """The data buffer behind a handle; ACL_ERROR_INVALID_PARAM otherwise."""
    return require(BUFFERS, "data_buffer", handle, "a data buffer")


@api()
def destroy_data_buffer(data_buffer: int) -> None:
    """Destroy a data buffer, not the memory it points to (aclDestroyDataBuffer)."""
    buffer_of(data_buffer)
    BUFFERS.remove(as_handle("data_buffer", data_buffer))


@api()
def update_data_buffer(data_buffer: int, data: int, size: int) -> None:
    """Point a data buffer at other memory (aclUpdateDataBuffer)."""
    buffer = buffer_of(data_buffer)
    address, nbytes = as_handle("data", data), as_int("size", size)
    if nbytes < 0:
        raise fail(ErrorCode.INVALID_PARAM, f"negative size {nbytes}")
    buffer.address, buffer.size = address, nbytes


def get_data_buffer_addr(data_buffer: int) -> int:
    """The pointer of a data buffer, 0 if the handle is invalid (aclGetDataBufferAddr)."""
    buffer = BUFFERS.get(as_handle("data_buffer", data_buffer))
    return buffer.address if buffer else 0


def get_data_buffer_size_v2(data_buffer: int) -> int:
    """The size of a data buffer, 0 if the handle is invalid (aclGetDataBufferSizeV2)."""
    buffer = BUFFERS.get(as_handle("data_buffer", data_buffer))
    return buffer.size if buffer else 0


get_data_buffer_size = get_data_buffer_size_v2  # aclGetDataBufferSize (deprecated name)


# -- tensor descriptions ----------------------------------------------------------------------
def create_tensor_desc(data_type: int, dims: list[int] | tuple[int, ...], format: int) -> int:
    """A tensor description (aclCreateTensorDesc); 0 for an unknown type/format or negative dims."""
    dtype, shape, fmt = as_int("data_type", data_type), as_int_list("dims", dims), as_int("format", format)
    if dtype not in ACL_TYPES or fmt not in FORMATS or any(d < 0 for d in shape):
        record_error(ErrorCode.INVALID_PARAM, f"create_tensor_desc: type {dtype}, dims {shape}, format {fmt}")
        return 0
    try:
        shape_nbytes(shape, ACL_TO_NUMPY[dtype].itemsize)
    except DescriptorError as exc:  # an element count or size past int64
        record_error(ErrorCode.INVALID_PARAM, f"create_tensor_desc: {exc}")
        return 0
    return DESCS.add(TensorDesc(dtype, tuple(shape), fmt))


def desc_of(handle: object) -> TensorDesc:
    """The tensor description behind a handle; ACL_ERROR_INVALID_PARAM otherwise."""
    return require(DESCS, "desc", handle, "a tensor description")


def destroy_tensor_desc(desc: int) -> None:
    """Destroy a tensor description (aclDestroyTensorDesc)."""
    DESCS.remove(as_handle("desc", desc))


def get_tensor_desc_size(desc: int) -> int:
    """Bytes the described tensor occupies, 0 for an invalid handle (aclGetTensorDescSize)."""
    found = DESCS.get(as_handle("desc", desc))
    return found.nbytes if found else 0


def get_tensor_desc_element_count(desc: int) -> int:
    """Elements of the described tensor (aclGetTensorDescElementCount)."""
    found = DESCS.get(as_handle("desc", desc))
    return found.element_count if found else 0


def get_tensor_desc_type(desc: int) -> int:
    """Data type, ACL_DT_UNDEFINED for an invalid handle (aclGetTensorDescType)."""
    found = DESCS.get(as_handle("desc", desc))
    return found.dtype if found else c.ACL_DT_UNDEFINED


def get_tensor_desc_format(desc: int) -> int:
    """Format, ACL_FORMAT_UNDEFINED for an invalid handle (aclGetTensorDescFormat)."""
    found = DESCS.get(as_handle("desc", desc))
    return found.format if found else c.ACL_FORMAT_UNDEFINED


def get_tensor_desc_num_dims(desc: int) -> int:
    """Rank of the described tensor (aclGetTensorDescNumDims)."""
    found = DESCS.get(as_handle("desc", desc))
    return len(found.shape) if found else 0


@api(0)
def get_tensor_desc_dim_v2(desc: int, index: int) -> int:
    """(dim, ret): size of one dimension (aclGetTensorDescDimV2)."""
    found, position = desc_of(desc), as_int("index", index)
    if not 0 <= position < len(found.shape):
        raise fail(ErrorCode.INVALID_PARAM, f"dimension {position} out of range for rank {len(found.shape)}")
    return found.shape[position]


def set_tensor_desc_name(desc: int, name: str) -> None:
    """Name a tensor description (aclSetTensorDescName)."""
    found, label = DESCS.get(as_handle("desc", desc)), as_str("name", name)
    if found is not None:
        found.name = label


def get_tensor_desc_name(desc: int) -> str:
    """Name of a tensor description, '' if unset (aclGetTensorDescName)."""
    found = DESCS.get(as_handle("desc", desc))
    return found.name if found else ""
