"""cannrt.acl: a pyACL-compatible facade over the cannrt runtime.

Programs written for pyACL run unchanged through `cannrt exec program.py`, where `import acl`
resolves to this package. Conventions are pyACL's: handles and pointers are ints, calls with
outputs return `(value, ..., ret)`, calls without return `ret`, runtime errors are error codes
(TypeError only for wrong argument types). docs/acl.md lists every call.
"""

from __future__ import annotations

import numpy as np

from cannrt.acl import constants, mdl, media, op, prof, rt, util
from cannrt.acl._buffers import (
    create_data_buffer,
    create_tensor_desc,
    destroy_data_buffer,
    destroy_tensor_desc,
    get_data_buffer_addr,
    get_data_buffer_size,
    get_data_buffer_size_v2,
    get_tensor_desc_dim_v2,
    get_tensor_desc_element_count,
    get_tensor_desc_format,
    get_tensor_desc_name,
    get_tensor_desc_num_dims,
    get_tensor_desc_size,
    get_tensor_desc_type,
    set_tensor_desc_name,
    update_data_buffer,
)
from cannrt.acl._core import finalize, get_recent_err_msg, get_soc_name, get_version, init
from cannrt.acl._state import as_int
from cannrt.acl.constants import *  # noqa: F403  (pyACL programs may spell constants as acl.ACL_...)
from cannrt.dtypes import acl_type_size


def float16_to_float(value: int) -> float:
    """The float value of float16 bits (aclFloat16ToFloat)."""
    bits = as_int("value", value) & 0xFFFF
    return float(np.array(bits, dtype=np.uint16).view(np.float16))


def float_to_float16(value: float) -> int:
    """The float16 bits nearest to a float (aclFloatToFloat16)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"value must be a float, not {type(value).__name__}")
    return int(np.array(value, dtype=np.float16).view(np.uint16))


def get_data_type_size(data_type: int) -> int:
    """Bytes of one element of an ACL data type, 0 if unknown or ACL_STRING (aclDataTypeSize); 1 for
    ACL_INT4 and ACL_FLOAT4_E2M1, which the device stores one element per byte."""
    return acl_type_size(as_int("data_type", data_type))


__all__ = [
    "constants",
    "create_data_buffer",
    "create_tensor_desc",
    "destroy_data_buffer",
    "destroy_tensor_desc",
    "finalize",
    "float16_to_float",
    "float_to_float16",
    "get_data_buffer_addr",
    "get_data_buffer_size",
    "get_data_buffer_size_v2",
    "get_data_type_size",
    "get_recent_err_msg",
    "get_soc_name",
    "get_tensor_desc_dim_v2",
    "get_tensor_desc_element_count",
    "get_tensor_desc_format",
    "get_tensor_desc_name",
    "get_tensor_desc_num_dims",
    "get_tensor_desc_size",
    "get_tensor_desc_type",
    "get_version",
    "init",
    "mdl",
    "media",
    "op",
    "prof",
    "rt",
    "set_tensor_desc_name",
    "update_data_buffer",
    "util",
]
