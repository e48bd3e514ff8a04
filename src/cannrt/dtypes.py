"""Tensor data type codes and their numpy dtypes (REFERENCE.md section 5), and the type and format
names of tensor descriptions (atc --singleop's ops.json, acl.op.set_model_dir): one table for both.

One table holds every type a tensor on the simulated NPU can have, keyed by its type code:

- aclDataType codes (ACL_FLOAT = 0 ... ACL_FLOAT4_E2M1 = 40): what acl reports and takes.
- ge::DataType codes aclDataType lacks: DT_INT2 = 31, DT_UINT2 = 32 (GE's enum; aclDataType skips
  31 and 32).
- Graph-engine internal codes (GE_INTERNAL_BASE + the ONNX element type) for ONNX types neither enum
  names: float8 E4M3FNUZ and E5M2FNUZ, uint4. The graph engine, the .om format and the kernels carry
  them; acl never sees these codes: acl.mdl reports ACL_DT_UNDEFINED (-1) for a model input or output
  of such a type (`reported_acl_type`), as CANN does for a type it has no aclDataType for.

Device storage: one element per byte for every 8-bit and sub-byte type (int4, uint4, int2, uint2,
float4 E2M1 each occupy the low bits of a byte), as ml_dtypes holds them in numpy and as CANN's
aclDataTypeSize counts ACL_INT4 (1 byte). ONNX packs 4-bit and 2-bit tensors in its files; the
import unpacks them (onnx.numpy_helper), and host <-> device copies, dataset buffer sizes and .om
weights all use prod(shape) x itemsize with itemsize 1. See docs/dtypes.md.

ACL_STRING (13) has no device storage here (numpy's object strings hold host pointers): no string
tensor reaches the device, and aclDataTypeSize(ACL_STRING) is 0 as in CANN.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

GE_INTERNAL_BASE = 200
"""Codes from here on are the graph engine's own (200 + the ONNX element type, still a byte, as a
kernel parameter block holds a dtype); acl reports -1 for them."""
ACL_DT_UNDEFINED = -1

# type code -> numpy dtype
ACL_TO_NUMPY: dict[int, np.dtype] = {
    0: np.dtype(np.float32),
    1: np.dtype(np.float16),
    2: np.dtype(np.int8),
    3: np.dtype(np.int32),
    4: np.dtype(np.uint8),
    6: np.dtype(np.int16),
    7: np.dtype(np.uint16),
    8: np.dtype(np.uint32),
    9: np.dtype(np.int64),
    10: np.dtype(np.uint64),
    11: np.dtype(np.float64),
    12: np.dtype(np.bool_),
    27: np.dtype(ml_dtypes.bfloat16),
    29: np.dtype(ml_dtypes.int4),  # ACL_INT4
    31: np.dtype(ml_dtypes.int2),  # ge DT_INT2
    32: np.dtype(ml_dtypes.uint2),  # ge DT_UINT2
    35: np.dtype(ml_dtypes.float8_e5m2),  # ACL_FLOAT8_E5M2
    36: np.dtype(ml_dtypes.float8_e4m3fn),  # ACL_FLOAT8_E4M3FN
    37: np.dtype(ml_dtypes.float8_e8m0fnu),  # ACL_FLOAT8_E8M0
    40: np.dtype(ml_dtypes.float4_e2m1fn),  # ACL_FLOAT4_E2M1
    GE_INTERNAL_BASE + 18: np.dtype(ml_dtypes.float8_e4m3fnuz),
    GE_INTERNAL_BASE + 20: np.dtype(ml_dtypes.float8_e5m2fnuz),
    GE_INTERNAL_BASE + 21: np.dtype(ml_dtypes.uint4),
}
NUMPY_TO_ACL: dict[np.dtype, int] = {dt: code for code, dt in ACL_TO_NUMPY.items()}
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
ACL_CODES = frozenset({-1, 0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 27, 29, 30, *range(33, 42)})
"""Every aclDataType value (aclDataType.md): what acl may report."""
FLOAT8_MAX: dict[np.dtype, float] = {
    np.dtype(t): float(ml_dtypes.finfo(t).max)  # type: ignore[no-untyped-call]
    for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz)
}
"""The float8 types ONNX Cast saturates to (its saturate attribute) and their largest finite values."""
FLOAT8_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
NPY_WIDENED: dict[np.dtype, np.dtype] = {
    dt: np.dtype(np.int8 if dt.name.startswith("int") else np.uint8 if dt.name.startswith("uint") else np.float32)
    for dt in ACL_TO_NUMPY.values()
    if dt.num >= 256  # ml_dtypes' user-defined types
}
"""The ml_dtypes types a .npy file cannot name, and the numpy type that holds each exactly."""
ACL_TYPES: dict[int, np.dtype] = {code: dt for code, dt in ACL_TO_NUMPY.items() if code in ACL_CODES}
"""The aclDataTypes the device stores: what acl's tensor descriptions may name."""

# ops.json "type" names (GE's lower-case type names), the first of each code its canonical name
TYPE_NAMES: dict[str, int] = {
    "float": 0, "float32": 0, "float16": 1, "int8": 2, "int32": 3, "uint8": 4, "int16": 6, "uint16": 7,
    "uint32": 8, "int64": 9, "uint64": 10, "double": 11, "float64": 11, "bool": 12, "bfloat16": 27,
    "int4": 29, "float8_e5m2": 35, "float8_e4m3fn": 36, "float8_e8m0": 37, "float4_e2m1": 40,
}  # fmt: skip
CANONICAL_TYPE_NAMES: dict[int, str] = {code: name for name, code in reversed(TYPE_NAMES.items())}
# aclFormat names and codes (aclFormat.md) of the plain and 5-D layouts cannrt's tensors take
FORMAT_CODES: dict[str, int] = {"NCHW": 0, "NHWC": 1, "ND": 2, "NC1HWC0": 3, "FRACTAL_Z": 4, "NDHWC": 27, "NCDHW": 30}
PLAIN_FORMATS: dict[str, int] = {n: FORMAT_CODES[n] for n in ("ND", "NCHW", "NHWC", "NCDHW", "NDHWC")}
"""Formats whose data is the row-major array itself (no C0 tiling): what kernels take as they are."""


def acl_code(dtype: np.typing.DTypeLike) -> int:
    """The type code of a numpy dtype; ValueError for dtypes the NPU has no code for."""
    dt = np.dtype(dtype)
    try:
        return NUMPY_TO_ACL[dt]
    except KeyError:
        raise ValueError(f"dtype {dt} has no ACL type code") from None


def numpy_dtype(code: int) -> np.dtype:
    """The numpy dtype of a type code; ValueError for unknown codes."""
    try:
        return ACL_TO_NUMPY[code]
    except KeyError:
        raise ValueError(f"unknown ACL dtype code {code}") from None


def reported_acl_type(code: int) -> int:
    """What acl reports for a type code: the code itself if aclDataType has it, else ACL_DT_UNDEFINED."""
    return code if code in ACL_CODES else ACL_DT_UNDEFINED


def acl_type_size(code: int) -> int:
    """Bytes per element of an aclDataType (aclDataTypeSize): 0 for ACL_STRING and codes acl does
    not know, 1 for the 8-bit and sub-byte types (stored one per byte)."""
    dtype = ACL_TYPES.get(code)
    return dtype.itemsize if dtype is not None else 0
