"""What a task record is in msprof's words: task types, tensor descriptions, host launch slices.

Pure functions over `TaskRecord` / `ApiRecord`; the other profiler modules build their rows on these.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from cannrt.abi import CopyKind, CoreKind, SqeType, TaskRecord, TensorArg
from cannrt.config import HostCosts

# ACL dtype code -> the data type name msprof prints in op_summary (Input/Output Data Types)
DTYPE_NAMES: dict[int, str] = {
    0: "FLOAT",
    1: "FLOAT16",
    2: "INT8",
    3: "INT32",
    4: "UINT8",
    6: "INT16",
    7: "UINT16",
    8: "UINT32",
    9: "INT64",
    10: "UINT64",
    11: "DOUBLE",
    12: "BOOL",
    27: "BF16",
    29: "INT4",
    31: "INT2",
    32: "UINT2",
    35: "FLOAT8_E5M2",
    36: "FLOAT8_E4M3FN",
    37: "FLOAT8_E8M0",
    40: "FLOAT4_E2M1",
}
"""msprof's names (ge::DataType's without DT_); the graph engine's own codes print as DT_<code>."""

# CopyKind -> the copy direction in a MEMCPY_ASYNC slice name
MEMCPY_KIND_NAMES: dict[int, str] = {
    CopyKind.HOST_TO_HOST: "H2H",
    CopyKind.HOST_TO_DEVICE: "H2D",
    CopyKind.DEVICE_TO_HOST: "D2H",
    CopyKind.DEVICE_TO_DEVICE: "D2D",
    CopyKind.DEFAULT: "DEFAULT",
}


class HostSlice(NamedTuple):
    """A host API call on the modelled host clock; `task` is the device task it submitted (if any)."""

    name: str
    start_ns: int
    end_ns: int
    thread_id: int
    task: TaskRecord | None = None


class ApiLike(Protocol):
    """A recorded host call (cannrt.runtime.tracing.ApiRecord has these fields)."""

    @property
    def name(self) -> str: ...
    @property
    def start_ns(self) -> int: ...
    @property
    def end_ns(self) -> int: ...
    @property
    def thread_id(self) -> int: ...


class MemoryLike(Protocol):
    """A memory timeline event (cannrt.memory.timeline.MemoryEvent has these fields)."""

    @property
    def time_ns(self) -> int: ...
    @property
    def reserved(self) -> int: ...
    @property
    def allocated(self) -> int: ...


def is_kernel(record: TaskRecord) -> bool:
    """A compute task (AI core, vector core or AI CPU kernel): one op_summary row."""
    return record.sqe_type in (SqeType.KERNEL, SqeType.AICPU)


def task_type(record: TaskRecord) -> str:
    """op_summary `Task Type`: AI_CORE, AI_VECTOR_CORE, AI_CPU, or the task scheduler's type name."""
    if record.sqe_type == SqeType.AICPU:
        return "AI_CPU"
    if record.sqe_type == SqeType.KERNEL:
        return "AI_VECTOR_CORE" if record.core_kind == CoreKind.AIVEC else "AI_CORE"
    return kernel_type(record)


_KERNEL_TYPES: dict[int, str] = {
    SqeType.SDMA: "MEMCPY_ASYNC",
    SqeType.EVENT_RECORD: "EVENT_RECORD",
    SqeType.EVENT_WAIT: "STREAM_WAIT_EVENT",
    SqeType.WRITE_VALUE: "EVENT_RESET",
    SqeType.PLACE_HOLDER: "HOST_CALLBACK",
}


def kernel_type(record: TaskRecord) -> str:
    """task_time `kernel_type`: KERNEL_AICORE, KERNEL_AIVEC, KERNEL_AICPU, MEMCPY_ASYNC, EVENT_RECORD..."""
    if record.sqe_type == SqeType.AICPU:
        return "KERNEL_AICPU"
    if record.sqe_type == SqeType.KERNEL:
        return "KERNEL_AIVEC" if record.core_kind == CoreKind.AIVEC else "KERNEL_AICORE"
    return _KERNEL_TYPES.get(record.sqe_type, record.name)


def task_label(record: TaskRecord) -> str:
    """The slice name on a stream track: the kernel name, or the task type (with the copy direction)."""
    if is_kernel(record):
        return record.name
    if record.sqe_type == SqeType.SDMA and record.copy_kind >= 0:
        return f"MEMCPY_ASYNC {MEMCPY_KIND_NAMES.get(record.copy_kind, str(record.copy_kind))}"
    return kernel_type(record)


