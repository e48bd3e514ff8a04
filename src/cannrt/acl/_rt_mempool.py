"""Stream-ordered memory pools (aclrtMemPoolCreate/Destroy/SetAttr/GetAttr/TrimTo,
aclrtMemPoolMallocAsync/FreeAsync, aclrtMallocAsync/FreeAsync on the device's default pool).

Pool handles are ints; attributes take CUDA's cudaMemPoolAttr values (cannrt.memory.stream_ordered.PoolAttr):
REUSE_FOLLOW_EVENT_DEPENDENCIES=1, REUSE_ALLOW_OPPORTUNISTIC=2, REUSE_ALLOW_INTERNAL_DEPENDENCIES=3,
RELEASE_THRESHOLD=4, RESERVED_MEM_CURRENT=5, RESERVED_MEM_HIGH=6, USED_MEM_CURRENT=7, USED_MEM_HIGH=8.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    stream_of,
)
from cannrt.errors import ErrorCode
from cannrt.runtime import stream_pools
from cannrt.runtime.context import Context


@dataclass(frozen=True)
class _Pool:
    context: Context
    pool_id: int


_pools: HandleTable[_Pool] = HandleTable(Kind.MEMORY_POOL)


def _props(props: object) -> int | None:
    """maxSize from an aclrtMemPoolProps dict (None or 0: no limit); the location must be this device."""
    if props is None:
        return None
    if not isinstance(props, dict):
        raise ArgTypeError(f"props must be a dict (aclrtMemPoolProps), not {type(props).__name__}")
    location = props.get("location", {})
    device = location.get("id", current_context().device_id) if isinstance(location, dict) else None
    if device != current_context().device_id:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"props location {location!r} is not the current device")
    max_size = props.get("maxSize", 0)
    if not isinstance(max_size, int) or max_size < 0:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"props maxSize must be an int >= 0, got {max_size!r}")
    return max_size or None


def _pool_of(handle: object) -> _Pool:
    as_handle("pool", handle)
    runtime()
    entry = require(_pools, "pool", handle, "a memory pool from mem_pool_create", ErrorCode.RT_INVALID_HANDLE)
    if entry.context.destroyed:
        raise fail(ErrorCode.RT_INVALID_HANDLE, f"memory pool {handle!r} belonged to a destroyed context")
    return entry


@api(0)
def mem_pool_create(props: dict[str, Any] | None) -> int:
    """(pool, ret): a stream-ordered pool on the current device (aclrtMemPoolCreate)."""
    context = current_context()
    return _pools.add(_Pool(context, stream_pools.create(context, _props(props))))


@api()
def mem_pool_destroy(pool: int) -> None:
    """Destroy a pool; outstanding allocations keep it until they are freed (aclrtMemPoolDestroy)."""
    entry = _pool_of(pool)
    stream_pools.destroy(entry.context, entry.pool_id)
    _pools.remove(as_handle("pool", pool))


@api()
def mem_pool_set_attr(pool: int, attr: int, value: int) -> None:
    """Set a pool attribute (aclrtMemPoolSetAttr)."""
    entry = _pool_of(pool)
    stream_pools.set_attr(entry.context, entry.pool_id, as_int("attr", attr), as_int("value", value))


@api(0)
def mem_pool_get_attr(pool: int, attr: int) -> int:
    """(value, ret) of a pool attribute (aclrtMemPoolGetAttr)."""
    entry = _pool_of(pool)
    return stream_pools.get_attr(entry.context, entry.pool_id, as_int("attr", attr))


@api()
def mem_pool_trim_to(pool: int, min_bytes_to_keep: int) -> None:
    """Release unused pool memory down to min_bytes_to_keep (aclrtMemPoolTrimTo)."""
    entry = _pool_of(pool)
    stream_pools.trim_to(entry.context, entry.pool_id, as_int("min_bytes_to_keep", min_bytes_to_keep))


@api(0)
def mem_pool_malloc_async(size: int, pool: int, stream: int) -> int:
    """(dev_ptr, ret): stream-ordered memory from pool for stream (aclrtMemPoolMallocAsync)."""
    nbytes = as_int("size", size)
    target = stream_of(as_handle("stream", stream), submit=True)
    entry = _pool_of(pool)
    if entry.context is not target.context:
        raise fail(ErrorCode.RT_STREAM_CONTEXT, "the pool and the stream belong to different contexts")
    return stream_pools.malloc_async(target.context, nbytes, target, entry.pool_id)


def _free_async(dev_ptr: object, stream: object) -> None:
    address = as_handle("dev_ptr", dev_ptr)
    target = stream_of(as_handle("stream", stream), submit=True)
    stream_pools.free_async(target.context, address, target)


@api()
def mem_pool_free_async(dev_ptr: int, stream: int) -> None:
    """Free stream-ordered memory when stream reaches this point (aclrtMemPoolFreeAsync)."""
    _free_async(dev_ptr, stream)


@api(0)
def malloc_async(size: int, stream: int) -> int:
    """(dev_ptr, ret): stream-ordered memory from the device's default pool (aclrtMallocAsync)."""
    nbytes = as_int("size", size)
    target = stream_of(as_handle("stream", stream), submit=True)
    return stream_pools.malloc_async(target.context, nbytes, target)


@api()
def free_async(dev_ptr: int, stream: int) -> None:
    """Free memory from malloc_async when stream reaches this point (aclrtFreeAsync)."""
    _free_async(dev_ptr, stream)


@on_finalize
def _forget_all() -> None:
    """Drop pool handles."""
    _pools.clear()
