"""Device memory calls of a context: malloc rules, copies and memsets (aclrtMalloc, aclrtMemcpy...).

aclrtMalloc: size = ALIGN_UP(size + 32, 32) (32 bytes of padding), start 64-byte aligned;
aclrtMallocAlign32: ALIGN_UP(size, 32) without padding; 1 GiB huge pages are not padded.
Host pointers are real process addresses.
"""

from __future__ import annotations

import ctypes
import os
from enum import IntEnum
from typing import TYPE_CHECKING

from cannrt.abi import CopyKind, SdmaOp
from cannrt.errors import CannError, ErrorCode, OutOfMemoryError
from cannrt.memory.timeline import MemoryTimeline, memory_timeline
from cannrt.runtime import host_check
from cannrt.runtime.tracing import api_call

if TYPE_CHECKING:
    from cannrt.runtime.context import Context
    from cannrt.runtime.stream import Stream

PADDING = 32
HUGE_THRESHOLD = 1 << 20  # HUGE_FIRST uses normal pages up to 1 MiB
MIN_HOST_ADDRESS = 4096


class MallocPolicy(IntEnum):
    """aclrtMemMallocPolicy."""

    HUGE_FIRST = 0
    HUGE_ONLY = 1
    NORMAL_ONLY = 2
    HUGE_FIRST_P2P = 3
    HUGE_ONLY_P2P = 4
    NORMAL_ONLY_P2P = 5
    HUGE1G_ONLY = 6
    HUGE1G_ONLY_P2P = 7


class MemAttr(IntEnum):
    """aclrtMemAttr (get_mem_info, and the memAttr of a physical allocation)."""

    DDR_MEM = 0
    HBM_MEM = 1
    DDR_MEM_HUGE = 2
    DDR_MEM_NORMAL = 3
    HBM_MEM_HUGE = 4
    HBM_MEM_NORMAL = 5
    DDR_MEM_P2P_HUGE = 6
    DDR_MEM_P2P_NORMAL = 7
    HBM_MEM_P2P_HUGE = 8
    HBM_MEM_P2P_NORMAL = 9
    HBM_MEM_HUGE1G = 10
    HBM_MEM_P2P_HUGE1G = 11
    MEM_NORMAL = 12  # the device's own memory (HBM here), chosen by the runtime
    MEM_HUGE = 13
    MEM_HUGE1G = 14
    MEM_P2P_NORMAL = 15
    MEM_P2P_HUGE = 16
    MEM_P2P_HUGE1G = 17


HOST_ATTRS = (
    MemAttr.DDR_MEM,
    MemAttr.DDR_MEM_NORMAL,
    MemAttr.DDR_MEM_HUGE,
    MemAttr.DDR_MEM_P2P_HUGE,
    MemAttr.DDR_MEM_P2P_NORMAL,
)
HUGE_ATTRS = (MemAttr.HBM_MEM_HUGE, MemAttr.HBM_MEM_P2P_HUGE, MemAttr.MEM_HUGE, MemAttr.MEM_P2P_HUGE)
GIANT_ATTRS = (MemAttr.HBM_MEM_HUGE1G, MemAttr.HBM_MEM_P2P_HUGE1G, MemAttr.MEM_HUGE1G, MemAttr.MEM_P2P_HUGE1G)


def align_up(value: int, alignment: int) -> int:
    """Round value up to a multiple of alignment."""
    return -(-value // alignment) * alignment


def padded_size(size: int, policy: int) -> int:
    """Bytes aclrtMalloc really takes for size under policy."""
    if policy in (MallocPolicy.HUGE1G_ONLY, MallocPolicy.HUGE1G_ONLY_P2P):
        return align_up(size, PADDING)
    return align_up(size + PADDING, PADDING)


@api_call("aclrtMalloc")
def malloc(ctx: Context, size: int, policy: int = MallocPolicy.HUGE_FIRST, *, pad: bool = True) -> int:
    """Allocate device memory in ctx (aclrtMalloc / aclrtMallocAlign32 with pad=False)."""
    ctx.check_alive()
    ctx.check_sticky()
    if size <= 0:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"malloc size must be positive, got {size}")
    try:
        policy = MallocPolicy(policy)
    except ValueError:
        raise CannError(ErrorCode.RT_INVALID_MALLOC_TYPE, f"unknown malloc policy {policy}") from None
    nbytes = padded_size(size, policy) if pad else align_up(size, PADDING)
    driver = ctx.runtime.driver
    ctx.runtime.host_cost(ctx.runtime.settings.host_costs.malloc_ns)
    giant = policy in (MallocPolicy.HUGE1G_ONLY, MallocPolicy.HUGE1G_ONLY_P2P)
    huge = giant or policy in (MallocPolicy.HUGE_ONLY, MallocPolicy.HUGE_ONLY_P2P)
    first_huge = policy in (MallocPolicy.HUGE_FIRST, MallocPolicy.HUGE_FIRST_P2P) and nbytes > HUGE_THRESHOLD
    try:
        va = driver.mem_alloc(ctx.asid, nbytes, nbytes, huge or first_huge, giant=giant)
    except OutOfMemoryError:
        if not first_huge:
            raise
        va = driver.mem_alloc(ctx.asid, nbytes, nbytes, False)  # huge pages first, then normal ones
    ctx.allocations[va] = size
    record_event(ctx, "malloc", va, size)
    return va


