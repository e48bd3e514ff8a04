"""msprof_<ts>.json: the Chrome trace event timeline (REFERENCE.md section 9, as Perfetto imports it).

One host process with a thread per host thread (API slices); one process per device with a track per
stream (task slices named by kernel), per physical AI core / vector core / SDMA engine (block slices),
counter tracks (busy cores, HBM bandwidth), and a flow arrow from each launch to the task it queued.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cannrt.abi import CopyKind, CoreKind, SqeType, TaskRecord
from cannrt.config import ChipSpec
from cannrt.tools.profiler import metrics
from cannrt.tools.profiler.records import HostSlice, device_tasks, is_kernel, task_label, task_type, wait_times_ns

Event = dict[str, Any]
HOST_PID = 1
DEVICE_PID = 100  # + device id
AI_CORE_TID, VECTOR_CORE_TID, SDMA_TID = 10000, 20000, 30000  # + physical id
STREAM_TID = 1  # + stream id


def _ts(ns: float) -> float:
    """Trace timestamps are microseconds."""
    return round(ns / 1000.0, 6)


def _meta(kind: str, pid: int, tid: int, name: str) -> Event:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}}


def _slice(name: str, cat: str, pid: int, tid: int, start_ns: float, end_ns: float, args: dict[str, Any]) -> Event:
    return {
        "ph": "X",
        "name": name,
        "cat": cat,
        "pid": pid,
        "tid": tid,
        "ts": _ts(start_ns),
        "dur": _ts(end_ns - start_ns),
        "args": args,
    }


def host_thread_tids(slices: Sequence[HostSlice]) -> dict[int, int]:
    """Host thread ident -> tid 1, 2, ... in order of first call (stable across runs)."""
    tids: dict[int, int] = {}
    for host in slices:
        tids.setdefault(host.thread_id, len(tids) + 1)
    return tids


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


def host_events(slices: Sequence[HostSlice], tids: dict[int, int]) -> list[Event]:
    """API slices on the host process, one track per host thread."""
    events = [_meta("process_name", HOST_PID, 0, "Host (CANN API)")]
    events += [_meta("thread_name", HOST_PID, tid, f"Host thread {tid}") for tid in tids.values()]
    for host in slices:
        args: dict[str, Any] = {}
        if host.task is not None:
            args = {"device": host.task.device_id, "stream": host.task.stream_id, "task": host.task.task_id}
        events.append(_slice(host.name, "api", HOST_PID, tids[host.thread_id], host.start_ns, host.end_ns, args))
    return events


def _task_args(record: TaskRecord, wait_ns: int, chip: ChipSpec) -> dict[str, Any]:
    args: dict[str, Any] = {
        "Task Type": task_type(record),
        "Task ID": record.task_id,
        "Task Wait Time(us)": _ts(wait_ns),
        "status": record.status,
    }
    if is_kernel(record):
        ratios = metrics.pipe_ratios(record, chip)
        args.update({"Block Num": record.block_dim, "l2_hit": round(record.l2_hit, 6)})
        args.update({f"{pipe}_ratio": round(value, 6) for pipe, value in ratios.items()})
    else:
        args.update({"bytes": record.bytes_written})
    return args


def device_events(tasks: Sequence[TaskRecord], chip: ChipSpec) -> list[Event]:
    """Per device: stream tracks with task slices, engine tracks with block slices, their names."""
    events: list[Event] = []
    tracks: set[tuple[int, int]] = set()
    for record, wait_ns in zip(tasks, wait_times_ns(tasks), strict=True):
        pid, tid = DEVICE_PID + record.device_id, STREAM_TID + record.stream_id
        tracks.add((pid, tid))
        label = task_label(record)
        events.append(
            _slice(label, "task", pid, tid, record.start_ns, record.end_ns, _task_args(record, wait_ns, chip))
        )
        for index, (unit, start, end) in enumerate(record.blocks):
            if end > start:
                tracks.add((pid, block_tid(record, unit)))
                args = {"stream": record.stream_id, "task": record.task_id, "block": index}
                events.append(_slice(label, "block", pid, block_tid(record, unit), start, end, args))
    meta = [
        _meta("process_name", pid, 0, f"NPU {pid - DEVICE_PID} ({chip.name})") for pid in sorted({p for p, _ in tracks})
    ]
    meta += [_meta("thread_name", pid, tid, block_track_name(tid)) for pid, tid in sorted(tracks)]
    return meta + events


def flow_events(slices: Sequence[HostSlice], tids: dict[int, int]) -> list[Event]:
    """A flow from each submitting host call (its slice's middle) to its device task (the task's middle);
    `bp: e` binds each end to the slice around it."""
    events: list[Event] = []
    flow_id = 0
    for host in slices:
        task = host.task
        if task is None or task.discarded:
            continue
        flow_id += 1
        common = {"name": "launch", "cat": "flow", "id": flow_id, "bp": "e"}
        events.append(
            {
                "ph": "s",
                "pid": HOST_PID,
                "tid": tids[host.thread_id],
                "ts": _ts((host.start_ns + host.end_ns) / 2),
                **common,
            }
        )
        task_tid = STREAM_TID + task.stream_id
        mid = (task.start_ns + task.end_ns) / 2
        events.append({"ph": "f", "pid": DEVICE_PID + task.device_id, "tid": task_tid, "ts": _ts(mid), **common})
    return events


def step_counter(name: str, pid: int, spans: Iterable[tuple[int, int, dict[str, float]]]) -> list[Event]:
    """A counter track from intervals carrying values: at each boundary, the sum over open intervals."""
    deltas: dict[int, dict[str, float]] = {}
    keys: list[str] = []
    for start, end, values in spans:
        if end <= start:
            continue
        for key, value in values.items():
            if key not in keys:
                keys.append(key)
            deltas.setdefault(start, {}).setdefault(key, 0.0)
            deltas.setdefault(end, {}).setdefault(key, 0.0)
            deltas[start][key] += value
            deltas[end][key] -= value
    level = dict.fromkeys(keys, 0.0)
    events: list[Event] = []
    for time in sorted(deltas):
        for key, delta in deltas[time].items():
            level[key] += delta
        args = {key: (round(v, 6) if abs(v) > 1e-9 else 0.0) for key, v in level.items()}
        events.append({"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": _ts(time), "args": args})
    return events


def _hbm_bytes(record: TaskRecord) -> tuple[float, float]:
    """HBM bytes read and written by a task (kernels: the L2 misses and all writes; copies: by kind)."""
    if is_kernel(record):
        moved = metrics.traffic(record)
        return moved.main_mem_read, moved.main_mem_write
    if record.sqe_type != SqeType.SDMA:
        return 0.0, 0.0
    host_to_device = record.copy_kind == CopyKind.HOST_TO_DEVICE
    device_to_host = record.copy_kind == CopyKind.DEVICE_TO_HOST
    read = 0.0 if host_to_device else float(record.bytes_read)
    written = 0.0 if device_to_host else float(record.bytes_written)
    return read, written


def counter_events(tasks: Sequence[TaskRecord]) -> list[Event]:
    """Counter tracks per device: busy AI cores, busy vector cores, HBM read/write bandwidth (GB/s)."""
    events: list[Event] = []
    for device in sorted({r.device_id for r in tasks}):
        pid = DEVICE_PID + device
        mine = [r for r in tasks if r.device_id == device]
        for kind, title in ((CoreKind.AICORE, "AI Core busy"), (CoreKind.AIVEC, "AI Vector Core busy")):
            spans = [
                (s, e, {"cores": 1.0}) for r in mine if is_kernel(r) and r.core_kind == kind for _, s, e in r.blocks
            ]
            events += step_counter(title, pid, spans)
        hbm = []
        for record in mine:
            read, written = _hbm_bytes(record)
            duration = record.end_ns - record.start_ns
            if duration > 0 and (read or written):
                hbm.append((record.start_ns, record.end_ns, {"read": read / duration, "write": written / duration}))
        events += step_counter("HBM bandwidth (GB/s)", pid, hbm)
    return events


def chrome_trace(
    records: Iterable[TaskRecord], slices: Sequence[HostSlice], chip: ChipSpec, extra: Sequence[Event] = ()
) -> dict[str, Any]:
    """The whole msprof_<ts>.json object: {"traceEvents": [...], "displayTimeUnit": "ms"}; extra
    events (the memory timeline's counter tracks) are appended as given."""
    tasks = device_tasks(records)
    tids = host_thread_tids(slices)
    events = host_events(slices, tids) + device_events(tasks, chip) + flow_events(slices, tids) + counter_events(tasks)
    events += list(extra)
    return {"traceEvents": events, "displayTimeUnit": "ms"}
