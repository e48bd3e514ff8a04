"""Device: one NPU of the simulated machine and its default context (the API's entry point)."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cannrt.abi.params import shape_nbytes
from cannrt.abi.sqe import DescriptorError
from cannrt.api import pools
from cannrt.api.array import DeviceArray
from cannrt.api.current import current_stream
from cannrt.api.event import Event
from cannrt.api.stream import Stream
from cannrt.dtypes import acl_code
from cannrt.errors import CannError, ErrorCode
from cannrt.memory.lifetimes import Topology
from cannrt.memory.static_pool import StaticPool
from cannrt.runtime import memory_ops
from cannrt.runtime.context import Context
from cannrt.runtime.core import get_runtime
from cannrt.runtime.event import EVENT_SYNC, EVENT_TIME_LINE

if TYPE_CHECKING:
    from cannrt.api.graph_memory import GraphMemory
    from cannrt.api.mempool import MemPool


class Device:
    """One NPU of the simulated machine (aclrtSetDevice); its default context becomes current."""

    def __init__(self, index: int = 0) -> None:
        self.runtime = get_runtime()
        self.index = index
        self.context: Context = self.runtime.set_device(index)

    def __repr__(self) -> str:
        return f"<Device {self.index}: {self.name}>"

    @property
    def name(self) -> str:
        """The chip's name (aclrtGetSocName)."""
        return self.runtime.settings.chip.name

    def use(self) -> Device:
        """Make this device's context current on the calling thread."""
        self.runtime.set_context(self.context)
        return self

    @property
    def default_stream(self) -> Stream:
        """The context's default stream (cannot be destroyed)."""
        return Stream._wrap(self.context.default_stream)

    def stream(self, priority: int = 0, flags: int = 0) -> Stream:
        """A new stream; smaller priority values are more urgent, out-of-range values clamp."""
        return Stream._wrap(self.context.create_stream(priority, flags))

    def event(self, timing: bool = True) -> Event:
        """A CUDA-like event (record captures queued work; never recorded counts as complete)."""
        flags = EVENT_SYNC | (EVENT_TIME_LINE if timing else 0)
        return Event(self.context.create_event(flags))

    def legacy_event(self) -> Event:
        """A legacy event: a wait blocks until a record, reset clears it."""
        return Event(self.context.create_event(0, legacy=True))

    def synchronize(self, timeout_ms: int | None = None) -> None:
        """Wait for all streams of the device (aclrtSynchronizeDevice)."""
        self.runtime.synchronize_device(self.index, timeout_ms)

    def mem_info(self) -> tuple[int, int]:
        """(free, total) bytes of HBM."""
        return memory_ops.mem_info(self.context, memory_ops.MemAttr.HBM_MEM)

    def empty(self, shape: Sequence[int] | int, dtype: Any = np.float32) -> DeviceArray:
        """Uninitialised device memory from the caching pool, for the current stream (the
        context's sticky error first, as every other call, even when the pool has the block)."""
        self.context.check_sticky()
        try:
            dt = np.dtype(dtype)
            acl_code(dt)
        except (TypeError, ValueError) as exc:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"unsupported dtype {dtype!r}: {exc}") from None
        dims: Any = (shape,) if hasattr(type(shape), "__index__") else shape
        try:
            nbytes = shape_nbytes(dims, dt.itemsize)  # TypeError for dimensions that are not integers
        except DescriptorError as exc:  # negative, or past int64
            raise CannError(ErrorCode.RT_PARAM_INVALID, str(exc)) from None
        shape_t = tuple(operator.index(dim) for dim in dims)
        block = pools.allocate(self.context, max(1, nbytes), current_stream(self)._rt)
        array = DeviceArray(self, block.address, shape_t, dt)
        array.block = block
        return array

    def memory_stats(self) -> dict[str, int]:
        """The caching pool's statistics (PyTorch's memory_stats keys)."""
        return pools.pool_of(self.context).memory_stats()

    def empty_cache(self) -> None:
        """Give every wholly free pool segment back to the device."""
        pools.pool_of(self.context).empty_cache()

    def set_memory_limit(self, limit: int | float) -> int:
        """Cap the caching pool: bytes, or a fraction of HBM (set_per_process_memory_fraction)."""
        return pools.set_limit(self.context, limit)

    def mem_pool(self, release_threshold: int = 0, max_size: int | None = None) -> MemPool:
        """A new stream-ordered pool (aclrtMemPoolCreate) for Stream.malloc_async."""
        from cannrt.api.mempool import create_pool

        return create_pool(self, release_threshold, max_size)

    def array(self, data: Any, dtype: Any = None, stream: Stream | None = None) -> DeviceArray:
        """Copy a numpy array (or anything np.asarray takes) to the device."""
        try:
            host = np.asarray(data, dtype=dtype, order="C")  # keeps 0-d shapes, unlike ascontiguousarray
        except (TypeError, ValueError) as exc:
            message = f"cannot make an array of {type(data).__name__}: {exc}"
            raise CannError(ErrorCode.RT_PARAM_INVALID, message) from None
        result = self.empty(host.shape, host.dtype)
        result.copy_from(host, stream)
        return result

    def static_pool(self, topology: Topology, *, time_limit: float = 1.0) -> GraphMemory:
        """Plan a graph's memory topology into one block (the runtime's static memory pool)."""
        from cannrt.api.graph_memory import GraphMemory

        pool = StaticPool(
            topology,
            lambda nbytes: memory_ops.malloc(self.context, nbytes),
            lambda address: memory_ops.free(self.context, address),
            time_limit=time_limit,
        )
        return GraphMemory(self, pool)

    def reset(self) -> None:
        """Release everything on the device and clear sticky errors (aclrtResetDevice)."""
        self.runtime.reset_device(self.index)


def device_count() -> int:
    """Number of NPUs on this host (aclrtGetDeviceCount)."""
    return get_runtime().settings.device_count
