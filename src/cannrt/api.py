"""The Pythonic API: Device, Stream, Event and DeviceArray over the runtime; errors raise CannError."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cannrt import memory_pool
from cannrt.abi import TensorArg
from cannrt.dtypes import acl_code
from cannrt.errors import CannError, ErrorCode
from cannrt.memory.caching import Block
from cannrt.memory.lifetimes import Topology
from cannrt.memory.static_pool import StaticPool
from cannrt.runtime import memory_ops
from cannrt.runtime.context import Context
from cannrt.runtime.core import get_runtime
from cannrt.runtime.event import EVENT_SYNC, EVENT_TIME_LINE
from cannrt.runtime.event import Event as RtEvent
from cannrt.runtime.stream import Stream as RtStream

if TYPE_CHECKING:
    from cannrt.graph_memory import GraphMemory

_current = threading.local()


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
        """Uninitialised device memory from the caching pool, for the current stream."""
        shape_t = (shape,) if isinstance(shape, int) else tuple(shape)
        try:
            dt = np.dtype(dtype)
            acl_code(dt)
        except (TypeError, ValueError) as exc:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"unsupported dtype {dtype!r}: {exc}") from None
        nbytes = int(np.prod(shape_t, dtype=np.int64)) * dt.itemsize
        block = memory_pool.allocate(self.context, max(1, nbytes), current_stream(self)._rt)
        array = DeviceArray(self, block.address, shape_t, dt)
        array.block = block
        return array

    def memory_stats(self) -> dict[str, int]:
        """The caching pool's statistics (PyTorch's memory_stats keys)."""
        return memory_pool.pool_of(self.context).memory_stats()

    def empty_cache(self) -> None:
        """Give every wholly free pool segment back to the device."""
        memory_pool.pool_of(self.context).empty_cache()

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
        from cannrt.graph_memory import GraphMemory

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


def _launch_on(stream: RtStream, kernel: str, block_dim: int, specs: Sequence[Any], name: str | None) -> int:
    """Launch through the runtime that owns the stream."""
    return stream.context.runtime.launch(stream, kernel, block_dim, specs, name)


class Stream:
    """An in-order task queue; `with stream:` makes it the current stream for array copies."""

    def __init__(self, device: Device | None = None, priority: int = 0, flags: int = 0) -> None:
        device = device or Device(0)
        self._rt = device.context.create_stream(priority, flags)
        self._launchers = self._rt.launchers

    @classmethod
    def _wrap(cls, rt_stream: RtStream) -> Stream:
        wrapper = cls.__new__(cls)
        wrapper._rt = rt_stream
        wrapper._launchers = rt_stream.launchers
        return wrapper

    def __repr__(self) -> str:
        return repr(self._rt)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other._rt is self._rt

    def __hash__(self) -> int:
        return id(self._rt)

    def __enter__(self) -> Stream:
        stack = getattr(_current, "streams", None) or []
        stack.append(self)
        _current.streams = stack
        return self

    def __exit__(self, *exc: object) -> None:
        _current.streams.pop()

    @property
    def priority(self) -> int:
        """Effective priority after clamping."""
        return self._rt.priority

    def launch(self, kernel: str, *args: Any, block_dim: int = 1, name: str | None = None) -> None:
        """Enqueue a kernel with DeviceArray and scalar arguments (aclrtLaunchKernel); `name`
        names this op in dumps (default: the kernel name)."""
        if not args:
            try:
                send = self._launchers[kernel if block_dim == 1 else (kernel, block_dim)]
            except KeyError:
                pass  # not prepared yet: the checked path below prepares it
            else:
                send()  # the same parameterless launch as before: its SQE was packed in advance
                return
            self._rt.context.runtime.launch(self._rt, kernel, block_dim, (), name)
            return
        specs: list[TensorArg | int | float] = []
        for index, arg in enumerate(args):
            if isinstance(arg, DeviceArray):
                arg._check_usable_on(self._rt, index)
                specs.append(arg.tensor_arg())
            elif isinstance(arg, bool | int | float | np.integer | np.floating):
                specs.append(arg.item() if isinstance(arg, np.generic) else arg)
            else:
                raise CannError(
                    ErrorCode.RT_PARAM_INVALID, f"argument {index} of {kernel}: unsupported {type(arg).__name__}"
                )
        _launch_on(self._rt, kernel, block_dim, specs, name)

    def record(self, event: Event | None = None) -> Event:
        """Record an event (a new timing event if none given) on this stream."""
        if event is None:
            event = Event(self._rt.context.create_event())
        event._rt.record(self._rt)
        return event

    def wait(self, event: Event) -> None:
        """Later tasks of this stream wait for the event's newest record (aclrtStreamWaitEvent)."""
        event._rt.wait_on(self._rt)

    def wait_stream(self, other: Stream) -> None:
        """Later tasks of this stream wait for everything queued on other so far."""
        self.wait(other.record())

    def query(self) -> bool:
        """True if all queued work completed."""
        return self._rt.query()

    @property
    def done(self) -> bool:
        """Same as query()."""
        return self.query()

    def synchronize(self, timeout_ms: int | None = None) -> None:
        """Block until all queued work completed (CannTimeout 507046 after timeout_ms modelled)."""
        self._rt.synchronize(timeout_ms)

    def launch_host_func(self, fn: Any, args: Any = None) -> None:
        """Run fn(args) on a host thread once earlier tasks finish; later tasks wait for it."""
        get_runtime().callbacks.launch_host_func(self._rt, fn, args)

    def set_stop_on_error(self, stop: bool = True) -> None:
        """Discard later tasks after a failure instead of continuing."""
        self._rt.set_failure_mode(stop)

    def destroy(self, force: bool = False) -> None:
        """Destroy (waits for pending tasks; force discards them)."""
        self._rt.destroy(force)


