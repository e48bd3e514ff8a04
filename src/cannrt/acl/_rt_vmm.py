"""Virtual memory management (aclrtReserveMemAddress, aclrtMallocPhysical, aclrtMapMem...).

Reservations and mappings live in the current context's address space; physical memory comes
in 2 MiB huge pages (NORMAL requests are served as HUGE, as on CANN), or 1 GiB pages for the
HUGE1G memAttrs (map them at 1 GiB-aligned addresses: reserve with alignment 1 GiB).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cannrt.acl import constants as c
from cannrt.acl._handles import HandleTable, Kind
from cannrt.acl._state import (
    ArgTypeError,
    api,
    as_handle,
    as_int,
    current_context,
    fail,
    on_finalize,
    require,
    runtime,
)
from cannrt.errors import ErrorCode
from cannrt.runtime import memory_ops
from cannrt.runtime.context import Context

GRANULARITY = 2 << 20
GIANT_GRANULARITY = 1 << 30
DEVICE_ATTRS = frozenset(memory_ops.MemAttr) - {memory_ops.MemAttr.HBM_MEM, *memory_ops.HOST_ATTRS}


@dataclass(frozen=True)
class _Physical:
    device_id: int
    driver_handle: int
    size: int


_physical: HandleTable[_Physical] = HandleTable(Kind.PHYSICAL_MEMORY)


def _prop(prop: Any) -> tuple[int, int]:
    """(device, granularity) of an aclrtPhysicalMemProp: 1 GiB for the HUGE1G memAttrs, else 2 MiB."""
    if prop is None:
        return current_context().device_id, GRANULARITY
    if not isinstance(prop, dict):
        raise ArgTypeError(f"prop must be a dict (aclrtPhysicalMemProp), not {type(prop).__name__}")
    location = prop.get("location") or {}
    device = location.get("id", current_context().device_id) if isinstance(location, dict) else None
    if not isinstance(device, int):
        raise fail(ErrorCode.RT_PARAM_INVALID, f"prop['location'] must be a dict with an int 'id', got {location!r}")
    memory = prop.get("memAttr", c.ACL_HBM_MEM_HUGE)
    if memory not in DEVICE_ATTRS:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"memAttr must name device memory (4, 5, 8-17), got {memory!r}")
    return device, GIANT_GRANULARITY if memory in memory_ops.GIANT_ATTRS else GRANULARITY


def _check_flags(flags: object) -> None:
    if as_int("flags", flags) != 0:
        raise fail(ErrorCode.RT_PARAM_INVALID, "flags is reserved and must be 0")


def _context_on(device: int) -> Context:
    """The current context if it is on device, else the device's default context."""
    context = current_context()
    if context.device_id == device:
        return context
    state = runtime().device_state(device)
    state.default_context.check_sticky()
    return state.default_context


@api(0)
def reserve_mem_address(size: int, alignment: int, expect_ptr: int, flags: int) -> int:
    """(virt_ptr, ret): reserve device virtual addresses, size rounded up to 2 MiB (aclrtReserveMemAddress)."""
    nbytes, align, expect = as_int("size", size), as_int("alignment", alignment), as_handle("expect_ptr", expect_ptr)
    _check_flags(flags)
    return memory_ops.reserve_address(current_context(), nbytes, align, expect)


@api()
def release_mem_address(virt_ptr: int) -> None:
    """Release a reservation (aclrtReleaseMemAddress)."""
    memory_ops.release_address(current_context(), as_handle("virt_ptr", virt_ptr))


@api(0)
def malloc_physical(size: int, prop: dict[str, Any] | None, flags: int) -> int:
    """(handle, ret): physical device memory, size a multiple of 2 MiB (1 GiB for the HUGE1G
    memAttrs, which take 1 GiB pages) (aclrtMallocPhysical)."""
    nbytes = as_int("size", size)
    _check_flags(flags)
    device, granularity = _prop(prop)
    if nbytes <= 0 or nbytes % granularity:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"size must be a positive multiple of {granularity}, got {nbytes}")
    context = _context_on(device)
    driver_handle = memory_ops.malloc_physical(context, nbytes, giant=granularity == GIANT_GRANULARITY)
    return _physical.add(_Physical(device, driver_handle, nbytes))


def _physical_of(handle: object) -> _Physical:
    as_handle("handle", handle)
    runtime()
    return require(_physical, "handle", handle, "a handle from malloc_physical", ErrorCode.RT_INVALID_HANDLE)


@api()
def free_physical(handle: int) -> None:
    """Free physical memory from malloc_physical (aclrtFreePhysical)."""
    entry = _physical_of(handle)
    memory_ops.free_physical(_context_on(entry.device_id), entry.driver_handle, entry.size)
    _physical.remove(as_handle("handle", handle))


@api()
def map_mem(virt_ptr: int, size: int, offset: int, handle: int, flags: int) -> None:
    """Map physical memory behind part of a reservation (aclrtMapMem)."""
    va, nbytes, start = as_handle("virt_ptr", virt_ptr), as_int("size", size), as_int("offset", offset)
    _check_flags(flags)
    entry = _physical_of(handle)
    memory_ops.map_memory(current_context(), va, nbytes, start, entry.driver_handle)


@api()
def unmap_mem(virt_ptr: int) -> None:
    """Remove a mapping made by map_mem (aclrtUnmapMem)."""
    memory_ops.unmap_memory(current_context(), as_handle("virt_ptr", virt_ptr))


ACCESS_FLAGS = {0: None, 1: False, 3: True}  # NONE (not modelled), READ, READWRITE (CUDA's values)


@api()
def mem_set_access(virt_ptr: int, size: int, desc: object) -> None:
    """Read-only (flags 1) or read-write (flags 3) access for the mapping at virt_ptr, as CUDA's
    cuMemSetAccess: desc is {"flags": f, "location": {"id": device}} or a list of them (aclrtMemSetAccess)."""
    va, nbytes = as_handle("virt_ptr", virt_ptr), as_int("size", size)
    descs: list[dict[str, Any]] = []
    for one in desc if isinstance(desc, list) else [desc]:
        if not isinstance(one, dict):
            raise ArgTypeError(f"desc must be a dict (aclrtMemAccessDesc), not {type(one).__name__}")
        descs.append(one)
    context = current_context()
    for one in descs:
        flags = one.get("flags")
        if not isinstance(flags, int) or ACCESS_FLAGS.get(flags) is None:
            raise fail(ErrorCode.RT_PARAM_INVALID, f"access flags must be 1 (READ) or 3 (READWRITE), got {flags!r}")
        mapping = runtime().driver.mem_extent(va)
        if nbytes <= 0 or mapping is None or va + nbytes > mapping[2] + mapping[3]:
            raise fail(ErrorCode.RT_PARAM_INVALID, f"0x{va:x}+{nbytes} is not a mapped range")
        memory_ops.set_access(context, va, bool(ACCESS_FLAGS[flags]))


@api(0)
def mem_get_allocation_granularity(prop: dict[str, Any] | None, option: int) -> int:
    """(granularity, ret): 1 GiB for the HUGE1G memAttrs, else 2 MiB, for every option
    (aclrtMemGetAllocationGranularity)."""
    as_int("option", option)
    _, granularity = _prop(prop)
    runtime()
    return granularity


@on_finalize
def _forget_all() -> None:
    """Drop physical-memory handles."""
    _physical.clear()
