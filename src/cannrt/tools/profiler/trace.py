"""msprof_<ts>.json: the Chrome trace event timeline (REFERENCE.md section 9, as Perfetto imports it).

One host process with a thread per host thread (API slices); one process per device with a track per
stream (task slices named by op), per physical AI core / vector core / SDMA engine (block slices),
and counter tracks (busy cores, HBM bandwidth, HBM reserved / allocated). A launch slice is linked
to the task it queued by a flow bound to both slices (Perfetto's flow v2: "bind_id" with
"flow_out" on the launch, "flow_in" on the task), so the link costs two fields, not two events.

The trace is the timeline, written compactly (about 200 bytes per launched task): no "cat", no
field a viewer can derive (a task's wait is the gap to the previous slice on its track), times in
microseconds with only the digits needed (ns resolution). A task slice's args hold only what the
task did beyond its time: op type of a named launch, Block Num above 1, busy pipe ratios, L2 hit
rate, bytes copied, a failing status. Task IDs and task types are the join keys and columns of
task_time / op_summary (device, stream, start time). Events are made as text one task at a time
(`TraceBuilder`), so the writer streams them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

from cannrt.abi import CopyKind, CoreKind, SqeType, TaskRecord
from cannrt.config import ChipSpec
from cannrt.tools.profiler import metrics
from cannrt.tools.profiler.counters import CounterTrack
from cannrt.tools.profiler.records import HostSlice, is_kernel, task_label

Event = dict[str, Any]
HOST_PID = 1
DEVICE_PID = 2  # + device id
AI_CORE_TID, VECTOR_CORE_TID, SDMA_TID = 10000, 20000, 30000  # + physical id
STREAM_TID = 1  # + stream id
BUSY_TRACKS = ("AI Core busy", "AI Vector Core busy")  # the busy cores counter of an AI core / vector core kernel
ENCODE = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


def us_text(ns: int) -> str:
    """A time in microseconds as JSON text: integer when whole, else up to 3 decimals (ns)."""
    whole, part = divmod(int(ns), 1000)
    if not part:
        return str(whole)
    return f"{ns / 1000:.3f}".rstrip("0")


@functools.lru_cache(maxsize=4096)
def quoted(name: str) -> str:
    """A name as a JSON string."""
    return json.dumps(name, ensure_ascii=False)


def _meta(kind: str, pid: int, tid: int, name: str) -> Event:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}}


def block_tid(record: TaskRecord, unit: int) -> int:
    """The track of a physical engine: AI core, vector core or SDMA engine."""
    if record.sqe_type == SqeType.SDMA:
        return SDMA_TID + unit
    return (VECTOR_CORE_TID if record.core_kind == CoreKind.AIVEC else AI_CORE_TID) + unit


def block_track_name(tid: int) -> str:
    """thread_name of an engine track."""
    for base, label in ((SDMA_TID, "SDMA"), (VECTOR_CORE_TID, "AI Vector Core"), (AI_CORE_TID, "AI Core")):
        if tid >= base:
            return f"{label} {tid - base}"
    return f"Stream {tid - STREAM_TID}"


def task_args(record: TaskRecord, chip: ChipSpec, op_name: str | None) -> dict[str, Any]:
    """A task slice's args: what the task did beyond its time (empty for a plain one-block task)."""
    args: dict[str, Any] = {}
    if record.status:
        args["status"] = record.status
    if is_kernel(record):
        if op_name:
            args["OP Type"] = record.name
        if record.block_dim != 1:
            args["Block Num"] = record.block_dim
        args.update({f"{pipe}_ratio": round(v, 6) for pipe, v in metrics.pipe_ratios(record, chip).items() if v})
        if record.work is not None and (record.work.bytes_read or record.work.bytes_written):
            args["l2_hit_rate"] = round(metrics.l2_hit_rate(record), 6)
    elif record.bytes_written:
        args["bytes"] = record.bytes_written
    return args


def hbm_bytes(record: TaskRecord) -> tuple[float, float]:
    """HBM bytes read and written by a task (kernels: the L2 misses and all writes; copies: by kind)."""
    if is_kernel(record):
        moved = metrics.traffic(record)
        return moved.main_mem_read, moved.main_mem_write
    if record.sqe_type != SqeType.SDMA:
        return 0.0, 0.0
    read = 0.0 if record.copy_kind == CopyKind.HOST_TO_DEVICE else float(record.bytes_read)
    written = 0.0 if record.copy_kind == CopyKind.DEVICE_TO_HOST else float(record.bytes_written)
    return read, written


class TaskShape:
    """What the trace needs of a task that does not change between launches of the same kernel with
    the same arguments and timing shape: its slice label and args text, its HBM traffic."""

    __slots__ = ("args", "duration", "label", "moved")

    def __init__(self, record: TaskRecord, chip: ChipSpec, op_name: str | None) -> None:
        self.label = quoted(op_name or task_label(record))
        self.duration = us_text(record.end_ns - record.start_ns)
        args = task_args(record, chip, op_name)
        self.args = f',"args":{ENCODE(args)}' if args else ""
        self.moved = hbm_bytes(record)


