"""Conformance: the overflow status of a device (aclrtGetOverflowStatus / aclrtResetOverflowStatus)
after an fp16 Mul overflows, and saturation mode (aclrtSetDeviceSatMode / aclrtGetDeviceSatMode)."""

from __future__ import annotations

import numpy as np
from _check import done, expect, ok, value

import acl

ACL_FLOAT16, ACL_FORMAT_ND = 1, 2
ACL_RT_OVERFLOW_MODE_SATURATION, ACL_RT_OVERFLOW_MODE_INFNAN = 0, 1
H2D, D2H = 1, 2


def mul(stream: int, x: int, y: int, count: int) -> list[int]:
    """Enqueue y = x * x in fp16; returns the data buffers to destroy."""
    desc = acl.create_tensor_desc(ACL_FLOAT16, [count], ACL_FORMAT_ND)
    nbytes = acl.get_tensor_desc_size(desc)
    buffers = [acl.create_data_buffer(x, nbytes), acl.create_data_buffer(y, nbytes)]
    ok(acl.op.execute_v2("Mul", [desc, desc], [buffers[0], buffers[0]], [desc], buffers[1:], 0, stream), "Mul")
    acl.destroy_tensor_desc(desc)
    return buffers


def status_word(stream: int, status: int) -> int:
    """The first 8 of the 64 status bytes, copied out by aclrtGetOverflowStatus."""
    ok(acl.rt.get_overflow_status(status, 64, stream), "get_overflow_status")
    host = np.zeros(8, np.uint64)
    ok(acl.rt.memcpy(acl.util.numpy_to_ptr(host), 64, status, 64, D2H), "read the status")
    return int(host[0])


def main() -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    stream = value(acl.rt.create_stream(), "create_stream")
    expect(acl.rt.get_device_sat_mode(), (ACL_RT_OVERFLOW_MODE_INFNAN, 0), "inf/nan mode by default")
    values = np.full(16, 300.0, np.float16)  # 300 * 300 = 90000 > 65504
    x = value(acl.rt.malloc(values.nbytes, 0), "malloc x")
    y = value(acl.rt.malloc(values.nbytes, 0), "malloc y")
    status = value(acl.rt.malloc(64, 0), "malloc status")
    ok(acl.rt.memcpy(x, values.nbytes, acl.util.numpy_to_ptr(values), values.nbytes, H2D), "upload")
    ok(acl.rt.reset_overflow_status(stream), "reset_overflow_status")
    expect(status_word(stream, status), 0, "no overflow yet")
    buffers = mul(stream, x, y, 16)
    expect(status_word(stream, status) != 0, True, "the overflow is in the status")
    out = np.zeros(16, np.float16)
    ok(acl.rt.memcpy(acl.util.numpy_to_ptr(out), out.nbytes, y, out.nbytes, D2H), "download")
    expect(bool(np.isinf(out).all()), True, "inf/nan mode gives inf")
    ok(acl.rt.reset_overflow_status(stream), "reset_overflow_status again")
    expect(status_word(stream, status), 0, "the status is clear")
    ok(acl.rt.set_device_sat_mode(ACL_RT_OVERFLOW_MODE_SATURATION), "set_device_sat_mode")
    expect(acl.rt.get_device_sat_mode(), (ACL_RT_OVERFLOW_MODE_SATURATION, 0), "saturation mode")
    buffers += mul(stream, x, y, 16)
    ok(acl.rt.synchronize_stream(stream), "synchronize")
    ok(acl.rt.memcpy(acl.util.numpy_to_ptr(out), out.nbytes, y, out.nbytes, D2H), "download")
    expect(out.tolist(), [65504.0] * 16, "saturation gives the largest fp16")
    ok(acl.rt.set_device_sat_mode(ACL_RT_OVERFLOW_MODE_INFNAN), "back to inf/nan")
    expect(acl.rt.get_overflow_status(status, 8, stream), 107000, "64 bytes are needed")
    for buffer in buffers:
        ok(acl.destroy_data_buffer(buffer), "destroy_data_buffer")
    for pointer in (x, y, status):
        ok(acl.rt.free(pointer), "free")
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")
    done("overflow")


if __name__ == "__main__":
    main()
