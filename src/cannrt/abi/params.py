"""Kernel parameter blocks: what a kernel SQE's param address points at in device memory.

Layout: u16 argc, then per argument a tag byte and its payload (tensor: u8 dtype, u8 ndim,
u64 address, ndim x u64 dims; int: i64; float: f64).
"""

from __future__ import annotations

import math
import operator
import struct
from typing import NamedTuple

from cannrt.abi.sqe import DescriptorError
from cannrt.dtypes import ACL_TO_NUMPY, numpy_dtype

ARG_TENSOR = 0
ARG_INT = 1
ARG_FLOAT = 2
PARAM_HEAD = struct.Struct("<H")
TENSOR_HEAD = struct.Struct("<BBBQ")
SCALAR_INT = struct.Struct("<Bq")
SCALAR_FLOAT = struct.Struct("<Bd")
MAX_PARAM_BYTES = 512
INT64_MAX = (1 << 63) - 1  # a tensor's dims, element count and bytes fit int64 (size_t, int64 dims)
MAX_DIMS = 255  # the parameter block's u8 ndim


class TensorArg(NamedTuple):
    """A tensor argument as the kernel sees it: device address, ACL dtype code, shape."""

    address: int
    dtype: int
    shape: tuple[int, ...]


ParamValue = TensorArg | int | float


def tensor_nbytes(spec: TensorArg) -> int:
    """Bytes a tensor argument covers."""
    return math.prod(spec.shape) * numpy_dtype(spec.dtype).itemsize


def shape_nbytes(shape: object, itemsize: int) -> int:
    """Bytes of a tensor of shape: TypeError unless every dimension is an integer (bool is not),
    DescriptorError for a negative one, more than MAX_DIMS, or an element count or size past int64."""
    if isinstance(shape, str | bytes) or not hasattr(shape, "__iter__"):
        raise TypeError(f"a shape is a sequence of integers, not {type(shape).__name__}")
    dims = tuple(shape)
    for dim in dims:
        if isinstance(dim, bool) or not hasattr(type(dim), "__index__"):
            raise TypeError(f"shape dimensions are integers, got {type(dim).__name__} in {dims!r}")
    values = tuple(operator.index(dim) for dim in dims)
    if len(values) > MAX_DIMS:
        raise DescriptorError(f"shape has {len(values)} dimensions, at most {MAX_DIMS}")
    if any(dim < 0 for dim in values):
        raise DescriptorError(f"shape {values} has a negative dimension")
    count = math.prod(values)
    if count > INT64_MAX or count * itemsize > INT64_MAX:
        raise DescriptorError(f"shape {values}: {count} elements of {itemsize} bytes overflow int64 ({INT64_MAX})")
    return count * itemsize


def pack_params(args: list[ParamValue] | tuple[ParamValue, ...]) -> bytes:
    """Pack kernel arguments into a parameter block; DescriptorError past MAX_PARAM_BYTES."""
    parts = [PARAM_HEAD.pack(len(args))]
    for index, arg in enumerate(args):
        if isinstance(arg, TensorArg):
            _check_tensor(index, arg)
            parts.append(TENSOR_HEAD.pack(ARG_TENSOR, arg.dtype, len(arg.shape), arg.address))
            parts.append(struct.pack(f"<{len(arg.shape)}Q", *arg.shape))
        elif isinstance(arg, bool | int):
            if not -INT64_MAX - 1 <= arg <= INT64_MAX:
                raise DescriptorError(f"argument {index}: {arg} does not fit an int64 scalar")
            parts.append(SCALAR_INT.pack(ARG_INT, int(arg)))
        else:
            parts.append(SCALAR_FLOAT.pack(ARG_FLOAT, float(arg)))
    block = b"".join(parts)
    if len(block) > MAX_PARAM_BYTES:
        raise DescriptorError(f"parameter block of {len(block)} bytes exceeds {MAX_PARAM_BYTES}")
    return block


def _check_tensor(index: int, arg: TensorArg) -> None:
    """What the block's fields hold: a u64 address, a u8 dtype, at most 255 u64 dims."""
    if not 0 <= arg.address < 1 << 64 or not 0 <= arg.dtype < 256 or len(arg.shape) > MAX_DIMS:
        raise DescriptorError(
            f"argument {index}: address 0x{arg.address:x}, dtype {arg.dtype}, {len(arg.shape)} dims out of range"
        )
    for dim in arg.shape:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < 1 << 64:
            raise DescriptorError(f"argument {index}: dimension {dim!r} of {arg.shape} is not a u64")


def check_tensor_sizes(args: list[ParamValue] | tuple[ParamValue, ...]) -> None:
    """Every tensor argument's element count and bytes fit int64 (what a kernel may index);
    DescriptorError with the numbers otherwise."""
    for index, arg in enumerate(args):
        if isinstance(arg, TensorArg):
            itemsize = ACL_TO_NUMPY[arg.dtype].itemsize if arg.dtype in ACL_TO_NUMPY else 1
            try:
                shape_nbytes(arg.shape, itemsize)
            except (TypeError, DescriptorError) as exc:
                raise DescriptorError(f"argument {index}: {exc}") from None


def unpack_params(block: bytes) -> list[ParamValue]:
    """Decode a parameter block; DescriptorError on malformed bytes."""
    try:
        (argc,) = PARAM_HEAD.unpack_from(block, 0)
        offset = PARAM_HEAD.size
        args: list[ParamValue] = []
        for _ in range(argc):
            tag = block[offset]
            if tag == ARG_TENSOR:
                _, dtype, ndim, address = TENSOR_HEAD.unpack_from(block, offset)
                offset += TENSOR_HEAD.size
                shape = struct.unpack_from(f"<{ndim}Q", block, offset)
                offset += 8 * ndim
                args.append(TensorArg(address, dtype, shape))
            elif tag == ARG_INT:
                args.append(SCALAR_INT.unpack_from(block, offset)[1])
                offset += SCALAR_INT.size
            elif tag == ARG_FLOAT:
                args.append(SCALAR_FLOAT.unpack_from(block, offset)[1])
                offset += SCALAR_FLOAT.size
            else:
                raise DescriptorError(f"unknown argument tag {tag} at byte {offset}")
        return args
    except (struct.error, IndexError) as exc:
        raise DescriptorError(f"malformed parameter block: {exc}") from None
