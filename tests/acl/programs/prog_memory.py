"""Conformance: device and host memory, memset, sync/async/2-D copies, mem info, DVPP memory."""

from __future__ import annotations

import numpy as np
from _check import done, expect, ok, value

import acl

ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_STREAM_CONTEXT = 107003
ACL_ERROR_RT_INVALID_MALLOC_TYPE = 107018
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_HUGE_ONLY, ACL_MEM_MALLOC_NORMAL_ONLY = 0, 1, 2
H2H, H2D, D2H, D2D, DEFAULT = 0, 1, 2, 3, 4
ACL_DDR_MEM, ACL_HBM_MEM, ACL_HBM_MEM_HUGE, ACL_HBM_MEM_NORMAL = 0, 1, 4, 5
HBM = 64 << 30


def mallocs() -> None:
    for policy in range(8):
        ptr = value(acl.rt.malloc(1000, policy), f"malloc policy {policy}")
        expect(ptr % 64, 0, "64-byte aligned start")
        ok(acl.rt.free(ptr), "free")
    free_before, total = value(acl.rt.get_mem_info(ACL_HBM_MEM), "get_mem_info")
    expect(total, HBM, "HBM total")
    big = value(acl.rt.malloc(3 << 20, ACL_MEM_MALLOC_HUGE_ONLY), "huge malloc")
    free_after, _ = value(acl.rt.get_mem_info(ACL_HBM_MEM), "get_mem_info")
    expect(free_before - free_after >= 3 << 20, True, "malloc uses HBM")
    ok(acl.rt.free(big), "free huge")
    expect(acl.rt.malloc(0, 0), (0, ACL_ERROR_RT_PARAM_INVALID), "malloc 0 bytes")
    expect(acl.rt.malloc(-8, 0), (0, ACL_ERROR_RT_PARAM_INVALID), "malloc negative")
    expect(acl.rt.malloc(64, 9), (0, ACL_ERROR_RT_INVALID_MALLOC_TYPE), "unknown policy")
    expect(acl.rt.malloc(HBM + 1, 0), (0, ACL_ERROR_RT_MEMORY_ALLOCATION), "more than HBM")
    for name, allocate in (("malloc_align32", acl.rt.malloc_align32), ("malloc_cached", acl.rt.malloc_cached)):
        ptr = value(allocate(100, ACL_MEM_MALLOC_NORMAL_ONLY), name)
        ok(acl.rt.mem_flush(ptr, 100), "mem_flush")
        ok(acl.rt.mem_invalidate(ptr, 100), "mem_invalidate")
        expect(acl.rt.mem_flush(ptr, 4096), ACL_ERROR_RT_PARAM_INVALID, "flush past the allocation")
        ok(acl.rt.free(ptr), f"free {name}")
    expect(acl.rt.malloc_align32(0, 0)[1], ACL_ERROR_RT_PARAM_INVALID, "malloc_align32 0")
    expect(acl.rt.free(0), ACL_ERROR_RT_PARAM_INVALID, "free null")
    ptr = value(acl.rt.malloc(64, 0), "malloc")
    ok(acl.rt.free(ptr), "free")
    expect(acl.rt.free(ptr), ACL_ERROR_RT_PARAM_INVALID, "double free")
    expect(acl.rt.mem_flush(12345 << 12, 64), ACL_ERROR_RT_PARAM_INVALID, "flush host memory")
    free_ddr, total_ddr = value(acl.rt.get_mem_info(ACL_DDR_MEM), "DDR info")
    expect(0 < free_ddr <= total_ddr, True, "DDR numbers")
    for attr in (ACL_HBM_MEM_HUGE, ACL_HBM_MEM_NORMAL, 2, 3):
        value(acl.rt.get_mem_info(attr), f"mem info {attr}")
    expect(acl.rt.get_mem_info(18), (0, 0, ACL_ERROR_RT_PARAM_INVALID), "unknown attribute (0..17 are aclrtMemAttr)")


