"""The caching pool behind `Device.empty` / `DeviceArray.free` (one pool per context).

Segments are mapped page-exact in huge pages (memory_ops.malloc_segment, not the padded
aclrtMalloc path), so the pool's reserved bytes are the HBM it holds; segments go back after the
context's streams are idle. Cross-stream reuse (record_stream) waits until the other streams'
heads pass where their tails stood at the free: no event is needed, none is left behind (see
cannrt.memory.caching for the policies).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

from cannrt.errors import CannError, ErrorCode, OutOfMemoryError
from cannrt.memory import summary_table as memory_summary
from cannrt.memory.caching import Block, CachingAllocator, PoolOutOfMemory
from cannrt.memory.timeline import MemoryTimeline
from cannrt.runtime import memory_ops, stream_pools
from cannrt.runtime.context import Context
from cannrt.runtime.core import get_runtime
from cannrt.runtime.stream import Stream as RtStream

_CREATE_LOCK = threading.Lock()


def pool_of(context: Context) -> CachingAllocator:
    """The context's caching pool (created on first use, once even when threads race)."""
    holder = stream_pools.pools_of(context)
    pool = holder.caching
    if pool is None:
        with _CREATE_LOCK:
            pool = holder.caching
            if pool is None:
                pool = holder.caching = _new_pool(context)
    return pool


def _new_pool(context: Context) -> CachingAllocator:
    pool = CachingAllocator(
        lambda nbytes: memory_ops.malloc_segment(context, nbytes),
        lambda address: memory_ops.free_segment(context, address),
        stream_pools.free_point,
        stream_pools.free_point_reached,
        context.note_block,  # the MMU checks accesses against the block; reports name it
        lambda: memory_ops.quiesce(context),
    )

    def on_event(action: str, address: int, delta: int, stream: Hashable) -> None:
        stream_id = stream.stream_id if isinstance(stream, RtStream) else -1
        memory_ops.record_event(context, action, address, delta, "caching", stream_id)

    pool.on_event = on_event
    return pool


def allocate(context: Context, nbytes: int, stream: RtStream) -> Block:
    """A pool block for stream. After a device fault: the sticky error, as every call gets.
    OutOfMemoryError carries requested, segment, in use, reserved, free, total and the largest
    free block."""
    context.check_alive()
    context.check_sticky()
    try:
        return pool_of(context).allocate(nbytes, stream)
    except PoolOutOfMemory as exc:
        if isinstance(exc.cause, CannError) and not isinstance(exc.cause, OutOfMemoryError):
            raise exc.cause from None  # not a shortage: the device said why
        free, total = memory_ops.mem_info(context, memory_ops.MemAttr.HBM_MEM)
        free_huge, _ = memory_ops.mem_info(context, memory_ops.MemAttr.HBM_MEM_HUGE)
        limit = f", limit {exc.limit}" if exc.limit is not None else ""
        raise OutOfMemoryError(
            ErrorCode.RT_MEMORY_ALLOCATION,
            f"device {context.device_id}: tried to allocate {exc.requested} bytes, which needed a new segment "
            f"of {exc.segment} bytes; {exc.allocated} bytes in use, {exc.reserved} reserved by the caching pool"
            f"{limit}, largest free block {exc.largest_free}; the device has {free} free of {total} "
            f"({free_huge} in whole 2 MiB pages, which segments take)",
            requested=exc.requested, segment=exc.segment, allocated=exc.allocated, reserved=exc.reserved,
            largest_free=exc.largest_free, free=free, free_huge=free_huge, total=total, limit=exc.limit,
        ) from None  # fmt: skip


def free(context: Context, block: Block) -> None:
    """Give a block back; RT_PARAM_INVALID if it is not allocated from this context's pool."""
    try:
        pool_of(context).free(block)
    except ValueError as exc:
        raise CannError(ErrorCode.RT_PARAM_INVALID, str(exc)) from None


def set_limit(context: Context, limit: int | float) -> int:
    """Cap the pool's reserved bytes: an int is bytes, a float in (0, 1] a fraction of HBM
    (torch.cuda.set_per_process_memory_fraction); returns the limit in bytes."""
    if isinstance(limit, bool) or not isinstance(limit, int | float):
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"limit must be bytes or a fraction, not {type(limit).__name__}")
    _, total = memory_ops.mem_info(context, memory_ops.MemAttr.HBM_MEM)
    if isinstance(limit, float):
        if not 0.0 < limit <= 1.0:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"fraction {limit} must be in (0, 1]")
        nbytes = int(limit * total)
    else:
        nbytes = limit
    if nbytes <= 0:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"limit {nbytes} bytes must be positive")
    pool_of(context).limit = nbytes
    return nbytes


def _context_for(device: object) -> Context:
    """The context of a Device, a device index, or (None) the calling thread's current context."""
    runtime = get_runtime()
    if device is None:
        context = runtime.current_context_or_none()
        return context if context is not None else runtime.set_device(0)
    index = getattr(device, "index", device)
    if isinstance(index, bool) or not isinstance(index, int):
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"device must be a Device or an index, not {device!r}")
    context = getattr(device, "context", None)
    if isinstance(context, Context):
        return context
    return runtime.device_state(index).default_context


def _stats_for(device: object) -> tuple[int, dict[str, int], list[str]]:
    context = _context_for(device)
    stats = pool_of(context).memory_stats()
    free, total = memory_ops.mem_info(context, memory_ops.MemAttr.HBM_MEM)
    extra = [f"HBM: {free} bytes free of {total}"]
    for pool_id, pool in sorted(stream_pools.pools_of(context).stream_ordered.items()):
        extra.append(f"stream-ordered pool {pool_id}: {pool.used} bytes in use, {pool.reserved} reserved")
    return context.device_id, stats, extra


def _timeline_for(device: object) -> MemoryTimeline:
    return memory_ops.timeline_of(_context_for(device))


memory_summary.stats_source = _stats_for
memory_summary.timeline_source = _timeline_for
