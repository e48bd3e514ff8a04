"""Stream-ordered memory in the Pythonic API: `Device.mem_pool()`, `Stream.malloc_async`,
`Stream.free_async` (over cannrt.runtime.stream_pools; CuPy's MemoryAsyncPool, CUDA's pools)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cannrt.api.array import DeviceArray
from cannrt.dtypes import acl_code
from cannrt.errors import CannError, ErrorCode
from cannrt.memory.stream_ordered import PoolAttr
from cannrt.runtime import stream_pools

if TYPE_CHECKING:
    from cannrt.api.device import Device
    from cannrt.api.stream import Stream


class MemPool:
    """A stream-ordered pool of one device (aclrtMemPoolCreate); its attributes as properties."""

    def __init__(self, device: Device, pool_id: int) -> None:
        self.device = device
        self.pool_id = pool_id

    def __repr__(self) -> str:
        return f"<MemPool {self.pool_id} on device {self.device.index}: {self.reserved} bytes reserved>"

    def _get(self, attr: PoolAttr) -> int:
        return stream_pools.get_attr(self.device.context, self.pool_id, attr)

    @property
    def release_threshold(self) -> int:
        """Reserved bytes the pool keeps when it gives memory back."""
        return self._get(PoolAttr.RELEASE_THRESHOLD)

    @release_threshold.setter
    def release_threshold(self, nbytes: int) -> None:
        stream_pools.set_attr(self.device.context, self.pool_id, PoolAttr.RELEASE_THRESHOLD, nbytes)

    def set_reuse(self, *, opportunistic: bool | None = None, internal_dependencies: bool | None = None) -> None:
        """Whether another stream may reuse memory whose free completed (opportunistic), or by
        waiting for the free (internal dependencies)."""
        for attr, value in (
            (PoolAttr.REUSE_ALLOW_OPPORTUNISTIC, opportunistic),
            (PoolAttr.REUSE_ALLOW_INTERNAL_DEPENDENCIES, internal_dependencies),
        ):
            if value is not None:
                stream_pools.set_attr(self.device.context, self.pool_id, attr, int(value))

    @property
    def reserved(self) -> int:
        """Bytes of device memory the pool holds."""
        return self._get(PoolAttr.RESERVED_MEM_CURRENT)

    @property
    def used(self) -> int:
        """Bytes handed out and not yet freed."""
        return self._get(PoolAttr.USED_MEM_CURRENT)

    def trim_to(self, keep: int) -> None:
        """Give memory back down to keep bytes (aclrtMemPoolTrimTo)."""
        stream_pools.trim_to(self.device.context, self.pool_id, keep)

    def destroy(self) -> None:
        """Destroy the pool (aclrtMemPoolDestroy)."""
        stream_pools.destroy(self.device.context, self.pool_id)


def create_pool(device: Device, release_threshold: int = 0, max_size: int | None = None) -> MemPool:
    """A new stream-ordered pool on device."""
    pool = MemPool(device, stream_pools.create(device.context, max_size))
    if release_threshold:
        pool.release_threshold = release_threshold
    return pool


def malloc_async(
    stream: Stream, shape: Sequence[int] | int, dtype: Any = np.float32, pool: MemPool | None = None
) -> DeviceArray:
    """An array whose memory is allocated in stream order on stream (aclrtMemPoolMallocAsync);
    its free() frees it on that stream."""
    from cannrt.api.device import Device  # device.py imports this module's users

    rt = stream._rt
    shape_t = (shape,) if isinstance(shape, int) else tuple(shape)
    try:
        dt = np.dtype(dtype)
        acl_code(dt)
        count = int(np.prod(shape_t, dtype=np.int64))
    except (TypeError, ValueError) as exc:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"bad shape {shape!r} or dtype {dtype!r}: {exc}") from None
    if any(not isinstance(d, int) or d < 0 for d in shape_t):
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"shape {shape_t} must hold non-negative ints")
    device = Device.__new__(Device)  # the stream's context, without making it current
    device.runtime, device.index, device.context = rt.context.runtime, rt.device_id, rt.context
    address = stream_pools.malloc_async(rt.context, max(1, count * dt.itemsize), rt, pool.pool_id if pool else None)
    array = DeviceArray(device, address, shape_t, dt)
    array.ordered_on = rt
    return array


def free_async(stream: Stream, array: DeviceArray) -> None:
    """Free a stream-ordered array when stream reaches this point (aclrtMemPoolFreeAsync)."""
    if array.ordered_on is None:
        raise CannError(ErrorCode.RT_PARAM_INVALID, f"{array!r} was not allocated by malloc_async")
    array.free(stream._rt)
