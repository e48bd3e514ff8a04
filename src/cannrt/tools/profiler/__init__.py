"""The profiler: msprof's outputs (op summary, task time, L2 cache, API statistics, Chrome trace)
built from device task records, host API records and the chip spec. Pure functions: nothing here
drives the device; `cannrt.api.profile` collects the records."""

from __future__ import annotations

from cannrt.tools.profiler.metrics import GROUPS, check_group, core_time, group_values, memory_bound, pipe_ratios
from cannrt.tools.profiler.records import HostSlice, host_slices, task_type, wait_times_ns
from cannrt.tools.profiler.summary import api_statistic, l2_cache, op_summary, op_summary_head, task_time
from cannrt.tools.profiler.validate import validate_trace
from cannrt.tools.profiler.writer import OUTPUT_DIR

__all__ = [
    "GROUPS",
    "OUTPUT_DIR",
    "HostSlice",
    "api_statistic",
    "check_group",
    "core_time",
    "group_values",
    "host_slices",
    "l2_cache",
    "memory_bound",
    "op_summary",
    "op_summary_head",
    "pipe_ratios",
    "task_time",
    "task_type",
    "validate_trace",
    "wait_times_ns",
]