def host_memory() -> None:
    host = value(acl.rt.malloc_host(10000), "malloc_host")
    expect(host % 4096, 0, "page aligned")
    ok(acl.rt.memset(host, 10000, 0x5A, 10000), "memset pinned host memory")
    expect(acl.util.ptr_to_bytes(host, 4), b"ZZZZ", "host memset")
    expect(acl.rt.memset(host, 10000, 1, 20000), ACL_ERROR_RT_PARAM_INVALID, "memset count > max")
    scratch = bytes(64)
    expect(
        acl.rt.memset(acl.util.bytes_to_ptr(scratch), 64, 1, 64),
        ACL_ERROR_RT_PARAM_INVALID,
        "memset of unpinned host memory",
    )
    ok(acl.rt.free_host(host), "free_host")
    expect(acl.rt.free_host(host), ACL_ERROR_RT_PARAM_INVALID, "double free_host")
    expect(acl.rt.malloc_host(0), (0, ACL_ERROR_RT_PARAM_INVALID), "malloc_host 0")
    expect(acl.rt.malloc_host(1 << 62), (0, ACL_ERROR_RT_MEMORY_ALLOCATION), "malloc_host too large")


def copies(stream: int) -> None:
    data = np.arange(4096, dtype=np.float32)
    size = data.nbytes
    dev = value(acl.rt.malloc(size, 0), "malloc")
    dev2 = value(acl.rt.malloc(size, 0), "malloc")
    ok(acl.rt.memcpy(dev, size, acl.util.numpy_to_ptr(data), size, H2D), "memcpy H2D")
    ok(acl.rt.memcpy(dev2, size, dev, size, D2D), "memcpy D2D")
    out = bytes(size)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), size, dev2, size, D2H), "memcpy D2H into bytes")
    expect(np.array_equal(np.frombuffer(out, np.float32), data), True, "round trip through bytes")
    copy = bytes(size)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(copy), size, acl.util.bytes_to_ptr(out), size, H2H), "memcpy H2H")
    expect(copy == out, True, "H2H copy")
    ok(acl.rt.memcpy(dev, size, acl.util.bytes_to_ptr(copy), size, DEFAULT), "memcpy DEFAULT infers H2D")
    ok(acl.rt.memcpy(dev, size, dev2, size, H2D), "a mismatched kind: the addresses decide (D2D)")
    expect(acl.rt.memcpy(dev, 16, dev2, size, D2D), ACL_ERROR_RT_PARAM_INVALID, "count > dest_max")
    expect(acl.rt.memcpy(0, size, dev2, size, D2H), ACL_ERROR_RT_PARAM_INVALID, "null dst")
    expect(acl.rt.memcpy(dev, size * 2, dev2, size * 2, D2D), ACL_ERROR_RT_PARAM_INVALID, "past the allocation")
    expect(acl.rt.memcpy(dev, size, dev2, size, 9), ACL_ERROR_RT_PARAM_INVALID, "unknown kind")
    host = value(acl.rt.malloc_host(size), "malloc_host")
    ok(acl.rt.memset_async(dev2, size, 0, size, stream), "memset_async device")
    ok(acl.rt.memcpy_async(host, size, dev2, size, D2H, stream), "memcpy_async D2H")
    ok(acl.rt.synchronize_stream(stream), "sync")
    expect(acl.util.ptr_to_bytes(host, 8), bytes(8), "memset_async zeroed")
    ok(acl.rt.memcpy_async(dev2, size, acl.util.numpy_to_ptr(data), size, H2D, stream), "memcpy_async H2D")
    ok(acl.rt.memcpy_async(host, size, dev2, size, D2H, stream), "memcpy_async D2H")
    ok(acl.rt.memset_async(host, size, 7, 4, stream), "memset_async pinned host")
    ok(acl.rt.synchronize_stream(stream), "sync")
    view = acl.util.ptr_to_numpy(host, (4096,), 11)
    expect(float(view[5]), 5.0, "async copies in order")
    expect(acl.util.ptr_to_bytes(host, 4), b"\x07" * 4, "host memset after the copy")
    expect(acl.rt.memcpy_async(dev, 8, dev2, size, D2D, stream), ACL_ERROR_RT_PARAM_INVALID, "async count > max")
    expect(acl.rt.memset_async(dev, size, 0, size, 0x123), 107017, "unknown stream")
    expect(acl.rt.memcpy_async(dev, size, dev2, size, D2D, 0x123), 107017, "memcpy_async unknown stream")
    two_d(dev, host)
    ok(acl.rt.free_host(host), "free_host")
    for ptr in (dev, dev2):
        ok(acl.rt.free(ptr), "free")


