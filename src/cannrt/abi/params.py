"""Kernel parameter blocks: what a kernel SQE's param address points at in device memory.

Layout: u16 argc, then per argument a tag byte and its payload (tensor: u8 dtype, u8 ndim,
u64 address, ndim x u64 dims; int: i64; float: f64).
"""

from __future__ import annotations

import math
import struct
from typing import NamedTuple

from cannrt.abi.sqe import DescriptorError
from cannrt.dtypes import numpy_dtype

ARG_TENSOR = 0
ARG_INT = 1
ARG_FLOAT = 2
PARAM_HEAD = struct.Struct("<H")
TENSOR_HEAD = struct.Struct("<BBBQ")
SCALAR_INT = struct.Struct("<Bq")
SCALAR_FLOAT = struct.Struct("<Bd")
MAX_PARAM_BYTES = 512


class TensorArg(NamedTuple):
    """A tensor argument as the kernel sees it: device address, ACL dtype code, shape."""

    address: int
    dtype: int
    shape: tuple[int, ...]


ParamValue = TensorArg | int | float


def tensor_nbytes(spec: TensorArg) -> int:
    """Bytes a tensor argument covers."""
    return math.prod(spec.shape) * numpy_dtype(spec.dtype).itemsize


def pack_params(args: list[ParamValue] | tuple[ParamValue, ...]) -> bytes:
    """Pack kernel arguments into a parameter block; DescriptorError past MAX_PARAM_BYTES."""
    parts = [PARAM_HEAD.pack(len(args))]
    for arg in args:
        if isinstance(arg, TensorArg):
            parts.append(TENSOR_HEAD.pack(ARG_TENSOR, arg.dtype, len(arg.shape), arg.address))
            parts.append(struct.pack(f"<{len(arg.shape)}Q", *arg.shape))
        elif isinstance(arg, bool | int):
            parts.append(SCALAR_INT.pack(ARG_INT, int(arg)))
        else:
            parts.append(SCALAR_FLOAT.pack(ARG_FLOAT, float(arg)))
    block = b"".join(parts)
    if len(block) > MAX_PARAM_BYTES:
        raise DescriptorError(f"parameter block of {len(block)} bytes exceeds {MAX_PARAM_BYTES}")
    return block


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