@api_call("aclrtFree")
def free(ctx: Context, va: int) -> None:
    """Free memory from malloc (aclrtFree)."""
    if va not in ctx.allocations:
        owner = ctx.runtime.driver.mem_owner(va)
        where = (
            "was not allocated by malloc in this context"
            if owner is None
            else "is not the start of an allocation of this context"
        )
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"free: 0x{va:x} {where}")
    size = ctx.allocations.pop(va)
    ctx.runtime.driver.mem_free(ctx.asid, va)
    record_event(ctx, "free", va, -size)


@api_call("aclrtMalloc")
def malloc_segment(ctx: Context, size: int) -> int:
    """A pool segment: size bytes (a multiple of 2 MiB) of huge pages mapped page-exact, no
    padding, so the pool's reserved bytes are exactly the HBM it holds (the driver call behind
    aclrtMalloc without its padding rules)."""
    ctx.check_alive()
    ctx.check_sticky()
    ctx.runtime.host_cost(ctx.runtime.settings.host_costs.malloc_ns)
    return ctx.runtime.driver.mem_alloc(ctx.asid, size, size, True)


@api_call("aclrtFree")
def free_segment(ctx: Context, va: int) -> None:
    """Give a pool segment back (the pool made sure no queued work still touches it)."""
    ctx.runtime.driver.mem_free(ctx.asid, va)


def quiesce(ctx: Context) -> None:
    """Wait until the work queued so far on every stream of ctx has run, real work included
    (the implicit synchronisation of aclrtUnmapMem and of a segment release)."""
    with ctx.lock:
        streams = [stream for stream in ctx.streams.values() if not stream.destroyed]
    runtime = ctx.runtime
    for stream in streams:
        try:
            result = runtime.driver.sq_wait(ctx.device_id, stream.sq_id, stream.tail, runtime.clock.now_ns, None)
        except (CannError, KeyError):
            if stream.destroyed:
                continue  # destroyed meanwhile: its SQ was drained or discarded
            raise  # the watchdog: queued work cannot finish
        runtime.waited(result)


def timeline_of(ctx: Context) -> MemoryTimeline:
    """The memory timeline of ctx's device, its totals restarted when the device was reset."""
    timeline = memory_timeline(ctx.runtime, ctx.device_id)
    state = ctx.runtime.devices.get(ctx.device_id)
    if state is not None:
        timeline.begin_epoch(state.default_context, ctx.runtime.clock.now_ns)
    return timeline


def record_event(ctx: Context, action: str, address: int, delta: int, pool: str = "malloc", stream: int = -1) -> None:
    """Note an allocation (delta > 0) or free in the device's memory timeline."""
    timeline = timeline_of(ctx)
    if timeline.enabled:
        timeline.record(ctx.runtime.clock.now_ns, action, address, delta, pool, stream)


def mem_info(ctx: Context, attr: int) -> tuple[int, int]:
    """(free, total) bytes for a memory attribute (aclrtGetMemInfo)."""
    try:
        attr = MemAttr(attr)
    except ValueError:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"unknown memory attribute {attr}") from None
    if attr in HOST_ATTRS:
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page
    free, total, _, _ = ctx.runtime.driver.mem_info(ctx.device_id)
    if attr in HUGE_ATTRS or attr in GIANT_ATTRS:
        _, free_huge, free_giant = ctx.runtime.driver.mem_free_pages(ctx.device_id)
        # wholly free 2 MiB frames, or wholly free aligned 1 GiB groups of them
        return (free_giant if attr in GIANT_ATTRS else free_huge), total
    return free, total  # HBM_MEM and the NORMAL attributes: every free 4 KiB page


Extent = tuple[int, int, int, int] | None  # (device, asid, start, valid bytes); None: host memory


def _locate(ctx: Context, address: int) -> Extent:
    """Where a pointer points: the device allocation holding it, or None for host memory."""
    return ctx.runtime.driver.mem_extent(address)


