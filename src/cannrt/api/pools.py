"""The caching pool behind `Device.empty` / `DeviceArray.free` (one pool per context).

Segments come from aclrtMalloc in the context; cross-stream reuse waits on events recorded on
the other streams (see cannrt.memory.caching for the policies).
"""

from __future__ import annotations

from collections.abc import Hashable

from cannrt.errors import ErrorCode, OutOfMemoryError
from cannrt.memory.caching import Block, CachingAllocator, PoolOutOfMemory
from cannrt.runtime import memory_ops
from cannrt.runtime.context import Context
from cannrt.runtime.event import Event as RtEvent
from cannrt.runtime.stream import Stream as RtStream


def pool_of(context: Context) -> CachingAllocator:
    """The context's caching pool (created on first use)."""
    pool = context.memory_pool
    if pool is None:
        pool = context.memory_pool = CachingAllocator(
            lambda nbytes: memory_ops.malloc(context, nbytes),
            lambda address: memory_ops.free(context, address),
            lambda stream: _record(context, stream),
            _done,
            context.note_block,  # the MMU checks accesses against the block; reports name it
        )
    assert isinstance(pool, CachingAllocator)
    return pool


def _record(context: Context, stream: Hashable) -> RtEvent:
    assert isinstance(stream, RtStream)
    event = context.create_event()
    event.record(stream)
    return event


def _done(event: object) -> bool:
    assert isinstance(event, RtEvent)
    if event.destroyed or event.query():
        if not event.destroyed:
            event.destroy()
        return True
    return False


def allocate(context: Context, nbytes: int, stream: RtStream) -> Block:
    """A pool block for stream; OutOfMemoryError carries requested, free, total and reserved bytes."""
    try:
        return pool_of(context).allocate(nbytes, stream)
    except PoolOutOfMemory as exc:
        free, total = memory_ops.mem_info(context, memory_ops.MemAttr.HBM_MEM)
        raise OutOfMemoryError(
            ErrorCode.RT_MEMORY_ALLOCATION,
            f"device {context.device_id}: requested {exc.requested} bytes, {free} free of {total}, "
            f"{exc.reserved} reserved by the caching pool",
            requested=exc.requested, free=free, total=total, reserved=exc.reserved,
        ) from None  # fmt: skip
