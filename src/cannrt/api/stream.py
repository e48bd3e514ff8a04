"""Stream: an in-order task queue of the API over the runtime's stream (RtStream)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from cannrt.abi import TensorArg
from cannrt.api.array import FREES, DeviceArray
from cannrt.api.current import _current
from cannrt.api.event import Event
from cannrt.errors import CannError, ErrorCode
from cannrt.runtime.core import get_runtime
from cannrt.runtime.stream import Stream as RtStream

if TYPE_CHECKING:
    from cannrt.api.device import Device

CHECKED_LIMIT = 1024  # argument lists kept checked per stream before the table starts over


class Stream:
    """An in-order task queue; `with stream:` makes it the current stream for array copies."""

    def __init__(self, device: Device | None = None, priority: int = 0, flags: int = 0) -> None:
        from cannrt.api.device import Device  # device.py imports this module

        device = device or Device(0)
        self._rt = device.context.create_stream(priority, flags)
        self._launch = self._rt.launcher.launch
        self._senders = self._rt.launcher.senders  # the launcher's senders of kept shapes
        self._checked: dict[tuple[Any, ...], tuple[int, tuple[TensorArg | int | float, ...]]] = {}

    @classmethod
    def _wrap(cls, rt_stream: RtStream) -> Stream:
        wrapper = cls.__new__(cls)
        wrapper._rt = rt_stream
        wrapper._launch = rt_stream.launcher.launch
        wrapper._senders = rt_stream.launcher.senders
        wrapper._checked = {}
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
        specs = self._specs(kernel, args) if args else ()
        if name is None and type(block_dim) is int:  # True == 1: keyed only by an int
            try:
                send = self._senders[(kernel, block_dim, specs)]
            except KeyError:  # new, dropped, or with scalars (kept by signature)
                pass
            else:
                send()
                return
        self._launch(kernel, block_dim, specs, name)  # with scalars: by signature, or the checks

    def _specs(self, kernel: str, args: tuple[Any, ...]) -> tuple[TensorArg | int | float, ...]:
        """The kernel arguments of args: tensors (alive, on this stream's context) and scalars.
        Lists of arrays only are kept, checked, until some array is freed."""
        try:
            checked = self._checked.get(args)
        except TypeError:  # an unhashable argument: the checks below refuse it
            checked = None
        if checked is not None and checked[0] == FREES[0]:
            return checked[1]
        frees = FREES[0]
        rt = self._rt
        context = rt.context
        specs: list[TensorArg | int | float] = []
        for index, arg in enumerate(args):
            if isinstance(arg, DeviceArray):
                if arg.freed or arg.device.context is not context:
                    arg._check_usable_on(rt, index)
                specs.append(arg._spec or arg.tensor_arg())
            elif isinstance(arg, bool | int | float | np.integer | np.floating):
                specs.append(arg.item() if isinstance(arg, np.generic) else arg)
            else:
                raise CannError(
                    ErrorCode.RT_PARAM_INVALID, f"argument {index} of {kernel}: unsupported {type(arg).__name__}"
                )
        result = tuple(specs)
        if all(isinstance(arg, DeviceArray) for arg in args):  # scalars: 1 and 1.0 are equal keys
            if len(self._checked) >= CHECKED_LIMIT:
                self._checked.clear()
            self._checked[args] = (frees, result)
        return result

    def record(self, event: Event | None = None) -> Event:
        """Record an event (a new timing event if none given) on this stream."""
        if event is None:
            event = Event(self._rt.context.create_event())
        elif not isinstance(event, Event):
            raise TypeError(f"record takes an Event or None, not {type(event).__name__}")
        event._rt.record(self._rt)
        return event

    def wait(self, event: Event) -> None:
        """Later tasks of this stream wait for the event's newest record (aclrtStreamWaitEvent)."""
        if not isinstance(event, Event):
            raise TypeError(f"wait takes an Event, not {type(event).__name__}")
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

    def malloc_async(self, shape: Any, dtype: Any = np.float32, pool: Any = None) -> DeviceArray:
        """An array allocated in stream order on this stream (aclrtMemPoolMallocAsync; pool: a
        Device.mem_pool(), default the device's pool); see cannrt.api.mempool."""
        from cannrt.api import mempool

        return mempool.malloc_async(self, shape, dtype, pool)

    def free_async(self, array: DeviceArray) -> None:
        """Free a malloc_async array when this stream reaches this point (aclrtMemPoolFreeAsync)."""
        from cannrt.api import mempool

        mempool.free_async(self, array)

    def launch_host_func(self, fn: Any, args: Any = None) -> None:
        """Run fn(args) on a host thread once earlier tasks finish; later tasks wait for it."""
        get_runtime().callbacks.launch_host_func(self._rt, fn, args)

    def set_stop_on_error(self, stop: bool = True) -> None:
        """Discard later tasks after a failure instead of continuing."""
        self._rt.set_failure_mode(stop)

    def destroy(self, force: bool = False) -> None:
        """Destroy (waits for pending tasks; force discards them)."""
        self._rt.destroy(force)