def resolve_kind(kind: int, src: Extent, dst: Extent) -> CopyKind:
    """The direction of a copy, from its pointers (aclrtMemcpy on Atlas A2: `kind` is reserved and
    its value ignored, the addresses decide); an unknown kind is still RT_PARAM_INVALID."""
    try:
        CopyKind(kind)
    except ValueError:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"unknown memcpy kind {kind}") from None
    if src is not None:
        return CopyKind.DEVICE_TO_DEVICE if dst is not None else CopyKind.DEVICE_TO_HOST
    return CopyKind.HOST_TO_DEVICE if dst is not None else CopyKind.HOST_TO_HOST


def check_copy(ctx: Context, dst: int, dst_max: int, src: int, count: int) -> None:
    """Validate pointers and sizes of a copy; raises CannError(RT_PARAM_INVALID) with the numbers."""
    ctx.check_alive()
    ctx.check_sticky()
    if dst < MIN_HOST_ADDRESS or src < MIN_HOST_ADDRESS:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"null pointer (dst=0x{dst:x}, src=0x{src:x})")
    if count < 0 or dst_max < 0:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"negative size (count={count}, dst_max={dst_max})")
    if count > dst_max:
        raise CannError(
            ErrorCode.RT_PARAM_INVALID, f"count {count} exceeds dst_max {dst_max}", count=count, dst_max=dst_max
        )


def check_device_range(ctx: Context, address: int, count: int, role: str) -> None:
    """A device range must lie in one allocation of this context or of a peer device."""
    _check_range(ctx, address, count, role, _locate(ctx, address), write=False)


def _check_range(ctx: Context, address: int, count: int, role: str, extent: Extent, write: bool) -> None:
    """Device memory: inside one allocation of this context or a peer; host memory: mapped
    (readable, and writable for a destination). RT_PARAM_INVALID with the numbers otherwise."""
    if extent is None:
        _check_not_freed(ctx, address, role)
        if count == 0:
            return
        ok = host_check.writable(address, count) if write else host_check.readable(address, count)
        if not ok:
            access = "writable" if write else "readable"
            message = f"{role} host range 0x{address:x}+{count} is not {access} memory"
            raise CannError(ErrorCode.RT_PARAM_INVALID, message)
        return
    device, asid, start, valid = extent
    if device == ctx.device_id and asid != ctx.asid:
        raise CannError(
            ErrorCode.RT_PARAM_INVALID, f"{role} 0x{address:x} belongs to another context on device {device}"
        )
    if valid == 0:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"{role} 0x{address:x} is not inside any block of the caching pool")
    if address + count > start + valid:
        raise CannError(
            ErrorCode.RT_PARAM_INVALID,
            f"{role} range of {count} bytes at 0x{address:x} runs {address + count - start - valid} bytes past "
            f"its allocation at 0x{start:x} of size {valid}",
            address=address,
            count=count,
            allocation=start,
            size=valid,
        )


def _check_not_freed(ctx: Context, address: int, role: str) -> None:
    """A device address of a freed allocation (still quarantined): RT_PARAM_INVALID naming it."""
    freed = ctx.runtime.driver.mem_freed(address)
    if freed is not None:
        message = f"{role} 0x{address:x} is {address - freed[0]} bytes inside a freed {freed[1]}-byte allocation"
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"{message} at 0x{freed[0]:x}")


def _checked_copy(ctx: Context, dst: int, dst_max: int, src: int, count: int, kind: int) -> CopyKind:
    """Every check of a copy, each pointer located once; returns the resolved kind."""
    check_copy(ctx, dst, dst_max, src, count)
    src_extent, dst_extent = _locate(ctx, src), _locate(ctx, dst)
    resolved = resolve_kind(kind, src_extent, dst_extent)
    _check_range(ctx, src, count, "src", src_extent, write=False)
    _check_range(ctx, dst, count, "dst", dst_extent, write=True)
    return resolved


@api_call("aclrtMemcpy")
def memcpy(ctx: Context, dst: int, dst_max: int, src: int, count: int, kind: int) -> None:
    """Synchronous copy (aclrtMemcpy)."""
    resolved = _checked_copy(ctx, dst, dst_max, src, count, kind)
    if count == 0:
        return
    ctx.runtime.host_cost(ctx.runtime.driver.memcpy(ctx.asid, dst, src, count, resolved))


def check_stream(ctx: Context, stream: Stream) -> None:
    """The stream must belong to ctx (RT_STREAM_CONTEXT otherwise) and be alive."""
    if stream.context is not ctx:
        raise CannError(
            ErrorCode.RT_STREAM_CONTEXT,
            f"stream {stream.stream_id} belongs to a context on device {stream.device_id}, "
            f"not the current one on device {ctx.device_id}",
        )
    stream.check_usable()


