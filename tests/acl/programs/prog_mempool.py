"""Conformance: stream-ordered pools (mem_pool_*, malloc_async, free_async) and mapping access rights."""

from __future__ import annotations

import numpy as np
from _check import done, expect, ok, value

import acl

ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_HANDLE = 107017
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
REUSE_ALLOW_OPPORTUNISTIC, REUSE_ALLOW_INTERNAL_DEPENDENCIES, RELEASE_THRESHOLD = 2, 3, 4
RESERVED_MEM_CURRENT, USED_MEM_CURRENT, USED_MEM_HIGH = 5, 7, 8
ACCESS_READ, ACCESS_READWRITE = 1, 3
H2D, D2H = 1, 2
MIB = 1 << 20


def pools() -> None:
    stream = value(acl.rt.create_stream(), "create_stream")
    other = value(acl.rt.create_stream(), "create_stream")
    pool = value(acl.rt.mem_pool_create({"location": {"id": 0}, "maxSize": 64 * MIB}), "mem_pool_create")
    ok(acl.rt.mem_pool_set_attr(pool, REUSE_ALLOW_OPPORTUNISTIC, 0), "no opportunistic reuse")
    ok(acl.rt.mem_pool_set_attr(pool, REUSE_ALLOW_INTERNAL_DEPENDENCIES, 0), "no inserted waits")
    ptr = value(acl.rt.mem_pool_malloc_async(2 * MIB, pool, stream), "mem_pool_malloc_async")
    data = np.arange(MIB // 2, dtype=np.float32)
    ok(acl.rt.memcpy_async(ptr, 2 * MIB, acl.util.numpy_to_ptr(data), data.nbytes, H2D, stream), "copy in")
    back = np.zeros_like(data)
    ok(acl.rt.memcpy_async(acl.util.numpy_to_ptr(back), back.nbytes, ptr, back.nbytes, D2H, stream), "copy out")
    ok(acl.rt.mem_pool_free_async(ptr, stream), "mem_pool_free_async")
    expect(value(acl.rt.mem_pool_malloc_async(2 * MIB, pool, stream), "same stream"), ptr, "reused on its stream")
    ok(acl.rt.mem_pool_free_async(ptr, stream), "free again")
    expect(value(acl.rt.mem_pool_malloc_async(2 * MIB, pool, other), "other") != ptr, True, "not on another stream")
    expect(value(acl.rt.mem_pool_get_attr(pool, USED_MEM_CURRENT), "used"), 2 * MIB, "used bytes")
    expect(value(acl.rt.mem_pool_get_attr(pool, RESERVED_MEM_CURRENT), "reserved"), 4 * MIB, "reserved bytes")
    expect(value(acl.rt.mem_pool_get_attr(pool, RELEASE_THRESHOLD), "threshold"), 0, "default threshold")
    ok(acl.rt.mem_pool_set_attr(pool, USED_MEM_HIGH, 0), "reset the high-water mark")
    expect(acl.rt.mem_pool_set_attr(pool, 42, 0), ACL_ERROR_RT_PARAM_INVALID, "unknown attribute")
    expect(acl.rt.mem_pool_malloc_async(128 * MIB, pool, stream), (0, ACL_ERROR_RT_MEMORY_ALLOCATION), "max size")
    ok(acl.rt.synchronize_stream(stream), "synchronize")
    expect(bool(np.array_equal(back, data)), True, "data through pool memory")
    ok(acl.rt.mem_pool_trim_to(pool, 0), "mem_pool_trim_to")
    expect(value(acl.rt.mem_pool_get_attr(pool, RESERVED_MEM_CURRENT), "reserved"), 2 * MIB, "trimmed")
    ok(acl.rt.mem_pool_destroy(pool), "mem_pool_destroy")
    expect(acl.rt.mem_pool_trim_to(pool, 0), ACL_ERROR_RT_INVALID_HANDLE, "destroyed pool")
    ptr = value(acl.rt.malloc_async(4096, stream), "malloc_async")
    ok(acl.rt.free_async(ptr, stream), "free_async")
    expect(acl.rt.free_async(ptr, stream), ACL_ERROR_RT_PARAM_INVALID, "free_async twice")
    ok(acl.rt.destroy_stream(stream), "destroy_stream")
    ok(acl.rt.destroy_stream(other), "destroy_stream")


def access() -> None:
    prop = {"location": {"id": 0}, "memAttr": 4}
    va = value(acl.rt.reserve_mem_address(2 * MIB, 0, 0, 0), "reserve")
    handle = value(acl.rt.malloc_physical(2 * MIB, prop, 0), "malloc_physical")
    ok(acl.rt.map_mem(va, 2 * MIB, 0, handle, 0), "map")
    data = np.ones(256, np.uint8)
    ok(acl.rt.mem_set_access(va, 2 * MIB, {"flags": ACCESS_READ, "location": {"id": 0}}), "read-only")
    expect(acl.rt.memcpy(va, 256, acl.util.numpy_to_ptr(data), 256, H2D), ACL_ERROR_RT_PARAM_INVALID, "write refused")
    ok(acl.rt.mem_set_access(va, 2 * MIB, [{"flags": ACCESS_READWRITE}]), "read-write")
    ok(acl.rt.memcpy(va, 256, acl.util.numpy_to_ptr(data), 256, H2D), "write allowed")
    expect(acl.rt.mem_set_access(va, 2 * MIB, {"flags": 7}), ACL_ERROR_RT_PARAM_INVALID, "bad flags")
    expect(acl.rt.free_physical(handle), ACL_ERROR_RT_PARAM_INVALID, "free while mapped")
    expect(acl.rt.release_mem_address(va), ACL_ERROR_RT_PARAM_INVALID, "release while mapped")
    ok(acl.rt.unmap_mem(va), "unmap")
    ok(acl.rt.free_physical(handle), "free_physical")
    ok(acl.rt.release_mem_address(va), "release")


def main() -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    pools()
    access()
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")
    done("mempool")


if __name__ == "__main__":
    main()
