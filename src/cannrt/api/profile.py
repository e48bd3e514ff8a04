"""`cannrt.profile()`: collect a program's device tasks and host API calls, msprof style.

Models `msprof --application` / aclprofStart..aclprofStop around a region of a program: the block
traces every task of the chosen devices and every host API call, and on exit writes
`<output>/PROF_<id>_<ts>/mindstudio_profiler_output/` (Chrome trace and CSV summaries). Records
stream to disk in chunks as they complete (tools/profiler/spool.py), so a region of any length is
profiled in bounded memory. Profiling off costs nothing on the launch path: the device keeps no
records and the host wrappers see None. `start_program_profile` profiles a whole process (the child
of `cannrt prof`): every device it opens, until it exits.
"""

from __future__ import annotations

import atexit
import json
import shutil
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from operator import attrgetter
from pathlib import Path
from typing import Any

from cannrt.abi import TaskRecord
from cannrt.config import ChipSpec, HostCosts
from cannrt.errors import CannError, ErrorCode
from cannrt.memory.timeline import MemoryEvent, device_timelines, memory_timeline
from cannrt.runtime.core import Runtime, get_runtime
from cannrt.runtime.tracing import ApiRecord, OpNames
from cannrt.tools import profiler
from cannrt.tools.profiler.records import HostSlice
from cannrt.tools.profiler.report import TextTable, kernel_rows_table
from cannrt.tools.profiler.spool import CHUNK, HostSpool, ScratchDir, TaskSpool, merged
from cannrt.tools.profiler.stats import ProfileStats
from cannrt.tools.profiler.writer import OUTPUT_DIR, Collected, op_key, write_collected

TASK_ORDER = attrgetter("start_ns", "device_id", "stream_id", "task_id")
CALL_ORDER = attrgetter("start_ns", "end_ns", "name")


