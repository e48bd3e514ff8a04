"""Stream-ordered pools of a context (aclrtMemPoolCreate/Destroy/SetAttr/GetAttr/TrimTo,
aclrtMemPoolMallocAsync/FreeAsync, aclrtMallocAsync/FreeAsync on the device's default pool).

The pools themselves are cannrt.memory.stream_ordered; this module gives them device memory
(page-exact segments), events on the context's streams, and turns their failures into CannErrors.
A pool destroyed with allocations outstanding is released once the last one is freed (CUDA's
cuMemPoolDestroy).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from cannrt.errors import CannError, ErrorCode, OutOfMemoryError
from cannrt.memory.context_pools import ContextPools
from cannrt.memory.stream_ordered import PoolAttr, PoolExhausted, StreamOrderedPool
from cannrt.runtime import memory_ops
from cannrt.runtime.context import Context
from cannrt.runtime.event import Event
from cannrt.runtime.stream import Stream

_LOCK = threading.RLock()


def pools_of(context: Context) -> ContextPools:
    """The context's pools (created on first use)."""
    with _LOCK:
        holder = context.memory_pool
        if holder is None:
            holder = context.memory_pool = ContextPools()
        assert isinstance(holder, ContextPools)
        return holder


def create(context: Context, max_size: int | None = None) -> int:
    """A new stream-ordered pool; returns its id (aclrtMemPoolCreate)."""
    context.check_alive()
    context.check_sticky()
    if max_size is not None and max_size <= 0:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"pool max size {max_size} must be positive")
    pool = StreamOrderedPool(
        lambda nbytes: memory_ops.malloc_segment(context, nbytes),
        lambda address: memory_ops.free_segment(context, address),
        free_point,
        free_point_reached,
        _waiter(context),
        max_size=max_size,
        on_block=context.note_block,
    )
    with _LOCK:
        holder = pools_of(context)
        pool_id = holder.next_id
        holder.next_id += 1
        holder.stream_ordered[pool_id] = pool

    def on_event(action: str, address: int, delta: int, stream: Hashable) -> None:
        stream_id = stream.stream_id if isinstance(stream, Stream) else -1
        memory_ops.record_event(context, action, address, delta, f"stream_ordered:{pool_id}", stream_id)

    pool.on_event = on_event
    return pool_id


def default_pool(context: Context) -> int:
    """The id of the device's default pool (made on first use), which aclrtMallocAsync uses."""
    with _LOCK:
        holder = pools_of(context)
        if not holder.default_id:
            holder.default_id = create(context)
        return holder.default_id


def pool(context: Context, pool_id: int) -> StreamOrderedPool:
    """A live pool by id; RT_INVALID_HANDLE otherwise."""
    found = pools_of(context).stream_ordered.get(pool_id)
    if found is None:
        raise CannError(ErrorCode.RT_INVALID_HANDLE, f"memory pool {pool_id} does not exist in this context")
    return found


def destroy(context: Context, pool_id: int) -> None:
    """Destroy a pool (aclrtMemPoolDestroy); the default pool cannot be destroyed."""
    with _LOCK:
        holder = pools_of(context)
        if pool_id == holder.default_id:
            raise CannError(ErrorCode.RT_PARAM_INVALID, "the device's default memory pool cannot be destroyed")
        target = pool(context, pool_id)
        del holder.stream_ordered[pool_id]
        if target.outstanding():
            holder.retiring.append(target)
            return
    memory_ops.quiesce(context)
    target.release_all()


def malloc_async(context: Context, nbytes: int, stream: Stream, pool_id: int | None = None) -> int:
    """Stream-ordered allocation of nbytes for stream (aclrtMemPoolMallocAsync / aclrtMallocAsync)."""
    memory_ops.check_stream(context, stream)
    if nbytes <= 0:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"malloc_async size must be positive, got {nbytes}")
    target = pool(context, default_pool(context) if pool_id is None else pool_id)
    context.runtime.host_cost(context.runtime.settings.host_costs.call_ns)
    try:
        return target.malloc_async(nbytes, stream)
    except PoolExhausted as exc:
        if isinstance(exc.cause, CannError) and not isinstance(exc.cause, OutOfMemoryError):
            raise exc.cause from None
        free, total = memory_ops.mem_info(context, memory_ops.MemAttr.HBM_MEM)
        raise OutOfMemoryError(
            ErrorCode.RT_MEMORY_ALLOCATION,
            f"device {context.device_id}: stream-ordered pool {pool_id or 'default'}: tried to allocate "
            f"{exc.requested} bytes, which needed a segment of {exc.segment}; {target.used} bytes in use, "
            f"{exc.reserved} reserved by the pool; the device has {free} free of {total}: {exc.cause}",
            requested=exc.requested, segment=exc.segment, allocated=target.used, reserved=exc.reserved,
            free=free, total=total,
        ) from None  # fmt: skip


