"""Host API records for the profiler: which runtime call ran when, on the modelled host clock.

Calls that submit tasks (launch, async copies, event record/wait) are not wrapped: their host
slices come from the device records (doorbell time minus the call's modelled cost), which keeps
the launch path free of tracing cost. The wrapper below serves the other calls. Only the outermost
traced call of a thread is recorded (aclrtEventElapsedTime querying its events is one call).
A recorded call on a device also samples the HBM in use when it returns (the memory-in-use track).
A launch carrying an op name (a graph node) leaves a name record joined to its task by
(device, stream, task id, doorbell time), as msprof joins the host's op info to device tasks.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class ApiRecord(NamedTuple):
    """One host API call: its ACL name, modelled host start/end (ns) and the calling thread.

    A record with task_id >= 0 is a name record instead: `name` is the op name of the launch that
    submitted task task_id on stream_id at host time start_ns (== end_ns)."""

    name: str
    start_ns: int
    end_ns: int
    thread_id: int
    device_id: int = -1  # the device the call worked on (-1: none)
    hbm_used: int = -1  # HBM bytes in use on that device when the call returned (-1: not sampled)
    stream_id: int = -1  # name records: the task's stream
    task_id: int = -1  # name records: the task id (16 bits, as in the task record)


class _Nesting(threading.local):
    depth = 0  # traced calls running on this thread (only the outermost is recorded)


_nesting = _Nesting()


def _owner_parts(owner: Any) -> tuple[Any, int]:
    """The Runtime reachable from a call's first argument (context, stream, event or runtime) and
    the device it works on (-1 if none)."""
    context = owner if hasattr(owner, "asid") else getattr(owner, "context", None)
    if context is not None and hasattr(context, "runtime"):
        return context.runtime, getattr(context, "device_id", -1)
    runtime = getattr(owner, "runtime", None)
    return (runtime if runtime is not None else owner), getattr(owner, "device_id", -1)


def _hbm_used(runtime: Any, device: int) -> int:
    """HBM bytes in use on device (driver view), -1 if the device is not open."""
    if device < 0 or device not in runtime.devices:
        return -1
    free, total, _, _ = runtime.driver.mem_info(device)
    return int(total - free)


def api_call(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Record calls of the wrapped function under `name` while a profiler is collecting."""

    def wrap(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            runtime, device = _owner_parts(args[0]) if args else (None, -1)
            records = getattr(runtime, "api_records", None)
            if records is None or _nesting.depth:
                return function(*args, **kwargs)
            clock = runtime.clock  # type: ignore[union-attr]
            start = clock.now_ns
            _nesting.depth = 1
            try:
                return function(*args, **kwargs)
            finally:
                _nesting.depth = 0
                used = _hbm_used(runtime, device)
                records.append(ApiRecord(name, start, clock.now_ns, threading.get_ident(), device, used))

        return traced

    return wrap


def note_op_name(
    records: list[ApiRecord], device_id: int, stream_id: int, position: int, arrival_ns: int, op_name: str
) -> None:
    """Record that the launch named op_name submitted the task at position of the stream, whose
    doorbell rang at host time arrival_ns."""
    records.append(
        ApiRecord(op_name, arrival_ns, arrival_ns, threading.get_ident(), device_id, -1, stream_id, position & 0xFFFF)
    )