def memcpy_async(ctx: Context, dst: int, dst_max: int, src: int, count: int, kind: int, stream: Stream) -> None:
    """Asynchronous copy on a stream (aclrtMemcpyAsync): an SDMA task."""
    check_stream(ctx, stream)
    resolved = _checked_copy(ctx, dst, dst_max, src, count, kind)
    stream.submit_sdma(SdmaOp.COPY, resolved, src, dst, count)


@api_call("aclrtMemset")
def memset(ctx: Context, dst: int, dst_max: int, value: int, count: int, stream: Stream | None = None) -> None:
    """Fill bytes with value (aclrtMemset, or aclrtMemsetAsync with a stream); host or device memory."""
    if stream is not None:
        check_stream(ctx, stream)
    check_copy(ctx, dst, dst_max, dst, count)
    value &= 0xFF  # like memset: the low byte
    extent = _locate(ctx, dst)
    _check_range(ctx, dst, count, "dst", extent, write=True)
    device = extent is not None
    if stream is not None:
        kind = CopyKind.DEVICE_TO_DEVICE if device else CopyKind.HOST_TO_HOST
        stream.submit_sdma(SdmaOp.MEMSET, kind, 0, dst, count, value)
    elif device:
        ctx.runtime.host_cost(ctx.runtime.driver.memset(ctx.asid, dst, value, count))
    else:
        ctypes.memset(dst, value, count)


def reserve_address(ctx: Context, size: int, alignment: int = 0, expect: int = 0) -> int:
    """Reserve a virtual range without memory behind it (aclrtReserveMemAddress)."""
    ctx.check_alive()
    if size <= 0 or alignment < 0 or (alignment and alignment & (alignment - 1)):
        raise CannError(
            ErrorCode.RT_PARAM_INVALID, f"reserve: size {size} must be > 0, alignment {alignment} a power of 2"
        )
    return ctx.runtime.driver.mem_reserve(ctx.asid, align_up(size, 2 << 20), max(alignment, 2 << 20), expect)


def release_address(ctx: Context, va: int) -> None:
    """Release a reserved range (aclrtReleaseMemAddress)."""
    ctx.runtime.driver.mem_release(ctx.asid, va)


def malloc_physical(ctx: Context, size: int, *, giant: bool = False) -> int:
    """Physical HBM pages in 2 MiB (giant: 1 GiB) granules, returned as a handle (aclrtMallocPhysical)."""
    ctx.check_alive()
    ctx.check_sticky()
    if size <= 0:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"malloc_physical: size {size} must be > 0")
    handle = ctx.runtime.driver.mem_physical_alloc(ctx.device_id, size, True, giant=giant)
    record_event(ctx, "malloc_physical", handle, align_up(size, (1 << 30) if giant else 2 << 20), "physical")
    return handle


def free_physical(ctx: Context, handle: int, size: int = 0) -> None:
    """Free physical pages by handle; refused while mapped (aclrtFreePhysical)."""
    ctx.runtime.driver.mem_physical_free(ctx.device_id, handle)
    record_event(ctx, "free_physical", handle, -size, "physical")


def map_memory(ctx: Context, va: int, size: int, offset: int, handle: int, *, writable: bool = True) -> None:
    """Map physical pages behind part of a reservation, only inside one (aclrtMapMem)."""
    ctx.check_alive()
    if size <= 0 or offset < 0:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"map: size {size} must be > 0 and offset {offset} >= 0")
    ctx.runtime.driver.mem_map(ctx.asid, va, size, offset, handle, writable)


def unmap_memory(ctx: Context, va: int) -> None:
    """Remove a mapping (aclrtUnmapMem) once the work queued on the context's streams has run:
    the unmap is deferred by an implicit synchronisation, as cuMemUnmap's is."""
    ctx.check_alive()
    quiesce(ctx)
    ctx.runtime.driver.mem_unmap(ctx.asid, va)


def set_access(ctx: Context, va: int, writable: bool) -> None:
    """Read-only or read-write access for a mapping made by map_memory (aclrtMemSetAccess)."""
    ctx.check_alive()
    ctx.runtime.driver.mem_set_access(ctx.asid, va, writable)


def can_access_peer(runtime_device_count: int, device: int, peer: int) -> bool:
    """Whether device can reach peer's memory (aclrtDeviceCanAccessPeer): any two distinct devices."""
    for dev in (device, peer):
        if not 0 <= dev < runtime_device_count:
            raise CannError(
                ErrorCode.RT_INVALID_DEVICEID, f"device {dev} does not exist (0..{runtime_device_count - 1})"
            )
    return device != peer