def active_stream(device: Device) -> Stream | None:
    """The innermost `with stream:` of this thread for device, if any."""
    stack: list[Stream] = getattr(_current, "streams", None) or []
    for stream in reversed(stack):
        if stream._rt.device_id == device.index:
            return stream
    return None


def current_stream(device: Device) -> Stream:
    """The innermost `with stream:` of this thread for device, else its default stream."""
    return active_stream(device) or device.default_stream


class Event:
    """A record/wait synchronisation point with device timestamps."""

    def __init__(self, rt_event: RtEvent) -> None:
        self._rt = rt_event

    def __repr__(self) -> str:
        return repr(self._rt)

    def record(self, stream: Stream) -> None:
        """Capture the work queued on stream now."""
        self._rt.record(stream._rt)

    def query(self) -> bool:
        """True once the newest record completed (or if never recorded)."""
        return self._rt.query()

    def synchronize(self, timeout_ms: int | None = None) -> None:
        """Block until the newest record completed."""
        self._rt.synchronize(timeout_ms)

    def reset(self, stream: Stream) -> None:
        """Clear the event as a task on stream."""
        self._rt.reset(stream._rt)

    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds from this event's record to end's."""
        return self._rt.elapsed_ms(end._rt)

    @property
    def timestamp_ns(self) -> int:
        """Device time of the newest record."""
        return self._rt.timestamp_ns()

    def destroy(self) -> None:
        """Release the event."""
        self._rt.destroy()


class DeviceArray:
    """A typed, shaped view of device memory; moves to and from numpy."""

    def __init__(
        self, device: Device, address: int, shape: tuple[int, ...], dtype: np.dtype, *, owned: bool = True
    ) -> None:
        self.device = device
        self.owned = owned  # False for views into a pool: free() is the pool's business
        self.block: Block | None = None  # set when the memory comes from the caching pool
        self.address = address
        self.shape = shape
        self.dtype = dtype
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        self.freed = False

    def __repr__(self) -> str:
        return f"<DeviceArray {self.shape} {self.dtype} at 0x{self.address:x} on device {self.device.index}>"

    @property
    def size(self) -> int:
        """Number of elements."""
        return self.nbytes // self.dtype.itemsize

    def tensor_arg(self) -> TensorArg:
        """The kernel argument describing this array."""
        return TensorArg(self.address, acl_code(self.dtype), self.shape)

    def _check_live(self) -> None:
        if self.freed:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"DeviceArray at 0x{self.address:x} was freed")

    def _check_usable_on(self, stream: RtStream, index: int) -> None:
        self._check_live()
        if stream.context is not self.device.context:
            raise CannError(
                ErrorCode.RT_STREAM_CONTEXT,
                f"argument {index} lives on device {self.device.index}, the stream on device {stream.device_id}",
            )

    def copy_from(self, host: np.ndarray, stream: Stream | None = None) -> None:
        """Copy a host array in: async on stream (or the `with stream:` one), else synchronous."""
        self._check_live()
        stream = stream or active_stream(self.device)
        data = np.asarray(host, dtype=self.dtype, order="C")
        if data.nbytes != self.nbytes:
            raise CannError(
                ErrorCode.RT_PARAM_INVALID, f"host array has {data.nbytes} bytes, device array {self.nbytes}"
            )
        ctx = self.device.context
        if stream is None:
            memory_ops.memcpy(ctx, self.address, self.nbytes, data.ctypes.data, data.nbytes, 1)
            return
        _keepalive(stream, data)
        memory_ops.memcpy_async(ctx, self.address, self.nbytes, data.ctypes.data, data.nbytes, 1, stream._rt)

    def copy_to(self, host: np.ndarray, stream: Stream) -> None:
        """Queue a copy into a preallocated, contiguous host array (read it after synchronising)."""
        self._check_live()
        if not host.flags.c_contiguous or host.nbytes != self.nbytes:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"host array must be contiguous with {self.nbytes} bytes")
        memory_ops.memcpy_async(
            self.device.context, host.ctypes.data, host.nbytes, self.address, self.nbytes, 2, stream._rt
        )

    def to_numpy(self, stream: Stream | None = None) -> np.ndarray:
        """Copy out to a new numpy array: on stream (or the `with stream:` one) then synchronising
        it, else synchronously."""
        self._check_live()
        stream = stream or active_stream(self.device)
        host = np.empty(self.shape, dtype=self.dtype)
        if stream is None:
            memory_ops.memcpy(self.device.context, host.ctypes.data, host.nbytes, self.address, self.nbytes, 2)
        else:
            self.copy_to(host, stream)
            stream.synchronize()
        return host

    def free(self) -> None:
        """Return the memory (aclrtFree); the array must not be used afterwards."""
        if not self.owned:
            raise CannError(ErrorCode.RT_PARAM_INVALID, "this array is a view into a static pool; release the pool")
        if not self.freed:
            self.freed = True
            if self.block is not None:
                memory_pool.pool_of(self.device.context).free(self.block)
            else:
                memory_ops.free(self.device.context, self.address)

    def record_stream(self, stream: Stream) -> None:
        """The array is used on stream too: its memory is reused only after that work (PyTorch's
        Tensor.record_stream)."""
        if self.block is not None:
            memory_pool.pool_of(self.device.context).record_stream(self.block, stream._rt)


def _keepalive(stream: Stream, data: np.ndarray) -> None:
    """Keep an async copy's host source alive until the stream passes it."""
    pending = getattr(stream._rt, "_host_sources", None)
    if pending is None:
        pending = stream._rt._host_sources = []  # type: ignore[attr-defined]
    pending.append((stream._rt.tail, data))
    if len(pending) > 64:
        head = get_runtime().driver.sq_head(stream._rt.device_id, stream._rt.sq_id)
        pending[:] = [(pos, arr) for pos, arr in pending if pos >= head]


def device_count() -> int:
    """Number of NPUs on this host (aclrtGetDeviceCount)."""
    return get_runtime().settings.device_count
