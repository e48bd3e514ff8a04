"""Conformance: acl.util pointers and threads, float16 helpers, argument TypeErrors."""

from __future__ import annotations

import numpy as np
from _check import done, expect, ok, value

import acl

ACL_ERROR_INVALID_PARAM = 100000
NPY = {
    0: np.bool_,
    1: np.int8,
    2: np.uint8,
    3: np.int16,
    4: np.uint16,
    5: np.int32,
    6: np.uint32,
    7: np.int64,
    8: np.uint64,
    9: np.int64,
    10: np.uint64,
    11: np.float32,
    12: np.float64,
    23: np.float16,
}


def pointers() -> None:
    expect("bytes_to_ptr" in dir(acl.util), True, "samples test for bytes_to_ptr")
    data = bytes(range(16))
    ptr = acl.util.bytes_to_ptr(data)
    expect(acl.util.ptr_to_bytes(ptr, 16), data, "ptr_to_bytes reads the bytes object in place")
    buffer = bytearray(b"abcd")
    expect(acl.util.ptr_to_bytes(acl.util.bytes_to_ptr(buffer), 4), b"abcd", "bytearray")
    array = np.arange(12, dtype=np.int32).reshape(3, 4)
    expect(acl.util.ptr_to_bytes(acl.util.numpy_to_ptr(array), 8), array.tobytes()[:8], "numpy_to_ptr")
    for code, dtype in NPY.items():
        source = np.arange(6).astype(dtype)
        view = acl.util.ptr_to_numpy(acl.util.numpy_to_ptr(source), (2, 3), code)
        expect((view.dtype, view.shape), (np.dtype(dtype), (2, 3)), f"ptr_to_numpy type {code}")
        expect(bool(np.array_equal(view.ravel(), source)), True, f"ptr_to_numpy values {code}")
    host = value(acl.rt.malloc_host(64), "malloc_host")
    view = acl.util.ptr_to_numpy(host, (16,), 11)
    view[:] = 2.5
    expect(acl.util.ptr_to_numpy(host, [16], 11)[3], 2.5, "ptr_to_numpy shares memory")
    ok(acl.rt.free_host(host), "free_host")
    dev = value(acl.rt.malloc(64, 0), "malloc")
    for call in (lambda: acl.util.ptr_to_bytes(dev, 8), lambda: acl.util.ptr_to_numpy(0, (1,), 11)):
        try:
            call()
        except ValueError:
            pass
        else:
            expect("no error", "ValueError", "device / null pointers are refused")
    ok(acl.rt.free(dev), "free")


def threads() -> None:
    seen: list[object] = []
    tid, ret = acl.util.start_thread(seen.append, ["payload"])
    ok(ret, "start_thread")
    ok(acl.util.stop_thread(tid), "stop_thread joins")
    expect(seen, [["payload"]], "the function got the argument list")
    expect(acl.util.stop_thread(tid), ACL_ERROR_INVALID_PARAM, "unknown thread")


def float16() -> None:
    expect(acl.float_to_float16(1.0), 0x3C00, "float_to_float16")
    expect(acl.float16_to_float(0xC000), -2.0, "float16_to_float")
    expect(acl.float16_to_float(acl.float_to_float16(0.1)), float(np.float16(0.1)), "round trip")


def type_errors() -> None:
    calls = [
        lambda: acl.rt.malloc("64", 0),
        lambda: acl.rt.malloc(64.0, 0),
        lambda: acl.rt.set_device("0"),
        lambda: acl.rt.memcpy(None, 4, "src", 4, 1),
        lambda: acl.rt.launch_callback("not callable", None, 1, 0),
        lambda: acl.rt.create_stream_with_config(0, None),
        lambda: acl.util.bytes_to_ptr("text"),
        lambda: acl.util.numpy_to_ptr([1, 2]),
        lambda: acl.util.start_thread(42, []),
        lambda: acl.create_tensor_desc(0, "dims", 2),
        lambda: acl.op.set_attr_float(acl.op.create_attr(), "x", "1.0"),
        lambda: acl.float_to_float16("1"),
        lambda: acl.init(3),
    ]
    for index, call in enumerate(calls):
        try:
            call()
        except TypeError:
            continue
        expect(f"call {index} returned", "TypeError", "wrong argument types raise TypeError")


def main() -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    pointers()
    threads()
    float16()
    type_errors()
    expect(acl.rt.get_device(), (0, 0), "still usable after the TypeErrors")
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")
    done("util")


if __name__ == "__main__":
    main()
