"""msprof_<ts>.json: the Chrome trace event timeline (REFERENCE.md section 9, as Perfetto imports it).

One host process with a thread per host thread (API slices); one process per device with a track per
stream (task slices named by op), per physical AI core / vector core / SDMA engine (block slices),
counter tracks (busy cores, HBM bandwidth, HBM in use), and a flow arrow from each launch to the task
it queued. Events are made one task at a time (`TraceBuilder`), so the writer can stream them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cannrt.abi import CopyKind, CoreKind, SqeType, TaskRecord
from cannrt.config import ChipSpec
from cannrt.tools.profiler import metrics
from cannrt.tools.profiler.counters import CounterTrack
from cannrt.tools.profiler.records import HostSlice, is_kernel, task_label, task_type

Event = dict[str, Any]
HOST_PID = 1
DEVICE_PID = 100  # + device id
AI_CORE_TID, VECTOR_CORE_TID, SDMA_TID = 10000, 20000, 30000  # + physical id
STREAM_TID = 1  # + stream id
MIB = float(1 << 20)


def _ts(ns: float) -> float:
    """Trace timestamps are microseconds."""
    return round(ns / 1000.0, 6)


def _meta(kind: str, pid: int, tid: int, name: str) -> Event:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}}


def _slice(name: str, cat: str, pid: int, tid: int, start_ns: float, end_ns: float, args: dict[str, Any]) -> Event:
    event: Event = {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": _ts(start_ns)}
    event["dur"] = _ts(end_ns - start_ns)
    if args:
        event["args"] = args
    return event


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


def task_args(record: TaskRecord, wait_ns: int, chip: ChipSpec, op_name: str | None) -> dict[str, Any]:
    """A task slice's args: ids and type always; the kernel's op type, blocks, busy pipes and L2 hit
    rate, or a copy's bytes; zero ratios and waits left out (they are the common case)."""
    args: dict[str, Any] = {"Task ID": record.task_id, "Task Type": task_type(record)}
    if wait_ns:
        args["Task Wait Time(us)"] = _ts(wait_ns)
    if record.status:
        args["status"] = record.status
    if is_kernel(record):
        if op_name:
            args["OP Type"] = record.name
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


class TraceBuilder:
    """The trace's events, made one host slice or task at a time; `closing_events()` gives the track
    names and counter tracks once everything was added. Counter tracks hold at most `counter_points`
    points each (see counters.py)."""

    def __init__(self, chip: ChipSpec, span: tuple[int, int] = (0, 0), counter_points: int = 20000) -> None:
        self.chip = chip
        self.host_tids: dict[int, int] = {}  # host thread ident -> tid 1, 2, ... by first call
        self.tracks: set[tuple[int, int]] = set()
        self._flows = 0
        self._counters: dict[tuple[int, str], CounterTrack] = {}
        self._span, self._points = span, counter_points
        self._memory: list[Event] = []  # HBM-in-use points, one per sampled host call
        self._memory_pids: set[int] = set()

    def host_tid(self, thread_id: int) -> int:
        return self.host_tids.setdefault(thread_id, len(self.host_tids) + 1)

    def counter(self, pid: int, name: str) -> CounterTrack:
        track = self._counters.get((pid, name))
        if track is None:
            track = self._counters[(pid, name)] = CounterTrack(name, pid, self._span, self._points)
        return track

    def host(self, host: HostSlice) -> list[Event]:
        """An API slice on its host thread's track, and the flow to its task if it submitted one."""
        tid = self.host_tid(host.thread_id)
        events = [_slice(host.name, "api", HOST_PID, tid, host.start_ns, host.end_ns, {})]
        task = host.task
        if task is not None and not task.discarded:
            self._flows += 1
            common = {"name": "launch", "cat": "flow", "id": self._flows}
            events.append(
                {"ph": "s", "pid": HOST_PID, "tid": tid, "ts": _ts((host.start_ns + host.end_ns) / 2), **common}
            )
            mid = _ts((task.start_ns + task.end_ns) / 2)
            pid, stream_tid = DEVICE_PID + task.device_id, STREAM_TID + task.stream_id
            events.append({"ph": "f", "bp": "e", "pid": pid, "tid": stream_tid, "ts": mid, **common})
        return events

    def memory(self, device_id: int, at_ns: int, used: int) -> None:
        """A sample of the HBM in use on a device (the memory-in-use counter track)."""
        pid = DEVICE_PID + device_id
        self._memory_pids.add(pid)
        args = {"used": round(used / MIB, 6)}
        self._memory.append(
            {"ph": "C", "name": "HBM in use (MiB)", "pid": pid, "tid": 0, "ts": _ts(at_ns), "args": args}
        )

    def task(self, record: TaskRecord, wait_ns: int, op_name: str | None = None) -> list[Event]:
        """A task's slice on its stream track and its blocks on the engines that ran them."""
        pid, tid = DEVICE_PID + record.device_id, STREAM_TID + record.stream_id
        self.tracks.add((pid, tid))
        label = op_name or task_label(record)
        args = task_args(record, wait_ns, self.chip, op_name)
        events = [_slice(label, "task", pid, tid, record.start_ns, record.end_ns, args)]
        kind = record.core_kind if is_kernel(record) else -1
        for unit, start, end in record.blocks:
            if end > start:
                engine = block_tid(record, unit)
                self.tracks.add((pid, engine))
                events.append(_slice(label, "block", pid, engine, start, end, {}))
                if kind >= 0:
                    title = "AI Vector Core busy" if kind == CoreKind.AIVEC else "AI Core busy"
                    self.counter(pid, title).span(start, end, {"cores": 1.0})
        read, written = hbm_bytes(record)
        duration = record.end_ns - record.start_ns
        if duration > 0 and (read or written):
            rates = {"read": read / duration, "write": written / duration}
            self.counter(pid, "HBM bandwidth (GB/s)").span(record.start_ns, record.end_ns, rates)
        for track in self._counters.values():
            track.flush_before(record.start_ns)
        return events

    def closing_events(self) -> Iterator[Event]:
        """Process and thread names, then every counter track."""
        yield _meta("process_name", HOST_PID, 0, "Host (CANN API)")
        for tid in self.host_tids.values():
            yield _meta("thread_name", HOST_PID, tid, f"Host thread {tid}")
        pids = {p for p, _ in self.tracks} | {p for p, _ in self._counters} | self._memory_pids
        for pid in sorted(pids):
            yield _meta("process_name", pid, 0, f"NPU {pid - DEVICE_PID} ({self.chip.name})")
        for pid, tid in sorted(self.tracks):
            yield _meta("thread_name", pid, tid, block_track_name(tid))
        for key in sorted(self._counters):
            yield from self._counters[key].finish()
        yield from self._memory