def two_d(dev: int, host: int) -> None:
    rows = np.arange(4 * 8, dtype=np.uint8).reshape(4, 8)
    ok(acl.rt.memcpy2d(dev, 4, acl.util.numpy_to_ptr(rows), 8, 4, 4, H2D), "memcpy2d H2D (4 of 8 columns)")
    ok(acl.rt.memcpy2d(host, 16, dev, 4, 4, 4, D2H), "memcpy2d D2H into pitch 16")
    got = np.frombuffer(acl.util.ptr_to_bytes(host, 64), np.uint8).reshape(4, 16)[:, :4]
    expect(np.array_equal(got, rows[:, :4]), True, "memcpy2d picks the rows")
    ok(acl.rt.memcpy2d(dev, 8, acl.util.numpy_to_ptr(rows), 8, 8, 4, H2D), "memcpy2d contiguous")
    expect(acl.rt.memcpy2d(dev, 4, host, 8, 8, 4, H2D), ACL_ERROR_RT_PARAM_INVALID, "width > dpitch")
    expect(acl.rt.memcpy2d(dev, 8, dev, 8, 8, 4, D2D), ACL_ERROR_RT_PARAM_INVALID, "2-D D2D unsupported")


def dvpp() -> None:
    ptr = value(acl.media.dvpp_malloc(1000), "dvpp_malloc")
    expect(ptr % 128, 0, "dvpp memory aligned")
    ok(acl.media.dvpp_free(ptr), "dvpp_free")
    expect(acl.media.dvpp_free(ptr), ACL_ERROR_RT_PARAM_INVALID, "double dvpp_free")
    expect(acl.media.dvpp_free(0), ACL_ERROR_RT_PARAM_INVALID, "dvpp_free null")
    expect(acl.media.dvpp_malloc(0), (0, ACL_ERROR_RT_PARAM_INVALID), "dvpp_malloc 0")
    expect(acl.media.dvpp_malloc(HBM * 2), (0, ACL_ERROR_RT_MEMORY_ALLOCATION), "dvpp_malloc too large")


def other_context(stream: int) -> None:
    ctx = value(acl.rt.create_context(1), "context on device 1")
    dev = value(acl.rt.malloc(64, 0), "malloc on device 1")
    expect(acl.rt.memset_async(dev, 64, 0, 64, stream), ACL_ERROR_RT_STREAM_CONTEXT, "stream of another context")
    expect(acl.rt.memcpy_async(dev, 64, dev, 64, D2D, stream), ACL_ERROR_RT_STREAM_CONTEXT, "memcpy_async too")
    ok(acl.rt.free(dev), "free")
    ok(acl.rt.destroy_context(ctx), "destroy_context")


def main() -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    ctx = value(acl.rt.get_context(), "context")
    stream = value(acl.rt.create_stream(), "create_stream")
    mallocs()
    host_memory()
    copies(stream)
    dvpp()
    other_context(stream)
    ok(acl.rt.set_context(ctx), "set_context")
    ok(acl.rt.destroy_stream(stream), "destroy_stream")
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")
    done("memory")


if __name__ == "__main__":
    main()
