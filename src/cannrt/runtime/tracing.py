"""Host API records for the profiler: which runtime call ran when, on the modelled host clock.

Calls that submit tasks (launch, async copies, event record/wait) are not wrapped: their host
slices come from the device records (doorbell time minus the call's modelled cost), which keeps
the launch path free of tracing cost. The wrapper below serves the other calls. Only the outermost
traced call of a thread is recorded (aclrtEventElapsedTime querying its events is one call).
Op names are collected apart from the calls (`OpNames`): a launch carrying an op name (a graph
node) notes it, joined to its task by (device, stream, task id, doorbell time) as msprof joins the
host's op info to device tasks, and a model execute notes its nodes' op types.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, ParamSpec, TypeVar

from cannrt.runtime.named_launches import NamedLaunches

P = ParamSpec("P")
R = TypeVar("R")


class ApiRecord(NamedTuple):
    """One host API call: its ACL name, modelled host start/end (ns) and the calling thread."""

    name: str
    start_ns: int
    end_ns: int
    thread_id: int


class OpNames:
    """The op-name collector of a profile: the op name of each named launch and the op type of each
    model node executed while the profiler collects."""

    def __init__(self) -> None:
        self.names = NamedLaunches()  # (device, stream, task id, doorbell ns) -> op name
        self.op_types: dict[str, str] = {}  # model node name -> ONNX op type

    def note(self, device_id: int, stream_id: int, task_id: int, arrival_ns: int, op_name: str) -> None:
        """The launch named op_name submitted task task_id of the stream at host time arrival_ns."""
        self.names.note((device_id, stream_id, task_id, arrival_ns), op_name)

    def note_op_types(self, op_types: dict[str, str]) -> None:
        """The op types of the nodes of a model being executed."""
        self.op_types.update(op_types)


class _Nesting(threading.local):
    depth = 0  # traced calls running on this thread (only the outermost is recorded)


_nesting = _Nesting()


def _owner_runtime(owner: Any) -> Any:
    """The Runtime reachable from a call's first argument (context, stream, event or runtime)."""
    context = owner if hasattr(owner, "asid") else getattr(owner, "context", None)
    if context is not None and hasattr(context, "runtime"):
        return context.runtime
    runtime = getattr(owner, "runtime", None)
    return runtime if runtime is not None else owner


def api_call(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Record calls of the wrapped function under `name` while a profiler is collecting."""

    def wrap(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            runtime = _owner_runtime(args[0]) if args else None
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
                records.append(ApiRecord(name, start, clock.now_ns, threading.get_ident()))

        return traced

    return wrap


def note_op_name(
    records: list[ApiRecord], device_id: int, stream_id: int, position: int, arrival_ns: int, op_name: str
) -> None:
    """Record that the launch named op_name submitted the task at position of the stream, whose
    doorbell rang at host time arrival_ns (records: the profile's host-call sink, whose `op_names`
    is the profile's OpNames collector)."""
    names = op_names_of(records)
    if names is not None:
        names.note(device_id, stream_id, position & 0xFFFF, arrival_ns, op_name)


def op_names_of(records: object) -> OpNames | None:
    """The profile's op-name collector, carried by its host-call sink (None if it has none)."""
    names = getattr(records, "op_names", None)
    return names if isinstance(names, OpNames) else None
