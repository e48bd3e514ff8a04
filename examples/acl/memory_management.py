"""Memory management, pyACL style: device and pinned host memory, memset, synchronous and
asynchronous copies, and get_mem_info.

Run it on the simulated NPU with:  cannrt exec examples/acl/memory_management.py
"""

from __future__ import annotations

import numpy as np

import acl

# pyACL samples define the constants they use
ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_DDR_MEM = 0
ACL_HBM_MEM = 1
NPY_FLOAT32 = 11
DEVICE_ID = 0


def check_ret(message: str, ret: int) -> None:
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def show_mem_info(label: str) -> None:
    free, total, ret = acl.rt.get_mem_info(ACL_HBM_MEM)
    check_ret("acl.rt.get_mem_info", ret)
    print(f"[{label}] HBM free {free / 2**30:.3f} GiB of {total / 2**30:.0f} GiB")


def main() -> None:
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    context, ret = acl.rt.create_context(DEVICE_ID)
    check_ret("acl.rt.create_context", ret)
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)

    data = np.arange(1 << 20, dtype=np.float32)  # 4 MiB
    size = data.nbytes
    show_mem_info("start")

    # device memory, and pinned host memory initialised with memset
    dev_a, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    dev_b, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    host, ret = acl.rt.malloc_host(size)
    check_ret("acl.rt.malloc_host", ret)
    check_ret("acl.rt.memset (host)", acl.rt.memset(host, size, 0, size))
    show_mem_info("after malloc")

    # synchronous copies: numpy -> device -> device -> bytes object
    if "bytes_to_ptr" in dir(acl.util):
        src_bytes = data.tobytes()
        src_ptr = acl.util.bytes_to_ptr(src_bytes)
    else:
        src_ptr = acl.util.numpy_to_ptr(data)
    check_ret("memcpy H2D", acl.rt.memcpy(dev_a, size, src_ptr, size, ACL_MEMCPY_HOST_TO_DEVICE))
    check_ret("memcpy D2D", acl.rt.memcpy(dev_b, size, dev_a, size, ACL_MEMCPY_DEVICE_TO_DEVICE))
    result = bytes(size)
    check_ret("memcpy D2H", acl.rt.memcpy(acl.util.bytes_to_ptr(result), size, dev_b, size, ACL_MEMCPY_DEVICE_TO_HOST))
    assert np.array_equal(np.frombuffer(result, dtype=np.float32), data)
    print("sync copies: host -> device -> device -> host round trip is exact")

    # asynchronous copies on a stream: zero dev_a, copy it to pinned host memory, wait
    check_ret("memset_async", acl.rt.memset_async(dev_a, size, 0, size, stream))
    check_ret("memcpy_async", acl.rt.memcpy_async(host, size, dev_a, size, ACL_MEMCPY_DEVICE_TO_HOST, stream))
    check_ret("synchronize_stream", acl.rt.synchronize_stream(stream))
    host_view = acl.util.ptr_to_numpy(host, (size // 4,), NPY_FLOAT32)
    print(f"async copies: device memset to 0 arrived on the host (sum {float(host_view.sum())})")

    ddr_free, ddr_total, ret = acl.rt.get_mem_info(ACL_DDR_MEM)
    check_ret("acl.rt.get_mem_info DDR", ret)
    print(f"host DDR free {ddr_free / 2**30:.1f} GiB of {ddr_total / 2**30:.1f} GiB")

    for ptr in (dev_a, dev_b):
        check_ret("acl.rt.free", acl.rt.free(ptr))
    check_ret("acl.rt.free_host", acl.rt.free_host(host))
    show_mem_info("after free")
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.destroy_context", acl.rt.destroy_context(context))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print("done")


if __name__ == "__main__":
    main()