def tensors(record: TaskRecord, outputs: bool) -> list[TensorArg]:
    """The tensor arguments a kernel reads (outputs=False) or writes (outputs=True)."""
    return [
        arg
        for index, arg in enumerate(record.args)
        if isinstance(arg, TensorArg) and (index in record.outputs) == outputs
    ]


def shapes_field(args: Sequence[TensorArg]) -> str:
    """msprof `Input Shapes`: dims joined by ',', tensors by ';' (a scalar tensor is an empty entry)."""
    return ";".join(",".join(str(d) for d in arg.shape) for arg in args)


def dtypes_field(args: Sequence[TensorArg]) -> str:
    """msprof `Input Data Types`: FLOAT16;FLOAT..."""
    return ";".join(DTYPE_NAMES.get(arg.dtype, f"DT_{arg.dtype}") for arg in args)


def formats_field(args: Sequence[TensorArg]) -> str:
    """msprof `Input Formats`: every tensor here is ND."""
    return ";".join("ND" for _ in args)


def submit_table(costs: HostCosts) -> dict[int, tuple[str, int]]:
    """SQE type -> the ACL call that submits such a task and its modelled host cost."""
    return {
        SqeType.KERNEL: ("aclrtLaunchKernel", costs.launch_ns),
        SqeType.AICPU: ("aclrtLaunchKernel", costs.launch_ns),
        SqeType.SDMA: ("aclrtMemcpyAsync", costs.memcpy_async_ns),
        SqeType.EVENT_RECORD: ("aclrtRecordEvent", costs.event_ns),
        SqeType.EVENT_WAIT: ("aclrtStreamWaitEvent", costs.event_ns),
        SqeType.WRITE_VALUE: ("aclrtResetEvent", costs.event_ns),
        SqeType.PLACE_HOLDER: ("aclrtLaunchCallback", costs.call_ns),
    }


def host_slices(
    tasks: Iterable[TaskRecord], api: Iterable[ApiLike], costs: HostCosts, thread_id: int = 0
) -> list[HostSlice]:
    """All host API slices: recorded calls plus one derived slice per submitted task.

    A submitting call is not recorded on the host; its slice is [arrival - cost, arrival]. An async
    memset is recorded as `aclrtMemset` around its doorbell: that record becomes `aclrtMemsetAsync`
    and carries the task instead of a second, derived slice. Derived slices go to `thread_id`
    (task records do not say which host thread submitted them).
    """
    recorded = [HostSlice(a.name, a.start_ns, a.end_ns, a.thread_id) for a in api]
    memsets = {(s.end_ns, i) for i, s in enumerate(recorded) if s.name == "aclrtMemset"}
    by_end = {end: i for end, i in sorted(memsets, reverse=True)}
    result = list(recorded)
    submitting = submit_table(costs)  # the ACL call that submitted each task type, and its host cost
    for task in tasks:
        found = submitting.get(task.sqe_type)
        if found is None:
            continue
        name, cost = found
        index = by_end.pop(task.arrival_ns, None) if task.sqe_type == SqeType.SDMA else None
        if index is not None:
            old = recorded[index]
            result[index] = HostSlice("aclrtMemsetAsync", old.start_ns, old.end_ns, old.thread_id, task)
            continue
        result.append(HostSlice(name, task.arrival_ns - cost, task.arrival_ns, thread_id, task))
    result.sort(key=lambda s: (s.start_ns, s.end_ns, s.name))
    return result


def device_tasks(records: Iterable[TaskRecord]) -> list[TaskRecord]:
    """Records in timeline order (start, device, stream, task id), discarded tasks left out."""
    kept = [r for r in records if not r.discarded]
    return sorted(kept, key=lambda r: (r.start_ns, r.device_id, r.stream_id, r.task_id))


def wait_times_ns(records: Sequence[TaskRecord]) -> list[int]:
    """op_summary `Task Wait Time`: gap between a task's start and the end of the previous task on
    the same stream (0 for the first task seen on the stream), in the order of `records`."""
    last_end: dict[tuple[int, int], int] = {}
    waits = [0] * len(records)
    order = sorted(range(len(records)), key=lambda i: (records[i].start_ns, records[i].end_ns))
    for index in order:
        record = records[index]
        stream = (record.device_id, record.stream_id)
        previous = last_end.get(stream)
        waits[index] = 0 if previous is None else max(0, record.start_ns - previous)
        last_end[stream] = record.end_ns if previous is None else max(previous, record.end_ns)
    return waits