def free_async(context: Context, address: int, stream: Stream) -> None:
    """Free a stream-ordered allocation when stream reaches this point (aclrtMemPoolFreeAsync)."""
    memory_ops.check_stream(context, stream)
    holder = pools_of(context)
    with _LOCK:
        owners = [p for p in (*holder.stream_ordered.values(), *holder.retiring) if p.owns(address)]
    if not owners:
        raise CannError(
            ErrorCode.RT_PARAM_INVALID, f"free_async: 0x{address:x} is not a live allocation of a stream-ordered pool"
        )
    context.runtime.host_cost(context.runtime.settings.host_costs.call_ns)
    owner = owners[0]
    owner.free_async(address, stream)
    if owner in holder.retiring and not owner.outstanding():
        holder.retiring.remove(owner)
        memory_ops.quiesce(context)
        owner.release_all()


def set_attr(context: Context, pool_id: int, attr: int, value: int) -> None:
    """aclrtMemPoolSetAttr; RT_PARAM_INVALID for an unknown attribute or a bad value."""
    try:
        pool(context, pool_id).set_attr(attr, value)
    except ValueError as exc:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"memory pool attribute {attr}: {exc}") from None


def get_attr(context: Context, pool_id: int, attr: int) -> int:
    """aclrtMemPoolGetAttr; RT_PARAM_INVALID for an unknown attribute."""
    try:
        return pool(context, pool_id).get_attr(attr)
    except ValueError as exc:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"memory pool attribute {attr}: {exc}") from None


def trim_to(context: Context, pool_id: int, keep: int) -> None:
    """Release unused memory down to keep bytes (aclrtMemPoolTrimTo)."""
    if keep < 0:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"trim_to: {keep} bytes to keep must be >= 0")
    pool(context, pool_id).trim_to(keep)


@dataclass(frozen=True)
class FreePoint:
    """Where a free sits in its stream: complete once the stream's head passed position."""

    stream: Stream
    position: int

    def reached(self) -> bool:
        """True once the device ran the stream's work up to the free (or the stream is gone)."""
        return self.stream.destroyed or self.stream.head() >= self.position


def free_point(stream: Hashable) -> FreePoint:
    """Where a stream's work stands at a free: its queued work must run before the block is reused."""
    assert isinstance(stream, Stream)
    return FreePoint(stream, stream.tail)


def free_point_reached(point: object) -> bool:
    """The pools' test of a FreePoint."""
    assert isinstance(point, FreePoint)
    return point.reached()


def _waiter(context: Context) -> Callable[[Hashable, object], None]:
    """Make a stream wait for a free on another stream: an event recorded there now (at or after
    the free), kept until both its record and the wait have run."""

    def wait(stream: Hashable, point: object) -> None:
        assert isinstance(stream, Stream) and isinstance(point, FreePoint)
        holder = pools_of(context)
        event = context.create_event()
        event.record(point.stream)
        recorded = FreePoint(point.stream, point.stream.tail)
        event.wait_on(stream)
        with _LOCK:
            holder.events = [(e, marks) for e, marks in holder.events if not _release_event(e, marks)]
            holder.events.append((event, (recorded, FreePoint(stream, stream.tail))))

    return wait


def _release_event(event: object, marks: tuple[object, ...]) -> bool:
    """Destroy an inserted event once its record and wait ran; True if it was destroyed."""
    assert isinstance(event, Event)
    if event.destroyed or all(isinstance(mark, FreePoint) and mark.reached() for mark in marks):
        if not event.destroyed:
            event.destroy()
        return True
    return False


__all__ = ["PoolAttr", "create", "default_pool", "destroy", "free_async", "malloc_async", "pools_of", "trim_to"]
