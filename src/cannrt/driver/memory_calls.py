"""The driver's memory calls: address spaces, physical pages, mappings, copies (hal mem*)."""

from __future__ import annotations

import heapq
import threading
from typing import Any

from cannrt.abi import CopyKind
from cannrt.config import Settings
from cannrt.device.copies import copy_parts, host_array
from cannrt.device.fabric import Fabric
from cannrt.device.memory import (
    GIANT_PAGE,
    HUGE_PAGE,
    MAX_ADDRESS_SPACES,
    NORMAL_PAGE,
    AddressSpace,
    DeviceFault,
    OutOfDeviceMemory,
)
from cannrt.device.npu import Npu
from cannrt.driver.base import SpaceInfo, serialised
from cannrt.driver.vaspace import AddressRangeError, VaAllocator
from cannrt.errors import CannError, ErrorCode, OutOfMemoryError


class MemoryCalls:
    """Memory half of the Driver (it composes this class); state lives on the Driver."""

    settings: Settings
    fabric: Fabric
    _lock: threading.RLock
    _devices: dict[int, Npu]
    _spaces: dict[int, SpaceInfo]
    _next_asid: int
    _free_asids: list[int]

    def _npu(self, dev: int) -> Npu:
        raise NotImplementedError

    @serialised
    def space_create(self, dev: int) -> int:
        """A new device virtual address space (one per context); returns its id."""
        self._npu(dev)
        if self._free_asids:
            asid = heapq.heappop(self._free_asids)
        elif self._next_asid < MAX_ADDRESS_SPACES:
            asid = self._next_asid
            self._next_asid += 1
        else:
            raise CannError(
                ErrorCode.RT_RESOURCE_ALLOC_FAIL, f"no free address space (limit {MAX_ADDRESS_SPACES} live contexts)"
            )
        space = AddressSpace(asid, dev)
        self._spaces[asid] = SpaceInfo(space, VaAllocator(space.base, space.limit, space.forget_freed), {})
        self.fabric.add(space)
        return asid

    @serialised
    def space_destroy(self, asid: int) -> None:
        """Drop an address space and free its physical memory."""
        info = self._spaces.pop(asid, None)
        if info is None:
            return
        npu = self._devices.get(info.space.device_id)
        for handle in info.chunks.values():
            if npu is not None:
                npu.hbm.free(handle)
        self.fabric.remove(asid)
        heapq.heappush(self._free_asids, asid)

    def _space(self, asid: int) -> SpaceInfo:
        try:
            return self._spaces[asid]
        except KeyError:
            raise CannError(ErrorCode.RT_CONTEXT_NULL, f"address space {asid} does not exist") from None

    @serialised
    def mem_alloc(self, asid: int, size: int, valid: int, huge: bool, *, giant: bool = False) -> int:
        """Physical pages + a VA range + the mapping, in one call; returns the VA."""
        info = self._space(asid)
        handle = self.mem_physical_alloc(info.space.device_id, size, huge, giant=giant)
        chunk = self._npu(info.space.device_id).hbm.chunk(handle)
        try:
            va = self._reserve(info, chunk.size, chunk.page_size, 0)
        except CannError:
            self._npu(info.space.device_id).hbm.free(handle)
            raise
        info.space.map(va, chunk, 0, chunk.size, valid)
        info.chunks[va] = handle
        return va

    @serialised
    def mem_free(self, asid: int, va: int) -> int:
        """Free what mem_alloc made; returns the valid bytes. CannError RT_INVALID_HANDLE if va is unknown.

        The VA goes into the quarantine (see cannrt.driver.vaspace): an access faults as a use after free."""
        info = self._space(asid)
        handle = info.chunks.pop(va, None)
        if handle is None:
            raise CannError(ErrorCode.RT_INVALID_HANDLE, f"0x{va:x} is not the start of an allocation in this context")
        mapping = info.space.unmap(va)
        info.space.retire(va, mapping.valid)
        info.va.quarantine(va)
        self._npu(info.space.device_id).hbm.free(handle)
        return mapping.valid

    @serialised
    def mem_physical_alloc(self, dev: int, size: int, huge: bool, *, giant: bool = False) -> int:
        """Physical pages only (4 KiB, 2 MiB or with giant 1 GiB); returns a handle.
        CannError RT_MEMORY_ALLOCATION when HBM has too few pages of that size."""
        page = GIANT_PAGE if giant else HUGE_PAGE if huge else NORMAL_PAGE
        try:
            chunk = self._npu(dev).hbm.allocate(size, page)
        except OutOfDeviceMemory as exc:
            kind = {GIANT_PAGE: "1 GiB", HUGE_PAGE: "2 MiB", NORMAL_PAGE: "4 KiB"}[page]
            raise OutOfMemoryError(
                ErrorCode.RT_MEMORY_ALLOCATION,
                f"device {dev}: requested {size} bytes, {exc.free} free of {exc.total} "
                f"(counting {kind} pages: {exc.requested} bytes of them needed)",
                requested=size,
                free=exc.free,
                total=exc.total,
                page_size=page,
            ) from None
        return chunk.handle

    @serialised
    def mem_physical_free(self, dev: int, handle: int) -> None:
        """Free physical pages by handle; refused (RT_PARAM_INVALID) while the handle is mapped."""
        hbm = self._npu(dev).hbm
        try:
            chunk = hbm.chunk(handle)
        except KeyError:
            raise CannError(ErrorCode.RT_INVALID_HANDLE, f"physical handle {handle} does not exist") from None
        if chunk.maps:
            raise CannError(
                ErrorCode.RT_PARAM_INVALID,
                f"physical handle {handle} is still mapped {chunk.maps} time(s): unmap_mem before free_physical",
                mappings=chunk.maps,
            )
        hbm.free(handle)

    @serialised
    def mem_reserve(self, asid: int, size: int, alignment: int, expect: int) -> int:
        """Reserve a VA range without memory behind it (a VMM reservation)."""
        info = self._space(asid)
        try:
            return info.va.reserve(size, max(alignment, NORMAL_PAGE), expect, user=True)
        except AddressRangeError as exc:
            raise CannError(ErrorCode.RT_MEMORY_ALLOCATION, str(exc)) from None

    def _reserve(self, info: SpaceInfo, size: int, alignment: int, expect: int) -> int:
        try:
            return info.va.reserve(size, alignment, expect)
        except AddressRangeError as exc:
            raise CannError(ErrorCode.RT_MEMORY_ALLOCATION, str(exc)) from None

    @serialised
    def mem_release(self, asid: int, va: int) -> None:
        """Release a VMM reservation; refused (RT_PARAM_INVALID) while anything is mapped in it."""
        info = self._space(asid)
        size = info.va.size_of(va)
        if size is None or not info.va.is_user(va):
            raise CannError(ErrorCode.RT_INVALID_HANDLE, f"0x{va:x} is not the start of a reserved range")
        mapped = info.space.mappings_in(va, va + size)
        if mapped:
            raise CannError(
                ErrorCode.RT_PARAM_INVALID,
                f"reserved range 0x{va:x} of {size} bytes still has {len(mapped)} mapping(s): unmap_mem first",
                mappings=len(mapped),
            )
        info.va.release(va)

    @serialised
    def mem_map(self, asid: int, va: int, size: int, offset: int, handle: int, writable: bool = True) -> None:
        """Map physical pages behind part of a VMM reservation (page-aligned, inside it)."""
        info = self._space(asid)
        try:
            chunk = self._npu(info.space.device_id).hbm.chunk(handle)
        except KeyError:
            raise CannError(ErrorCode.RT_INVALID_HANDLE, f"physical handle {handle} does not exist") from None
        if info.va.user_range(va, size) is None:
            raise CannError(
                ErrorCode.RT_PARAM_INVALID, f"map of {size} bytes at 0x{va:x} is not inside a reserved range"
            )
        if va % chunk.page_size or size % chunk.page_size or offset % chunk.page_size:
            raise CannError(
                ErrorCode.RT_PARAM_INVALID,
                f"map at 0x{va:x} of {size} bytes at offset {offset}: each must be a multiple of {chunk.page_size}",
            )
        if offset + size > chunk.size:
            raise CannError(
                ErrorCode.RT_PARAM_INVALID, f"map of {size} bytes at offset {offset} exceeds handle of {chunk.size}"
            )
        try:
            info.space.map(va, chunk, offset, size, size, writable)
        except ValueError as exc:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"cannot map 0x{va:x}: {exc}") from None

    @serialised
    def mem_unmap(self, asid: int, va: int) -> None:
        """Remove a mapping made by mem_map (not an allocation of mem_alloc)."""
        info = self._space(asid)
        if va in info.chunks:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"0x{va:x} is an allocation, not a mapping: free it instead")
        try:
            info.space.unmap(va)
        except KeyError:
            raise CannError(ErrorCode.RT_INVALID_HANDLE, f"nothing is mapped at 0x{va:x}") from None

    @serialised
    def mem_set_access(self, asid: int, va: int, writable: bool) -> None:
        """Read-only or read-write access for the mapping starting at va."""
        info = self._space(asid)
        if va in info.chunks or info.space.mapping_at(va) is None:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"0x{va:x} is not the start of a mapping made by map_mem")
        try:
            info.space.set_writable(va, writable)
        except KeyError:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"0x{va:x} is not the start of a mapping") from None

    @serialised
    def mem_info(self, dev: int) -> tuple[int, int, int, int]:
        """(free, total, huge used, normal used) bytes of HBM (huge: 2 MiB and 1 GiB pages)."""
        hbm = self._npu(dev).hbm
        return hbm.free_bytes(), hbm.capacity, hbm.used_huge, hbm.used_normal

    @serialised
    def mem_free_pages(self, dev: int) -> tuple[int, int, int]:
        """Free bytes of HBM as 4 KiB, 2 MiB and 1 GiB pages (only wholly free frames and
        aligned frame groups serve the larger pages)."""
        hbm = self._npu(dev).hbm
        return hbm.free_bytes(NORMAL_PAGE), hbm.free_bytes(HUGE_PAGE), hbm.free_bytes(GIANT_PAGE)

    def mem_owner(self, address: int) -> tuple[int, int] | None:
        """(device, asid) whose allocation holds address, or None."""
        space = self.fabric.owner(address)
        if space is None or space.mapping_at(address) is None:
            return None
        return space.device_id, space.asid

    def mem_extent(self, address: int) -> tuple[int, int, int, int] | None:
        """(device, asid, start, valid bytes) of the mapped run holding address, or None.

        The run is the allocation, or back-to-back mappings of a reserved range (VMM)."""
        space = self.fabric.owner(address)
        mapping = space.mapping_at(address) if space is not None else None
        if space is None or mapping is None:
            return None
        if mapping.blocks is not None:  # a pooled segment: the pool's block is the allocation
            block = mapping.block_containing(address)
            start, size = block if block is not None else (address, 0)
            return space.device_id, space.asid, start, size
        return space.device_id, space.asid, mapping.va, space.contiguous_end(address) - mapping.va

    def mem_freed(self, address: int) -> tuple[int, int] | None:
        """(start, bytes) of the freed allocation, still in the VA quarantine, holding address."""
        space = self.fabric.owner(address)
        freed = space.freed_at(address) if space is not None else None
        return None if freed is None else (freed.va, freed.valid)

    def mem_annotate(self, asid: int, address: int, size: int) -> None:
        """A caching pool handed out a block: the MMU checks accesses against the pool's blocks."""
        try:
            self._space(asid).space.annotate(address, size)
        except KeyError:
            raise CannError(
                ErrorCode.RT_PARAM_INVALID, f"0x{address:x} is not inside a mapping of address space {asid}"
            ) from None

    def mem_write(self, asid: int, va: int, data: bytes) -> None:
        """Write bytes into device memory from the host (argument areas, small uploads)."""
        parts = self._device_parts(asid, va, len(data), "write")
        copy_parts([memoryview(data).cast("B")], parts)  # type: ignore[list-item]

    def memcpy(self, asid: int, dst: int, src: int, count: int, kind: int) -> int:
        """Synchronous copy through SDMA; returns its modelled duration (ns)."""
        kind = CopyKind(kind)
        if kind == CopyKind.HOST_TO_HOST:
            copy_parts([host_array(src, count)], [host_array(dst, count)])
            return count // 10  # host memcpy at about 10 GB/s
        source = [host_array(src, count)] if kind.reads_host else self._device_parts(asid, src, count, "read")
        target = [host_array(dst, count)] if kind.writes_host else self._device_parts(asid, dst, count, "write")
        copy_parts(source, target)
        gbps = self.fabric.copy_bandwidth(self.settings.chip, False, kind, src, dst)
        return self.settings.device_costs.copy_latency_ns + int(count / gbps)

    def memset(self, asid: int, dst: int, value: int, count: int) -> int:
        """Synchronous memset of device memory; returns its modelled duration (ns)."""
        for part in self._device_parts(asid, dst, count, "write"):
            part[...] = value
        gbps = self.fabric.copy_bandwidth(self.settings.chip, True, 0, dst, dst)
        return self.settings.device_costs.copy_latency_ns + int(count / gbps)

    def mem_read(self, asid: int, va: int, count: int) -> bytes:
        """Read device memory (dump and debugging tools)."""
        parts = self._device_parts(asid, va, count, "read")
        return b"".join(part.tobytes() for part in parts)

    def _device_parts(self, asid: int, address: int, count: int, kind: str) -> list[Any]:
        info = self._space(asid)
        try:
            space = self.fabric.resolve(address, asid, info.space.device_id, kind, count)
            return space.segments(address, count, kind)
        except DeviceFault as fault:
            raise CannError(ErrorCode.RT_PARAM_INVALID, str(fault)) from None
