"""ACL data type codes and their numpy dtypes (REFERENCE.md section 5)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

# ACL dtype code -> numpy dtype
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
}
NUMPY_TO_ACL: dict[np.dtype, int] = {dt: code for code, dt in ACL_TO_NUMPY.items()}
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def acl_code(dtype: np.typing.DTypeLike) -> int:
    """The ACL code of a numpy dtype; ValueError for dtypes the NPU has no code for."""
    dt = np.dtype(dtype)
    try:
        return NUMPY_TO_ACL[dt]
    except KeyError:
        raise ValueError(f"dtype {dt} has no ACL type code") from None


def numpy_dtype(code: int) -> np.dtype:
    """The numpy dtype of an ACL code; ValueError for unknown codes."""
    try:
        return ACL_TO_NUMPY[code]
    except KeyError:
        raise ValueError(f"unknown ACL dtype code {code}") from None
