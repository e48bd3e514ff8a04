"""The runtime: devices, contexts, the current context of each thread, kernel launch.

Models aclInit/aclFinalize, aclrtSetDevice/ResetDevice, aclrtSetContext/GetContext and
aclrtLaunchKernel. One Runtime drives one simulated machine through its Driver.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from cannrt.abi import ParamValue, TensorArg
from cannrt.config import Settings, load_settings
from cannrt.driver.hal import Driver, WaitResult
from cannrt.errors import CannError, ErrorCode
from cannrt.kernels import get_kernel
from cannrt.kernels.registry import Kernel, current_kernel
from cannrt.runtime.callbacks import CallbackHub
from cannrt.runtime.context import Context
from cannrt.runtime.host_clock import HostClock
from cannrt.runtime.host_memory import HostAllocations
from cannrt.runtime.stream import timeout_ns
from cannrt.runtime.tracing import ApiRecord, api_call

if TYPE_CHECKING:
    from cannrt.abi import Cqe
    from cannrt.runtime.stream import Stream


class ExceptionInfo(NamedTuple):
    """What an exception callback receives (aclrtExceptionInfo)."""

    task_id: int
    stream_id: int
    thread_id: int
    device_id: int
    error_code: int


@dataclass
class DumpConfig:
    """What to dump (the acl.json "dump" section): ops by name (None: all), inputs/outputs."""

    path: str
    ops: frozenset[str] | None = None
    inputs: bool = True
    outputs: bool = True
    stats_only: bool = False  # dump_data "stats": statistics instead of tensors
    exception: bool = True  # dump a failing kernel's tensors too
    op_names: dict[tuple[int, int, int], str] = field(default_factory=dict)  # (device, stream, task) -> name

    def wants(self, op_name: str) -> bool:
        """True if the op is on the dump list."""
        return self.ops is None or op_name in self.ops


@dataclass
class DeviceState:
    """A device the process has set: its default context and every context on it."""

    device_id: int
    default_context: Context
    contexts: list[Context] = field(default_factory=list)
    kernels: dict[str, tuple[Kernel, int]] = field(default_factory=dict)  # name -> (kernel, pc)


class Runtime:
    """The process-wide runtime over one simulated machine."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()
        self.driver = Driver(self.settings)
        self.clock = HostClock()  # the modelled host time; the driver is told it in each call
        self.host = HostAllocations()
        self.callbacks = CallbackHub(self)
        self.devices: dict[int, DeviceState] = {}
        self._local = threading.local()
        self._lock = threading.RLock()
        self.exception_callback: Callable[[ExceptionInfo], object] | None = None
        self.api_records: list[ApiRecord] | None = None  # host API calls while a profiler collects
        self._dump_config: DumpConfig | None = None
        self.closed = False

    @property
    def dump_config(self) -> DumpConfig | None:
        """The dump running now (None if none)."""
        return self._dump_config

    @dump_config.setter
    def dump_config(self, config: DumpConfig | None) -> None:
        self._dump_config = config
        with self._lock:
            contexts = [c for state in self.devices.values() for c in state.contexts if not c.destroyed]
        for context in contexts:
            context.invalidate_launches()  # launches are flagged for the dump, or not, from now on

    # -- host clock --------------------------------------------------------------------------
    def host_cost(self, ns: int) -> None:
        """Charge a host API call's modelled cost."""
        self.clock.now_ns += ns

    @property
    def host_time_ns(self) -> int:
        """The modelled host clock."""
        return self.clock.now_ns

    def waited(self, result: WaitResult) -> bool:
        """Move the host clock to where a host wait ended; True if its condition held."""
        self.clock.move_to(result.now_ns)
        return result.done

    # -- devices and contexts ----------------------------------------------------------------
    def set_device(self, device_id: int) -> Context:
        """Open device_id (once) and make its default context current (aclrtSetDevice)."""
        self._check_open()
        if not isinstance(device_id, int) or not 0 <= device_id < self.settings.device_count:
            raise CannError(
                ErrorCode.RT_INVALID_DEVICEID,
                f"device {device_id} does not exist: this host has {self.settings.device_count}",
            )
        with self._lock:
            state = self.devices.get(device_id)
            if state is None:
                self.driver.open(device_id)
                self.driver.set_callback_sink(device_id, self.callbacks.sink)
                if self.dump_config is not None:  # a dump is running: this device dumps too
                    config = self.dump_config
                    self.driver.dump_configure(device_id, config.inputs, config.outputs, config.exception)
                context = Context(self, device_id, is_default=True)
                state = DeviceState(device_id, context, [context])
                self.devices[device_id] = state
        self._local.context = state.default_context
        return state.default_context

    def reset_device(self, device_id: int) -> None:
        """Release every resource of the device and clear its errors (aclrtResetDevice)."""
        with self._lock:
            state = self.devices.pop(device_id, None)
            if state is None:
                return
            self.callbacks.device_reset(device_id)  # a callback running now is not reported back
            for context in state.contexts:
                if not context.destroyed:
                    context.destroy()
            self.driver.close(device_id)
        current = getattr(self._local, "context", None)
        if current is not None and current.device_id == device_id:
            self._local.context = None

    def device_state(self, device_id: int) -> DeviceState:
        """State of a set device; CannError if the device was not set."""
        state = self.devices.get(device_id)
        if state is None:
            raise CannError(ErrorCode.RT_CONTEXT_NULL, f"device {device_id} was not set (call set_device first)")
        return state

    def create_context(self, device_id: int) -> Context:
        """A new context on device_id, made current (aclrtCreateContext)."""
        if device_id not in self.devices:
            self.set_device(device_id)
        context = Context(self, device_id)
        with self._lock:
            self.devices[device_id].contexts.append(context)
        self._local.context = context
        return context

    def destroy_context(self, context: Context) -> None:
        """Destroy a created context (aclrtDestroyContext)."""
        if context.is_default:
            raise CannError(ErrorCode.RT_PARAM_INVALID, "a device's default context is released by reset_device")
        context.destroy()
        if getattr(self._local, "context", None) is context:
            self._local.context = None

    def set_context(self, context: Context) -> None:
        """Make context current on this thread (aclrtSetCurrentContext)."""
        context.check_alive()
        self._local.context = context

    def current_context(self) -> Context:
        """The calling thread's context; CannError(RT_CONTEXT_NULL) if none."""
        context: Context | None = getattr(self._local, "context", None)
        if context is None or context.destroyed:
            raise CannError(
                ErrorCode.RT_CONTEXT_NULL, "no current context on this thread: call set_device or set_context"
            )
        return context

    def current_context_or_none(self) -> Context | None:
        """The calling thread's context, if it has one."""
        return getattr(self._local, "context", None)

    @api_call("aclrtSynchronizeDevice")
    def synchronize_device(self, device_id: int, timeout_ms: int | None = None) -> None:
        """Wait for every stream of the device (aclrtSynchronizeDevice[WithTimeout])."""
        state = self.device_state(device_id)
        self.host_cost(self.settings.host_costs.sync_ns)
        done = self.waited(self.driver.device_wait_idle(device_id, self.clock.now_ns, timeout_ns(timeout_ms)))
        for context in state.contexts:
            if not context.destroyed:
                context.drain_reports()
        if not done:
            raise CannError(ErrorCode.RT_STREAM_SYNC_TIMEOUT, f"device {device_id} not idle after {timeout_ms} ms")
        for context in state.contexts:
            if not context.destroyed:
                context.check_sticky()

    # -- kernels -----------------------------------------------------------------------------
    def kernel(self, device_id: int, name: str) -> tuple[Kernel, int]:
        """The kernel and its entry PC on device_id (loaded on first use)."""
        state = self.device_state(device_id)
        entry = state.kernels.get(name)
        if entry is None or entry[0] is not current_kernel(name):
            try:
                kernel = get_kernel(name)
                pc = self.driver.kernel_load(device_id, name)
            except KeyError:
                raise CannError(ErrorCode.RT_KERNEL_LOOKUP, f"no kernel named {name!r} is registered") from None
            entry = state.kernels[name] = (kernel, pc)
        return entry

    def launch(
        self, stream: Stream, name: str, block_dim: int, args: Sequence[ParamValue], op_name: str | None = None
    ) -> int:
        """Validate and enqueue a kernel (aclrtLaunchKernel); nothing is enqueued on bad input.

        op_name names this launch in dumps (the graph's node name); the kernel name is its op type."""
        return stream.launcher.launch(name, block_dim, tuple(args), op_name)

    # -- errors ------------------------------------------------------------------------------
    def report_exception(self, context: Context, cqe: Cqe) -> None:
        """Hand a device error to the registered exception callback (aclrtSetExceptionInfoCallback)."""
        callback = self.exception_callback
        if callback is None:
            return
        stream = context.streams.get(cqe.sq_id)
        thread_id = stream.creator_thread if stream is not None else 0
        info = ExceptionInfo(cqe.task_id, cqe.stream_id, thread_id, context.device_id, cqe.error_code)
        try:
            callback(info)
        except Exception as exc:  # the user's callback must not break error handling
            self.callbacks.errors.append(exc)

    # -- teardown ----------------------------------------------------------------------------
    def close(self) -> None:
        """Release every device and host allocation (aclFinalize)."""
        for device_id in list(self.devices):
            self.reset_device(device_id)
        self.driver.close_all()
        self.host.free_all()
        self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise CannError(ErrorCode.UNINITIALIZE, "the runtime was finalized")


_RUNTIME: Runtime | None = None
_RUNTIME_LOCK = threading.Lock()


def get_runtime() -> Runtime:
    """The process-wide runtime (created on first use from load_settings())."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is None or _RUNTIME.closed:
            _RUNTIME = Runtime()
        return _RUNTIME


def reset_runtime(settings: Settings | None = None) -> Runtime:
    """Close the process-wide runtime and start a fresh one (tests, finalize + init)."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is not None and not _RUNTIME.closed:
            _RUNTIME.close()
        _RUNTIME = Runtime(settings)
        return _RUNTIME


def tensor_arg(address: int, dtype_code: int, shape: Sequence[int]) -> TensorArg:
    """A kernel tensor argument."""
    return TensorArg(address, dtype_code, tuple(int(d) for d in shape))


__all__ = ["DeviceState", "ExceptionInfo", "Runtime", "get_runtime", "reset_runtime", "tensor_arg"]