class Profile:
    """What one profiled region collected, and the msprof views of it."""

    def __init__(
        self,
        chip: ChipSpec,
        host_costs: HostCosts,
        aic_metrics: str,
        thread_id: int,
        chunk: int = CHUNK,
        host_api: bool = True,
        task_time: bool = True,
    ) -> None:
        self.chip = chip
        self.host_costs = host_costs
        self.aic_metrics = profiler.check_group(aic_metrics)
        self.thread_id = thread_id  # host thread the derived launch slices are put on
        self.host_api, self.task_time = host_api, task_time  # msprof --ascendcl, --task-time
        self.memory: dict[int, list[MemoryEvent]] = {}  # device -> its memory timeline while profiled
        self._memory_start = 0  # host ns at the start
        self._memory_marks: dict[int, tuple[int, int, MemoryEvent | None]] = {}  # totals, last event then
        self.names = OpNames()  # op names of named launches, op types of the model nodes executed
        self.path: Path | None = None  # the PROF_ folder, once written
        self._scratch = ScratchDir()
        weakref.finalize(self, self._scratch.cleanup)
        self._chunk = chunk
        self._tasks: dict[int, TaskSpool] = {}  # device -> its task records
        self.host_spool = HostSpool(self._scratch.sub("host"), ApiRecord._make, CALL_ORDER, chunk, self.names)

    @property
    def aicore_metrics(self) -> str:
        """The PMU group (pyACL's name for msprof's --aic-metrics)."""
        return self.aic_metrics

    def task_sink(self, device_id: int) -> TaskSpool:
        """Where the device's task records go, a chunk at a time as its tasks complete."""
        spool = self._tasks.get(device_id)
        if spool is None:
            spool = TaskSpool(self._scratch.sub(f"device_{device_id}"), TASK_ORDER, self._chunk)
            self._tasks[device_id] = spool
        return spool

    @property
    def task_count(self) -> int:
        return sum(s.collected for s in self._tasks.values())

    def iter_records(self) -> Iterator[TaskRecord]:
        """Every task record, in start order, read back from disk as it goes."""
        return merged(list(self._tasks.values()), TASK_ORDER) if self._tasks else iter(())

    @property
    def records(self) -> list[TaskRecord]:
        """Every task record in start order (materialised: use write() for long profiles)."""
        return list(self.iter_records())

    @property
    def api_records(self) -> list[ApiRecord]:
        """Recorded (non-submitting) host calls in start order."""
        return list(self.host_spool.sorted_records())

    @property
    def op_names(self) -> Mapping[tuple[int, int, int, int], str]:
        """Op names of named launches, keyed (device, stream, task id, doorbell ns)."""
        return self.names.names

    @property
    def op_types(self) -> dict[str, str]:
        """Model node name -> ONNX op type, of the nodes executed."""
        return self.names.op_types

    def op_name(self, record: TaskRecord) -> str:
        """The op name of a task (its launch's name=, else the kernel name)."""
        return self.op_names.get(op_key(record), record.name)

    @property
    def api(self) -> list[HostSlice]:
        """Every host API call: recorded ones plus one launch slice per submitted task."""
        return profiler.host_slices(self.records, self.api_records, self.host_costs, self.thread_id)

    def op_summary(self) -> list[dict[str, str]]:
        """op_summary rows (column name -> cell), as in op_summary_<ts>.csv."""
        head, rows = profiler.op_summary(self.records, self.chip, self.aic_metrics, self.op_names, self.op_types)
        return [dict(zip(head, row, strict=True)) for row in rows]

    def trace(self) -> dict[str, Any]:
        """The Chrome trace object of msprof_<ts>.json (written to a scratch folder and read back)."""
        folder = write_collected(self._scratch.sub("trace"), self.collected(), self.aic_metrics, "trace")
        with (folder / OUTPUT_DIR / "msprof_trace.json").open() as handle:
            trace: dict[str, Any] = json.load(handle)
        shutil.rmtree(folder, ignore_errors=True)
        return trace

    def collected(self) -> Collected:
        """The streams the writer reads."""
        spans = [(s.first, s.last) for s in self._tasks.values() if s.collected]
        span = (min(a for a, _ in spans), max(b for _, b in spans)) if spans else (0, 0)
        return Collected(
            self.iter_records,
            self.host_spool.sorted_records,
            self.chip,
            self.host_costs,
            self.thread_id,
            self.op_names,
            span,
            self.host_api,
            self.task_time,
            self.memory,
            self.op_types,
        )

    def write(self, output: str | Path, stamp: str | None = None) -> Path:
        """Write the msprof folder under output (streaming); returns (and remembers) the PROF_ folder."""
        self.path = write_collected(output, self.collected(), self.aic_metrics, stamp)
        return self.path

    def table(self, top: int = 10) -> TextTable:
        """Top kernels by total device time: share, pipe utilisation, L2 hit rate and what bounds them
        (the table of `cannrt prof report`)."""
        stats = ProfileStats(self.chip)
        for record in self.iter_records():
            if not record.discarded:
                stats.add_task(record, self.op_name(record))
        return kernel_rows_table(stats.kernel_rows(), top, f"Top kernels by device time ({self.chip.name})")

    def mark_memory(self, runtime: Runtime, started_ns: int) -> None:
        """At the profile's start: each device's memory totals and its last memory event then."""
        self._memory_start = started_ns
        for device, timeline in device_timelines(runtime).items():
            self._memory_marks[device] = timeline.mark()

    def note_memory(self, runtime: Runtime, devices: Sequence[int]) -> None:
        """At its end: each device's memory timeline since the start, from its totals then."""
        for device in devices:
            events = memory_timeline(runtime, device).events()
            reserved, allocated, last = self._memory_marks.get(device, (0, 0, None))
            since = _events_after(events, last)
            start = MemoryEvent(self._memory_start, "profile_start", 0, 0, "", -1, reserved, allocated)
            self.memory[device] = [start, *since]