class TraceBuilder:
    """The trace's events as JSON text, made one host slice or task at a time; `closing_events()`
    gives the track names and counter tracks once everything was added. Counter tracks hold at most
    `counter_points` points each (see counters.py)."""

    def __init__(self, chip: ChipSpec, span: tuple[int, int] = (0, 0), counter_points: int = 20000) -> None:
        self.chip = chip
        self.host_tids: dict[int, int] = {}  # host thread ident -> tid 1, 2, ... by first call
        self.tracks: set[tuple[int, int]] = set()
        self.pids: set[int] = set()  # device processes with events not on a track (memory counters)
        self.flows = 0  # the last bind_id given
        self._counters: dict[tuple[int, str], CounterTrack] = {}
        self._span, self._points = span, counter_points
        self._launch_parts: dict[tuple[str, int, int], tuple[str, str]] = {}

    def host_tid(self, thread_id: int) -> int:
        return self.host_tids.setdefault(thread_id, len(self.host_tids) + 1)

    def counter(self, pid: int, name: str) -> CounterTrack:
        track = self._counters.get((pid, name))
        if track is None:
            track = self._counters[(pid, name)] = CounterTrack(name, pid, self._span, self._points)
        return track

    def host(self, host: HostSlice, linked: bool = False) -> str:
        """An API slice on its host thread's track; linked: it is the source of a flow to the task it
        submitted (the next bind_id, which `task` takes as flow)."""
        tid = self.host_tid(host.thread_id)
        head = f'{{"ph":"X","name":{quoted(host.name)},"pid":{HOST_PID},"tid":{tid},"ts":{us_text(host.start_ns)}'
        tail = f',"dur":{us_text(host.end_ns - host.start_ns)}'
        if not linked:
            return head + tail + "}"
        self.flows += 1
        return f'{head}{tail},"bind_id":{self.flows},"flow_out":true}}'

    def launch(self, name: str, thread_id: int, start_ns: int, duration_ns: int, linked: bool) -> str:
        """A derived launch slice (as `host`), its fixed parts made once per call name and thread."""
        key = (name, thread_id, duration_ns)
        parts = self._launch_parts.get(key)
        if parts is None:
            tid = self.host_tid(thread_id)
            head = f'{{"ph":"X","name":{quoted(name)},"pid":{HOST_PID},"tid":{tid},"ts":'
            parts = (head, f',"dur":{us_text(duration_ns)}')
            self._launch_parts[key] = parts
        if not linked:
            return f"{parts[0]}{us_text(start_ns)}{parts[1]}}}"
        self.flows += 1
        return f'{parts[0]}{us_text(start_ns)}{parts[1]},"bind_id":{self.flows},"flow_out":true}}'

    def task(self, record: TaskRecord, shape: TaskShape, flow: int = 0) -> str:
        """A task's slice on its stream track (the end of flow `flow` if not 0) and its blocks on the
        engines that ran them, as lines of JSON text."""
        pid, tid = DEVICE_PID + record.device_id, STREAM_TID + record.stream_id
        self.tracks.add((pid, tid))
        start, end = record.start_ns, record.end_ns
        text = f'{{"ph":"X","name":{shape.label},"pid":{pid},"tid":{tid},"ts":{us_text(start)},"dur":{shape.duration}'
        if flow:
            text += f',"bind_id":{flow},"flow_in":true'
        text += shape.args + "}"
        blocks = record.blocks
        if blocks:
            busy: CounterTrack | None = None  # made at the first block that takes time (as the track)
            base = kind = -1  # of the first block that takes time: the engine tracks' base, the core kind
            head = parts = None
            for unit, begin, finish in blocks:
                if finish > begin:
                    if parts is None:
                        base = block_tid(record, 0)  # the track of engine 0 of the task's kind: + unit
                        kind = record.core_kind if is_kernel(record) else -1
                        head, parts = f',\n{{"ph":"X","name":{shape.label},"pid":{pid},"tid":', [text]
                    engine = base + unit  # block_tid
                    self.tracks.add((pid, engine))
                    parts.append(f'{head}{engine},"ts":{us_text(begin)},"dur":{us_text(finish - begin)}}}')
                    if kind >= 0:
                        if busy is None:
                            busy = self.counter(pid, BUSY_TRACKS[kind == CoreKind.AIVEC])
                        busy.span_one(begin, finish, "cores", 1.0)
            if parts is not None:
                text = "".join(parts)
        read, written = shape.moved
        if end > start and (read or written):
            rates = {"read": read / (end - start), "write": written / (end - start)}
            self.counter(pid, "HBM bandwidth (GB/s)").span(start, end, rates)
        if self._counters:
            for track in self._counters.values():
                track.flush_before(start)
        return text

    def closing_events(self) -> Iterator[Event]:
        """Process and thread names, then every counter track."""
        yield _meta("process_name", HOST_PID, 0, "Host (CANN API)")
        for tid in self.host_tids.values():
            yield _meta("thread_name", HOST_PID, tid, f"Host thread {tid}")
        pids = {p for p, _ in self.tracks} | {p for p, _ in self._counters} | self.pids
        for pid in sorted(pids):
            yield _meta("process_name", pid, 0, f"NPU {pid - DEVICE_PID} ({self.chip.name})")
        for pid, tid in sorted(self.tracks):
            yield _meta("thread_name", pid, tid, block_track_name(tid))
        for key in sorted(self._counters):
            yield from self._counters[key].finish()
