"""Conformance: virtual memory management (reserve, physical handles, map/unmap, release)."""

from __future__ import annotations

import numpy as np
from _check import done, expect, ok, value

import acl

ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_ERROR_RT_INVALID_HANDLE = 107017
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
ACL_HBM_MEM_HUGE, ACL_HBM_MEM_NORMAL = 4, 5
H2D, D2H = 1, 2
MIB = 1 << 20


def prop(device: int = 0, mem: int = ACL_HBM_MEM_HUGE) -> dict[str, object]:
    return {"handleType": 0, "allocationType": 0, "memAttr": mem, "location": {"id": device, "type": 1}, "reserve": 0}


def main() -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    expect(value(acl.rt.mem_get_allocation_granularity(prop(), 0), "granularity"), 2 * MIB, "2 MiB granules")
    va = value(acl.rt.reserve_mem_address(8 * MIB, 0, 0, 0), "reserve_mem_address")
    first = value(acl.rt.malloc_physical(4 * MIB, prop(), 0), "malloc_physical")
    second = value(acl.rt.malloc_physical(4 * MIB, prop(mem=ACL_HBM_MEM_NORMAL), 0), "malloc_physical NORMAL")
    ok(acl.rt.map_mem(va, 4 * MIB, 0, first, 0), "map first half")
    ok(acl.rt.map_mem(va + 4 * MIB, 4 * MIB, 0, second, 0), "map second half")
    data = np.arange(2 * MIB, dtype=np.float32)
    ok(acl.rt.memcpy(va, 8 * MIB, acl.util.numpy_to_ptr(data), data.nbytes, H2D), "copy across both mappings")
    back = np.zeros_like(data)
    ok(acl.rt.memcpy(acl.util.numpy_to_ptr(back), back.nbytes, va, back.nbytes, D2H), "copy back")
    expect(bool(np.array_equal(back, data)), True, "one contiguous buffer")
    expect(acl.rt.malloc_physical(3 * MIB, prop(), 0), (0, ACL_ERROR_RT_PARAM_INVALID), "size not 2 MiB aligned")
    expect(acl.rt.malloc_physical(2 * MIB, prop(), 1), (0, ACL_ERROR_RT_PARAM_INVALID), "flags must be 0")
    expect(acl.rt.malloc_physical(2 * MIB, prop(mem=0), 0), (0, ACL_ERROR_RT_PARAM_INVALID), "DDR memory")
    expect(acl.rt.malloc_physical(2 * MIB, prop(device=1), 0), (0, ACL_ERROR_RT_CONTEXT_NULL), "device 1 not set")
    expect(acl.rt.malloc_physical(128 << 30, prop(), 0), (0, ACL_ERROR_RT_MEMORY_ALLOCATION), "more than HBM")
    expect(acl.rt.map_mem(va, 2 * MIB, 0, 0x1234, 0), ACL_ERROR_RT_INVALID_HANDLE, "unknown physical handle")
    expect(acl.rt.reserve_mem_address(0, 0, 0, 0), (0, ACL_ERROR_RT_PARAM_INVALID), "reserve 0 bytes")
    expect(acl.rt.reserve_mem_address(2 * MIB, 3, 0, 0), (0, ACL_ERROR_RT_PARAM_INVALID), "alignment not 2^n")
    expect(acl.rt.reserve_mem_address(2 * MIB, 0, 0, 1), (0, ACL_ERROR_RT_PARAM_INVALID), "flags must be 0")
    expect(acl.rt.reserve_mem_address(1 << 50, 0, 0, 0), (0, ACL_ERROR_RT_MEMORY_ALLOCATION), "no such VA range")
    expect(acl.rt.map_mem(va, 0, 0, first, 0), ACL_ERROR_RT_PARAM_INVALID, "map 0 bytes")
    expect(acl.rt.mem_get_allocation_granularity(prop(mem=0), 0), (0, ACL_ERROR_RT_PARAM_INVALID), "bad prop")
    ok(acl.rt.unmap_mem(va), "unmap first")
    ok(acl.rt.unmap_mem(va + 4 * MIB), "unmap second")
    expect(acl.rt.unmap_mem(va), ACL_ERROR_RT_INVALID_HANDLE, "unmap twice")
    ok(acl.rt.free_physical(first), "free_physical")
    ok(acl.rt.free_physical(second), "free_physical")
    expect(acl.rt.free_physical(first), ACL_ERROR_RT_INVALID_HANDLE, "free_physical twice")
    ok(acl.rt.release_mem_address(va), "release_mem_address")
    expect(acl.rt.release_mem_address(va), ACL_ERROR_RT_INVALID_HANDLE, "release twice")
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")
    done("vmm")


if __name__ == "__main__":
    main()
