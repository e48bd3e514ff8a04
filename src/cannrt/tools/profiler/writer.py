"""The msprof folder: `PROF_<id>_<ts>/mindstudio_profiler_output/` with the JSON timeline and CSVs.

The writer streams: one pass over the host calls, then one over the tasks in start order, each
record turned into its CSV rows and trace events (as text) and written at once; only per-op,
per-stream and per-API aggregates, the task shapes (shapes.py) and a bounded timeline sample for
the HTML report stay in memory. Then the memory timeline of each device (memory_record rows and
the HBM counter track).
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from cannrt.abi import TaskRecord
from cannrt.abi.records import SDMA
from cannrt.config import ChipSpec, HostCosts
from cannrt.tools.profiler import summary
from cannrt.tools.profiler.records import ApiLike, HostSlice, MemoryLike, submit_table, task_label
from cannrt.tools.profiler.shapes import ShapeCache
from cannrt.tools.profiler.stats import ProfileStats
from cannrt.tools.profiler.trace import (
    DEVICE_PID,
    ENCODE,
    TraceBuilder,
    block_tid,
    block_track_name,
    us_text,
)

OUTPUT_DIR = "mindstudio_profiler_output"
MEMORY_RECORD_HEAD = ["Device_id", "Component", "Timestamp(us)", "Total Allocated(KB)", "Total Reserved(KB)", "Device"]
MEMORY_TRACK = "HBM memory (bytes)"  # the memory timeline's counter track (reserved, allocated)
SAMPLE_TASKS = 4000  # tasks of the timeline sample kept for the HTML report
OpKey = tuple[int, int, int, int]  # (device, stream, task id, doorbell ns) of a named launch


def op_key(record: TaskRecord) -> OpKey:
    """How a task is joined to the op name of the launch that submitted it."""
    return (record.device_id, record.stream_id, record.task_id, record.arrival_ns)


@dataclass
class Collected:
    """What a profile hands the writer: its task and host-call streams and how to read them."""

    tasks: Callable[[], Iterator[TaskRecord]]  # every task in start order (discarded ones included)
    api: Callable[[], Iterator[ApiLike]]  # recorded host calls in start order
    chip: ChipSpec
    costs: HostCosts
    thread_id: int = 0  # host thread the derived launch slices go on
    op_names: Mapping[OpKey, str] | None = None
    span: tuple[int, int] = (0, 0)  # first task start, last task end (for the counter bins)
    host_api: bool = True  # --ascendcl: host API slices and statistics
    task_time: bool = True  # --task-time: device task rows and tracks
    memory: Mapping[int, Sequence[MemoryLike]] | None = None  # device -> its memory timeline events
    op_types: Mapping[str, str] | None = None  # model node name -> ONNX op type (OP Type)


def make_prof_dir(root: str | Path, stamp: str) -> Path:
    """A new `PROF_<nnnnnn>_<stamp>` folder under root (numbered after the ones already there)."""
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    number = len(list(base.glob("PROF_*"))) + 1
    while True:
        folder = base / f"PROF_{number:06d}_{stamp}"
        try:
            (folder / OUTPUT_DIR).mkdir(parents=True)
            return folder
        except FileExistsError:
            number += 1


def write_csv(path: Path, table: summary.Table) -> None:
    """One msprof CSV: header row, then the rows."""
    head, rows = table
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(head)
        writer.writerows(rows)


class _JsonEvents:
    """A Chrome trace written one event (JSON text or object) at a time."""

    def __init__(self, handle: IO[str]) -> None:
        self.handle = handle
        self.first = True
        handle.write('{"displayTimeUnit":"ms","traceEvents":[\n')

    def text(self, text: str) -> None:
        """Events already made as JSON text (several joined by ',\\n')."""
        self.handle.write(text if self.first else ",\n" + text)
        self.first = False

    def write(self, events: Iterable[dict[str, Any]]) -> None:
        text = ",\n".join(map(ENCODE, events))
        if text:
            self.text(text)

    def close(self) -> None:
        self.handle.write("\n]}\n")


class _Sample:
    """The first SAMPLE_TASKS tasks and the host slices of their window, for the HTML timeline."""

    def __init__(self) -> None:
        self.slices: list[list[Any]] = []  # [group, track, name, start us, end us]
        self.host: list[list[Any]] = []
        self.tasks = 0
        self.window_ns = -1  # start of the last sampled task

    def task(self, record: TaskRecord, label: str) -> None:
        if self.tasks >= SAMPLE_TASKS:
            return
        self.tasks += 1
        self.window_ns = record.start_ns
        group = f"NPU {record.device_id}"
        self.slices.append([group, f"Stream {record.stream_id}", label, record.start_ns / 1e3, record.end_ns / 1e3])
        for unit, start, end in record.blocks:
            if end > start:
                track = block_track_name(block_tid(record, unit))
                self.slices.append([group, track, label, start / 1e3, end / 1e3])

    def api(self, name: str, tid: int, start_ns: int, end_ns: int) -> None:
        if len(self.host) < 4 * SAMPLE_TASKS:
            self.host.append(["Host", f"Host thread {tid}", name, start_ns / 1e3, end_ns / 1e3])

    def rows(self) -> list[list[Any]]:
        limit = self.window_ns / 1e3 if self.window_ns >= 0 else float("inf")
        return [row for row in self.host if row[3] <= limit] + self.slices


class _Export:
    """One export: the open files and the running state of the two passes."""

    def __init__(self, out: Path, stamp: str, data: Collected, group: str) -> None:
        self.data, self.group, self.out, self.stamp = data, group, out, stamp
        self.stats = ProfileStats(data.chip)
        self.trace = TraceBuilder(data.chip, data.span)
        self.shapes = ShapeCache(data.chip, group, self.stats)
        self.sample = _Sample()
        self.memory_peak: dict[int, int] = {}
        self.handles: list[IO[str]] = []
        self.json = _JsonEvents(self._open(f"msprof_{stamp}.json"))
        self.csv: dict[str, IO[str]] = {}
        for name, head in (
            ("op_summary", summary.op_summary_head(group)),
            ("task_time", summary.TASK_TIME_HEAD),
            ("l2_cache", summary.L2_CACHE_HEAD),
            ("memory_record", MEMORY_RECORD_HEAD),
        ):
            self.csv[name] = self._open(f"{name}_{stamp}.csv")
            csv.writer(self.csv[name]).writerow(head)

    def _open(self, name: str) -> IO[str]:
        handle = (self.out / name).open("w", newline="", buffering=1 << 20)
        self.handles.append(handle)
        return handle

    def host_slice(self, host: HostSlice, linked: bool = False) -> None:
        self.json.text(self.trace.host(host, linked))
        self.stats.add_api(host.name, host.start_ns, host.end_ns)
        if self.sample.tasks < SAMPLE_TASKS:
            self.sample.api(host.name, self.trace.host_tid(host.thread_id), host.start_ns, host.end_ns)

    def memory(self, timelines: Mapping[int, Sequence[MemoryLike]]) -> None:
        """The memory timeline of each device: memory_record rows and the trace's counter track."""
        rows = self.csv["memory_record"]
        for device, events in sorted(timelines.items()):
            pid = DEVICE_PID + device
            lines = []
            for event in events:
                self.memory_peak[device] = max(self.memory_peak.get(device, 0), event.reserved)
                rows.write(
                    f"{device},RUNTIME,{summary.us(event.time_ns)},{event.allocated // 1024},"
                    f"{event.reserved // 1024},NPU:{device}\r\n"
                )
                lines.append(
                    f'{{"ph":"C","name":"{MEMORY_TRACK}","pid":{pid},"tid":0,"ts":{us_text(event.time_ns)},'
                    f'"args":{{"reserved":{event.reserved},"allocated":{event.allocated}}}}}'
                )
            if lines:
                self.trace.pids.add(pid)
                self.json.text(",\n".join(lines))

    def host_calls(self, calls: Iterable[ApiLike]) -> dict[int, HostSlice]:
        """Pass 1: recorded calls become slices; memsets are held back (the async ones are matched
        with their SDMA task in pass 2)."""
        memsets: dict[int, HostSlice] = {}
        if not self.data.host_api:
            return memsets
        for call in calls:
            host = HostSlice(call.name, call.start_ns, call.end_ns, call.thread_id)
            if call.name == "aclrtMemset":
                memsets.setdefault(call.end_ns, host)
            else:
                self.host_slice(host)
        self.trace.host_tid(self.data.thread_id)
        return memsets

    def tasks(self, records: Iterable[TaskRecord], memsets: dict[int, HostSlice]) -> None:
        """Pass 2: each task's derived launch slice, CSV rows, trace events and aggregates."""
        data, names, types = self.data, self.data.op_names or {}, self.data.op_types or {}
        op_file, time_file, l2_file = self.csv["op_summary"], self.csv["task_time"], self.csv["l2_cache"]
        trace, shapes, stats, sample, us = self.trace, self.shapes, self.stats, self.sample, summary.us
        submits = submit_table(data.costs) if data.host_api else {}
        task_time, thread, model = data.task_time, data.thread_id, summary.MODEL_ID
        last_end: dict[tuple[int, int], int] = {}
        derived: dict[tuple[str, int], int] = {}  # (call, cost) -> derived launch slices not yet in stats
        for record in records:
            linked = task_time and not record.discarded
            found = submits.get(record.sqe_type)
            text = ""
            if found is not None:
                held = memsets.pop(record.arrival_ns, None) if record.sqe_type == SDMA and memsets else None
                if held is not None:
                    host = HostSlice("aclrtMemsetAsync", held.start_ns, held.end_ns, held.thread_id, record)
                    self.host_slice(host, linked)
                else:
                    name, cost = found
                    text = trace.launch(name, thread, record.arrival_ns - cost, cost, linked)
                    derived[found] = derived.get(found, 0) + 1
                    if sample.tasks < SAMPLE_TASKS:
                        sample.api(name, trace.host_tid(thread), record.arrival_ns - cost, record.arrival_ns)
            if not linked:
                if text:
                    self.json.text(text)
                continue
            device, stream, task_id = record.device_id, record.stream_id, record.task_id
            start, end = record.start_ns, record.end_ns
            track = (device, stream)
            previous = last_end.get(track)
            wait = 0 if previous is None or start < previous else start - previous
            last_end[track] = end if previous is None or end > previous else previous
            op_name = names.get((device, stream, task_id, record.arrival_ns)) if names else None
            shape = shapes.get(record, op_name, types.get(op_name) if op_name else None)
            task = trace.task(record, shape.trace, trace.flows if found is not None else 0)
            self.json.text(f"{text},\n{task}" if text else task)
            begin, duration = us(start), shape.duration_csv
            time_file.write(
                f"{device},{shape.name},{shape.kernel_type},{stream},{task_id},{duration},{begin},{us(end)}\r\n"
            )
            if shape.kernel:
                op_file.write(
                    f"{device},{model},{task_id},{stream},{shape.name},{shape.op_type},N/A,"
                    f"{shape.task_type},{begin},{duration},{us(wait)},{shape.op_tail}\r\n"
                )
                l2_file.write(f"{device},{stream},{task_id},{shape.l2},0.000000,{shape.name}\r\n")
                shape.count += 1
                stats.add_timing(record)
            else:
                stats.add_task(record, op_name or record.name)
            if sample.tasks < SAMPLE_TASKS:
                sample.task(record, op_name or task_label(record))
        shapes.flush()
        for (name, cost), count in derived.items():
            stats.add_api_many(name, count, cost)
        for held in memsets.values():  # synchronous memsets
            self.host_slice(held)

    def finish(self) -> None:
        self.json.write(self.trace.closing_events())
        self.json.close()
        for handle in self.handles:
            handle.close()
        write_csv(self.out / f"api_statistic_{self.stamp}.csv", summary.api_statistic_rows(self.stats))
        report = {
            "chip": self.data.chip.name,
            "aic_metrics": self.group,
            "tasks": self.stats.tasks,
            "span_us": [self.stats.first_ns / 1e3, self.stats.last_ns / 1e3] if self.stats.tasks else [0.0, 0.0],
            "kernels": self.stats.kernel_rows(),
            "overlap": self.stats.overlap(),
            "copies": self.stats.copy_rows(),
            "api": [list(row) for row in self.stats.api_rows()],
            "memory_peak_bytes": {str(d): v for d, v in sorted(self.memory_peak.items())},
            "timeline_sample": self.sample.rows(),
            "timeline_sampled_tasks": self.sample.tasks,
        }
        (self.out / f"report_data_{self.stamp}.json").write_text(json.dumps(report, separators=(",", ":")))


def write_collected(
    root: str | Path, data: Collected, group: str = "PipeUtilization", stamp: str | None = None
) -> Path:
    """Write the msprof folder from streamed records: msprof_<ts>.json, op_summary, task_time,
    l2_cache, api_statistic, memory_record CSVs and report_data_<ts>.json; returns the PROF_ dir."""
    stamp = stamp or time.strftime("%Y%m%d%H%M%S")
    folder = make_prof_dir(root, stamp)
    export = _Export(folder / OUTPUT_DIR, stamp, data, group)
    try:
        memsets = export.host_calls(data.api())
        export.tasks(data.tasks(), memsets)
        export.memory(data.memory or {})
    finally:
        export.finish()
    return folder
