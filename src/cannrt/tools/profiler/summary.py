"""msprof's CSV summaries as rows: op_summary, task_time, l2_cache and api_statistic.

Each builder returns (header, rows) with every cell already a string, so two profiles of the same
program give byte-identical files. Times are in microseconds on the modelled clocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cannrt.abi import CoreKind, TaskRecord
from cannrt.config import ChipSpec
from cannrt.tools.profiler import metrics
from cannrt.tools.profiler.records import (
    HostSlice,
    device_tasks,
    dtypes_field,
    formats_field,
    is_kernel,
    kernel_type,
    shapes_field,
    task_type,
    tensors,
    wait_times_ns,
)
from cannrt.tools.profiler.stats import ProfileStats

Table = tuple[list[str], list[list[str]]]
MODEL_ID = "4294967295"  # msprof's Model ID of ops launched outside a model
NA = "N/A"

OP_SUMMARY_HEAD = [
    "Device_id",
    "Model ID",
    "Task ID",
    "Stream ID",
    "Op Name",
    "OP Type",
    "OP State",
    "Task Type",
    "Task Start Time(us)",
    "Task Duration(us)",
    "Task Wait Time(us)",
    "Block Num",
    "Mix Block Num",
    "Input Shapes",
    "Input Data Types",
    "Input Formats",
    "Output Shapes",
    "Output Data Types",
    "Output Formats",
    "Context ID",
    "aicore_time(us)",
    "aiv_time(us)",
    "total_cycles",
]


def us(ns: float) -> str:
    """A time in microseconds with nanosecond resolution (msprof prints 3 decimals)."""
    return f"{ns / 1000.0:.3f}"


def num(name: str, value: float) -> str:
    """A PMU cell: counts (cycles, requests, operations) as integers, ratios, times and rates with 6
    decimals."""
    if name.endswith(("ratio", "rate", "(us)", "(GB/s)")):
        return f"{value:.6f}"
    return str(round(value))


def op_summary_head(group: str = "PipeUtilization") -> list[str]:
    """op_summary columns: the fixed ones, then the group's PMU columns prefixed aic_ and aiv_."""
    names = metrics.GROUPS[metrics.check_group(group)]
    return [*OP_SUMMARY_HEAD, *(f"aic_{n}" for n in names), *(f"aiv_{n}" for n in names)]


def op_row(
    record: TaskRecord, wait_ns: int, chip: ChipSpec, group: str, op_name: str | None = None, op_type: str | None = None
) -> list[str]:
    """One op_summary row: Op Name is the launch's op name (the kernel name if it had none), OP Type
    the model node's op type (the kernel for launches outside a model)."""
    inputs, outputs = tensors(record, False), tensors(record, True)
    timing = metrics.core_time(record, chip)
    vector = record.core_kind == CoreKind.AIVEC
    values = [num(k, v) for k, v in metrics.group_values(group, record, chip).items()]
    blank = [NA] * len(values)
    return [
        str(record.device_id),
        MODEL_ID,
        str(record.task_id),
        str(record.stream_id),
        op_name or record.name,
        op_type or record.name,
        NA,
        task_type(record),
        us(record.start_ns),
        us(record.end_ns - record.start_ns),
        us(wait_ns),
        str(record.block_dim),
        "0",
        shapes_field(inputs),
        dtypes_field(inputs),
        formats_field(inputs),
        shapes_field(outputs),
        dtypes_field(outputs),
        formats_field(outputs),
        NA,
        NA if vector else f"{timing.core_time_us:.3f}",
        f"{timing.core_time_us:.3f}" if vector else NA,
        str(timing.total_cycles),
        *(blank if vector else values),
        *(values if vector else blank),
    ]


def op_summary(
    records: Iterable[TaskRecord],
    chip: ChipSpec,
    group: str = "PipeUtilization",
    op_names: Mapping[tuple[int, int, int, int], str] | None = None,
    op_types: Mapping[str, str] | None = None,
) -> Table:
    """op_summary_<ts>.csv: one row per kernel task in start order (Task Wait Time counts every task
    of the stream, copies and event tasks included); op_types: model node name -> ONNX op type."""
    head = op_summary_head(group)
    tasks = device_tasks(records)
    waits = wait_times_ns(tasks)
    names, types = op_names or {}, op_types or {}
    rows = []
    for r, w in zip(tasks, waits, strict=True):
        if is_kernel(r):
            name = names.get((r.device_id, r.stream_id, r.task_id, r.arrival_ns))
            rows.append(op_row(r, w, chip, group, name, types.get(name or "")))
    return head, rows


TASK_TIME_HEAD = [
    "Device_id",
    "kernel_name",
    "kernel_type",
    "stream_id",
    "task_id",
    "task_time(us)",
    "task_start(us)",
    "task_stop(us)",
]


def task_time_row(r: TaskRecord, op_name: str | None = None) -> list[str]:
    """One task_time row (kernel_name: the op name of a named launch)."""
    return [
        str(r.device_id),
        op_name or r.name,
        kernel_type(r),
        str(r.stream_id),
        str(r.task_id),
        us(r.end_ns - r.start_ns),
        us(r.start_ns),
        us(r.end_ns),
    ]


def task_time(records: Iterable[TaskRecord]) -> Table:
    """task_time_<ts>.csv: every device task (kernels, copies, event tasks, callbacks)."""
    return TASK_TIME_HEAD, [task_time_row(r) for r in device_tasks(records)]


L2_CACHE_HEAD = ["Device_id", "Stream Id", "Task Id", "Hit Rate", "Victim Rate", "Op Name"]


def l2_cache(records: Iterable[TaskRecord]) -> Table:
    """l2_cache_<ts>.csv: per kernel, the L2 hit rate over read and write requests. Victim Rate is 0:
    the trace does not say which requests evicted a line."""
    return L2_CACHE_HEAD, [l2_row(r) for r in device_tasks(records) if is_kernel(r)]


def l2_row(r: TaskRecord, op_name: str | None = None) -> list[str]:
    """One l2_cache row."""
    return [
        str(r.device_id),
        str(r.stream_id),
        str(r.task_id),
        f"{metrics.l2_hit_rate(r):.6f}",
        "0.000000",
        op_name or r.name,
    ]


API_STATISTIC_HEAD = ["Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance"]


def api_statistic(slices: Sequence[HostSlice]) -> Table:
    """api_statistic_<ts>.csv: per ACL API, its call count and total / avg / min / max time; sorted by
    total time (largest first), then name. Variance is in us^2."""
    stats = ProfileStats(ChipSpec())
    for host in slices:
        stats.add_api(host.name, host.start_ns, host.end_ns)
    return api_statistic_rows(stats)


def api_statistic_rows(stats: ProfileStats) -> Table:
    """api_statistic rows from the running aggregates."""
    rows = [
        ["acl", name, us(total), str(count), us(total / count), us(low), us(high), f"{variance:.6f}"]
        for name, count, total, low, high, variance in stats.api_rows()
    ]
    return API_STATISTIC_HEAD, rows
