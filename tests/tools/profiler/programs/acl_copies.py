"""An unmodified pyACL program: uploads, an event between two streams, a download; exits with the
code given as its first argument (run with `cannrt exec acl_copies.py CODE`)."""

from __future__ import annotations

import sys

import numpy as np

import acl

H2D, D2H, D2D = 1, 2, 3


def check(ret: int) -> None:
    if ret != 0:
        raise RuntimeError(f"ret={ret}: {acl.get_recent_err_msg()}")


def main() -> int:
    check(acl.init())
    check(acl.rt.set_device(0))
    first, ret = acl.rt.create_stream()
    check(ret)
    second, ret = acl.rt.create_stream()
    check(ret)
    data = np.arange(1 << 18, dtype=np.float32)
    size = data.nbytes
    src, ret = acl.rt.malloc(size, 0)
    check(ret)
    dst, ret = acl.rt.malloc(size, 0)
    check(ret)
    event, ret = acl.rt.create_event()
    check(ret)
    check(acl.rt.memcpy_async(src, size, acl.util.numpy_to_ptr(data), size, H2D, first))
    check(acl.rt.record_event(event, first))
    check(acl.rt.stream_wait_event(second, event))
    check(acl.rt.memcpy_async(dst, size, src, size, D2D, second))
    check(acl.rt.synchronize_stream(second))
    out = np.empty_like(data)
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(out), size, dst, size, D2H))
    print("copied:", bool(np.array_equal(out, data)))
    check(acl.rt.destroy_event(event))
    for pointer in (src, dst):
        check(acl.rt.free(pointer))
    for stream in (first, second):
        check(acl.rt.destroy_stream(stream))
    check(acl.rt.reset_device(0))
    check(acl.finalize())
    return int(sys.argv[1]) if len(sys.argv) > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