def _events_after(events: list[MemoryEvent], last: MemoryEvent | None) -> list[MemoryEvent]:
    """The events after `last`; all of them if it is not among them (there was none at the start,
    or the ring has dropped it since: every event kept is newer)."""
    seen = next((i for i in range(len(events) - 1, -1, -1) if events[i] is last), None) if last else None
    return events[seen + 1 :] if seen is not None else events


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


def _group(aic_metrics: str, aicore_metrics: str | None) -> str:
    if aicore_metrics is not None and aicore_metrics != aic_metrics and aic_metrics != "PipeUtilization":
        raise ValueError(f"aic_metrics {aic_metrics!r} and aicore_metrics {aicore_metrics!r} disagree")
    return profiler.check_group(aicore_metrics or aic_metrics)


def _new_profile(runtime: Runtime, group: str, chunk: int, ascendcl: bool, task_time: bool) -> Profile:
    if runtime.api_records is not None:
        raise CannError(ErrorCode.PROF_ALREADY_RUN, "a profiler is already collecting on this runtime")
    settings = runtime.settings
    return Profile(settings.chip, settings.host_costs, group, threading.get_ident(), chunk, ascendcl, task_time)


@contextmanager
def profile(
    output: str | Path | None = None,
    aic_metrics: str = "PipeUtilization",
    devices: Sequence[int] | None = None,
    *,
    aicore_metrics: str | None = None,
    ascendcl: bool = True,
    task_time: bool = True,
    chunk: int = CHUNK,
) -> Iterator[Profile]:
    """Profile the block (msprof / aclprofStart..Stop): synchronize inside it so its tasks are complete.

    devices: which to trace (default: every device already set). aic_metrics (msprof's --aic-metrics;
    aicore_metrics is pyACL's name): the PMU group of the op summary (PipeUtilization,
    ArithmeticUtilization, Memory, L2Cache). ascendcl / task_time: msprof's --ascendcl and
    --task-time switches. With output, the msprof folder is written on exit and `Profile.path`
    names it. chunk: task records kept in memory before a chunk goes to disk.
    """
    runtime = get_runtime()
    result = _new_profile(runtime, _group(aic_metrics, aicore_metrics), chunk, ascendcl, task_time)
    traced = _open_devices(runtime, devices)
    result.mark_memory(runtime, runtime.host_time_ns)
    runtime.api_records = result.host_spool
    if task_time:
        for device in traced:
            runtime.driver.trace_start(device, result.task_sink(device))
    try:
        yield result
    finally:
        runtime.api_records = None
        if task_time:
            for device in traced:
                if device in runtime.devices:  # the last records arrive in the sink as the device catches up
                    runtime.driver.trace_stop(device, runtime.host_time_ns)
        result.note_memory(runtime, traced)
    if output is not None:
        result.write(output)


def start_program_profile(
    output: str | Path, aic_metrics: str = "PipeUtilization", *, ascendcl: bool = True, task_time: bool = True
) -> Profile:
    """Profile this whole process from now on (the child of `cannrt prof`): every device it opens is
    traced; at interpreter exit the tracing stops and the msprof folder is written under output."""
    runtime = get_runtime()
    result = _new_profile(runtime, profiler.check_group(aic_metrics), CHUNK, ascendcl, task_time)
    result.mark_memory(runtime, runtime.host_time_ns)
    runtime.api_records = result.host_spool
    if task_time:
        runtime.driver.trace_sinks = result.task_sink
        for device in runtime.devices:
            runtime.driver.trace_start(device, result.task_sink(device))

    def finish() -> None:
        runtime.api_records = None
        runtime.driver.trace_sinks = None
        if task_time:
            for device in list(runtime.devices):
                runtime.driver.trace_stop(device, runtime.host_time_ns)
        result.note_memory(runtime, sorted(set(runtime.devices) | set(device_timelines(runtime))))
        result.write(output)

    atexit.register(finish)
    return result
