"""`cannrt.profile()`: collect a program's device tasks and host API calls, msprof style.

Models `msprof --application` / aclprofStart..aclprofStop around a region of a program: the block
traces every task of the chosen devices and every host API call, and on exit writes
`<output>/PROF_<id>_<ts>/mindstudio_profiler_output/` (Chrome trace and CSV summaries). Profiling off
costs nothing on the launch path: the device keeps no records and the host wrappers see None.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.table import Table

from cannrt.abi import TaskRecord
from cannrt.config import ChipSpec, HostCosts
from cannrt.errors import CannError, ErrorCode
from cannrt.runtime import model_names
from cannrt.runtime.core import Runtime, get_runtime
from cannrt.runtime.tracing import ApiRecord
from cannrt.tools import profiler
from cannrt.tools.profiler.records import HostSlice, is_kernel, task_type


class Profile:
    """What one profiled region collected, and the msprof views of it."""

    def __init__(self, chip: ChipSpec, host_costs: HostCosts, aicore_metrics: str, thread_id: int) -> None:
        self.chip = chip
        self.host_costs = host_costs
        self.aicore_metrics = profiler.check_group(aicore_metrics)
        self.thread_id = thread_id  # host thread the derived launch slices are put on
        self.records: list[TaskRecord] = []  # device tasks, every traced device
        self.api_records: list[ApiRecord] = []  # recorded (non-submitting) host calls
        self.path: Path | None = None  # the PROF_ folder, once written

    @property
    def api(self) -> list[HostSlice]:
        """Every host API call: recorded ones plus one launch slice per submitted task."""
        return profiler.host_slices(self.records, self.api_records, self.host_costs, self.thread_id)

    def op_summary(self) -> list[dict[str, str]]:
        """op_summary rows (column name -> cell), as in op_summary_<ts>.csv."""
        head, rows = profiler.op_summary(self.records, self.chip, self.aicore_metrics)
        return [dict(zip(head, row, strict=True)) for row in rows]

    def trace(self) -> dict[str, Any]:
        """The Chrome trace object of msprof_<ts>.json."""
        return profiler.chrome_trace(self.records, self.api, self.chip)

    def write(self, output: str | Path, stamp: str | None = None) -> Path:
        """Write the msprof folder under output; returns (and remembers) the PROF_ folder."""
        self.path = profiler.write_profile(output, self.records, self.api, self.chip, self.aicore_metrics, stamp)
        return self.path

    def table(self, top: int = 10) -> Table:
        """Top kernels by total device time, with their pipe utilisation and L2 hit rate."""
        table = Table(title=f"Top kernels by device time ({self.chip.name})")
        for column in ("Op Name", "Task Type", "Count", "Total(us)", "Avg(us)", "Time %"):
            table.add_column(column, justify="left" if column in ("Op Name", "Task Type") else "right")
        for column in ("mac", "vec", "mte2", "mte3", "L2 hit", "bound"):
            table.add_column(column, justify="right")
        kernels = [r for r in self.records if is_kernel(r) and not r.discarded]
        grand = sum(r.end_ns - r.start_ns for r in kernels) or 1
        for key, group in _by_kernel(kernels)[:top]:
            table.add_row(*_kernel_row(key, group, grand, self.chip))
        return table


def _by_kernel(kernels: Sequence[TaskRecord]) -> list[tuple[tuple[str, str], list[TaskRecord]]]:
    """Kernels grouped by (name, task type), largest total device time first."""
    groups: dict[tuple[str, str], list[TaskRecord]] = {}
    for record in kernels:
        groups.setdefault((record.name, task_type(record)), []).append(record)
    return sorted(groups.items(), key=lambda item: (-sum(r.end_ns - r.start_ns for r in item[1]), item[0]))


def _kernel_row(key: tuple[str, str], group: list[TaskRecord], grand: int, chip: ChipSpec) -> list[str]:
    """One table row: counts, times, busy-weighted pipe ratios, mean L2 hit, memory or compute bound."""
    total = sum(r.end_ns - r.start_ns for r in group)
    busy = [profiler.core_time(r, chip).busy_ns for r in group]
    weight = sum(busy) or 1.0
    ratios = [profiler.pipe_ratios(r, chip) for r in group]

    def mean(pipe: str) -> float:
        return sum(b * x[pipe] for b, x in zip(busy, ratios, strict=True)) / weight

    bound = sum(b * profiler.memory_bound(r, chip) for b, r in zip(busy, group, strict=True)) / weight
    hit = sum(r.l2_hit for r in group) / len(group)
    return [
        key[0],
        key[1],
        str(len(group)),
        f"{total / 1000:.3f}",
        f"{total / len(group) / 1000:.3f}",
        f"{100 * total / grand:.1f}",
        *(f"{mean(p):.2f}" for p in ("mac", "vec", "mte2", "mte3")),
        f"{hit:.2f}",
        "memory" if bound > 1 else "compute",
    ]


def _open_devices(runtime: Runtime, devices: Sequence[int] | None) -> list[int]:
    """The devices to trace: the ones given (set if needed, current context kept), else all set ones."""
    if devices is None:
        return sorted(runtime.devices)
    current = runtime.current_context_or_none()
    for device in devices:
        if device not in runtime.devices:
            runtime.set_device(device)
    if current is not None:
        runtime.set_context(current)
    return list(devices)


@contextmanager
def profile(
    output: str | Path | None = None,
    aicore_metrics: str = "PipeUtilization",
    devices: Sequence[int] | None = None,
) -> Iterator[Profile]:
    """Profile the block (msprof / aclprofStart..Stop): synchronize inside it so its tasks are complete.

    devices: which to trace (default: every device already set). aicore_metrics: the PMU group of the
    op summary (PipeUtilization, ArithmeticUtilization, Memory, L2Cache). With output, the msprof
    folder is written on exit and `Profile.path` names it.
    """
    runtime = get_runtime()
    result = Profile(runtime.settings.chip, runtime.settings.host_costs, aicore_metrics, threading.get_ident())
    if runtime.api_records is not None:
        raise CannError(ErrorCode.PROF_ALREADY_RUN, "a profiler is already collecting on this runtime")
    traced = _open_devices(runtime, devices)
    runtime.api_records = result.api_records
    for device in traced:
        runtime.driver.trace_start(device)
    try:
        yield result
    finally:
        runtime.api_records = None
        for device in traced:
            if device in runtime.devices:
                result.records.extend(runtime.driver.trace_stop(device, runtime.host_time_ns))
        result.records[:] = model_names.named(runtime, result.records)  # model tasks by ONNX node
    if output is not None:
        result.write(output)
