"""Every device dtype (docs/dtypes.md) survives a host -> device -> host round trip bit for bit, sync and async."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

from cannrt.abi import CopyKind
from cannrt.dtypes import ACL_TO_NUMPY, BFLOAT16, acl_code, numpy_dtype
from cannrt.runtime import memory_ops

if TYPE_CHECKING:
    from conftest import Npu

CODES = sorted(ACL_TO_NUMPY)
SHAPE = (7, 33)  # odd sizes: nothing is a multiple of the 32-byte padding


def _sample(code: int) -> np.ndarray:
    """Arbitrary bit patterns of the dtype (NaN payloads, infinities, denormals included)."""
    dtype = ACL_TO_NUMPY[code]
    rng = np.random.default_rng(code)
    if dtype == np.bool_:
        return rng.integers(0, 2, SHAPE).astype(np.bool_)
    raw = rng.integers(0, 256, int(np.prod(SHAPE)) * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(SHAPE)


def test_the_dtype_table_is_the_acl_one() -> None:
    assert {code: str(dt) for code, dt in ACL_TO_NUMPY.items()} == {
        0: "float32",
        1: "float16",
        2: "int8",
        3: "int32",
        4: "uint8",
        6: "int16",
        7: "uint16",
        8: "uint32",
        9: "int64",
        10: "uint64",
        11: "float64",
        12: "bool",
        27: "bfloat16",
        29: "int4",
        31: "int2",  # ge DT_INT2 (aclDataType has no 31)
        32: "uint2",  # ge DT_UINT2
        35: "float8_e5m2",
        36: "float8_e4m3fn",
        37: "float8_e8m0fnu",
        40: "float4_e2m1fn",
        218: "float8_e4m3fnuz",  # the graph engine's own codes: 200 + the ONNX element type
        220: "float8_e5m2fnuz",
        221: "uint4",
    }
    assert ACL_TO_NUMPY[27] == BFLOAT16
    for code in CODES:
        assert acl_code(numpy_dtype(code)) == code
    with pytest.raises(ValueError):
        numpy_dtype(5)
    with pytest.raises(ValueError):
        acl_code(np.complex64)


@pytest.mark.parametrize("code", CODES, ids=lambda c: str(ACL_TO_NUMPY[c]))
def test_a_synchronous_round_trip_keeps_every_bit(npu: Npu, code: int) -> None:
    ctx = npu.ctx()
    data = _sample(code)
    va = memory_ops.malloc(ctx, data.nbytes)
    memory_ops.memcpy(ctx, va, data.nbytes, data.ctypes.data, data.nbytes, CopyKind.HOST_TO_DEVICE)
    back = np.empty_like(data)
    memory_ops.memcpy(ctx, back.ctypes.data, back.nbytes, va, data.nbytes, CopyKind.DEVICE_TO_HOST)
    assert back.dtype == data.dtype and back.tobytes() == data.tobytes()


@pytest.mark.parametrize("code", CODES, ids=lambda c: str(ACL_TO_NUMPY[c]))
def test_an_asynchronous_round_trip_keeps_every_bit(npu: Npu, code: int) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    data = _sample(code)
    va = memory_ops.malloc(ctx, data.nbytes)
    back = np.empty_like(data)
    memory_ops.memcpy_async(ctx, va, data.nbytes, data.ctypes.data, data.nbytes, CopyKind.HOST_TO_DEVICE, stream)
    memory_ops.memcpy_async(ctx, back.ctypes.data, back.nbytes, va, data.nbytes, CopyKind.DEVICE_TO_HOST, stream)
    stream.synchronize(timeout_ms=100)
    assert back.tobytes() == data.tobytes()


@pytest.mark.parametrize("code", CODES, ids=lambda c: str(ACL_TO_NUMPY[c]))
def test_a_kernel_sees_each_dtype_through_its_tensor_argument(npu: Npu, code: int) -> None:
    """cast to the same dtype copies element by element through typed device views."""
    ctx = npu.ctx()
    stream = ctx.create_stream()
    data = _sample(code)
    src, dst = npu.upload(data), memory_ops.malloc(ctx, data.nbytes)
    npu.launch(stream, "cast", npu.tensor(src, SHAPE, data.dtype), npu.tensor(dst, SHAPE, data.dtype))
    stream.synchronize(timeout_ms=100)
    assert npu.download(dst, SHAPE, data.dtype).tobytes() == data.tobytes()
