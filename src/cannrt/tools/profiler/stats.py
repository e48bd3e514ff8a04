"""Running aggregates of a profile, fed one record at a time: per-kernel figures, stream overlap,
copy bandwidth and API statistics. Each holds one entry per kernel, stream, copy direction or API
name, never per task, so a profile of any length is summarised in bounded memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cannrt.abi import RECORD_MEMSET, SqeType, TaskRecord
from cannrt.config import ChipSpec
from cannrt.tools.profiler import metrics
from cannrt.tools.profiler.records import MEMCPY_KIND_NAMES, task_type

RATIOS = ("mac", "vec", "scalar", "mte1", "mte2", "mte3", "fixpipe")
BUSY_TYPES = frozenset((SqeType.KERNEL, SqeType.AICPU, SqeType.SDMA))  # tasks that keep a stream busy
IDLE_RATIO = 0.05  # below this on every pipe, a kernel is limited by launch and dispatch, not a pipe


def bound_of(ratios: dict[str, float]) -> str:
    """What limits a kernel: memory (mte2 above the busiest compute pipe, msprof's memory_bound > 1),
    cube, vector or scalar (the busiest compute pipe), or latency (no pipe busy)."""
    compute = {"cube": ratios.get("mac", 0.0), "vector": ratios.get("vec", 0.0), "scalar": ratios.get("scalar", 0.0)}
    busiest = max(compute, key=lambda k: compute[k])
    if max(ratios.get("mte2", 0.0), compute[busiest]) < IDLE_RATIO:
        return "latency"
    if ratios.get("mte2", 0.0) > max(compute["cube"], compute["vector"]):
        return "memory"
    return busiest


KernelFigures = tuple[float, dict[str, float], float, float]  # busy ns, pipe ratios, L2 hits, L2 requests


def kernel_figures(record: TaskRecord, chip: ChipSpec) -> KernelFigures:
    """What one kernel task adds to its op's totals: busy core time, pipe ratios, L2 hits and requests."""
    counts = metrics.l2_requests(record)
    hits = counts["read_cache_hit"] + counts["write_cache_hit"]
    requests = hits + counts["read_cache_miss_allocate"] + counts["write_cache_miss_allocate"]
    return metrics.core_time(record, chip).busy_ns, metrics.pipe_ratios(record, chip), hits, requests


@dataclass
class KernelTotals:
    """One op (name, task type): count, device time, busy-weighted pipe ratios and L2 requests."""

    name: str
    kind: str
    count: int = 0
    total_ns: int = 0
    busy_ns: float = 0.0
    weighted: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RATIOS, 0.0))
    l2_hits: float = 0.0
    l2_requests: float = 0.0

    def add(self, record: TaskRecord, chip: ChipSpec) -> None:
        self.add_many(1, record.end_ns - record.start_ns, kernel_figures(record, chip))

    def add_many(self, count: int, duration_ns: int, figures: KernelFigures) -> None:
        """count tasks of the op with the same duration and figures."""
        busy, ratios, hits, requests = figures
        self.count += count
        self.total_ns += count * duration_ns
        self.busy_ns += count * busy
        for pipe, value in ratios.items():
            self.weighted[pipe] += count * busy * value
        self.l2_hits += count * hits
        self.l2_requests += count * requests

    def ratios(self) -> dict[str, float]:
        """Pipe ratios weighted by each task's busy core time."""
        weight = self.busy_ns or 1.0
        return {pipe: value / weight for pipe, value in self.weighted.items()}

    def summary(self, grand_ns: int) -> dict[str, Any]:
        ratios = self.ratios()
        return {
            "name": self.name,
            "type": self.kind,
            "count": self.count,
            "total_us": self.total_ns / 1000.0,
            "avg_us": self.total_ns / max(1, self.count) / 1000.0,
            "share": self.total_ns / grand_ns if grand_ns else 0.0,
            "ratios": {k: round(v, 6) for k, v in ratios.items()},
            "l2_hit": round(self.l2_hits / self.l2_requests, 6) if self.l2_requests else 0.0,
            "bound": bound_of(ratios),
        }


class Busy:
    """The union of intervals seen in start order (busy time without double counting)."""

    def __init__(self) -> None:
        self.total = 0
        self._start = self._end = -1

    def add(self, start: int, end: int) -> None:
        if end <= start:
            return
        if start > self._end:
            self.total += max(0, self._end - self._start)
            self._start, self._end = start, end
        elif end > self._end:
            self._end = end

    def value(self) -> int:
        return self.total + max(0, self._end - self._start)


@dataclass
class ProfileStats:
    """Every aggregate of the report, fed task records in start order and host slices in any order."""

    chip: ChipSpec
    kernels: dict[tuple[str, str], KernelTotals] = field(default_factory=dict)
    streams: dict[tuple[int, int], Busy] = field(default_factory=dict)
    devices: dict[int, Busy] = field(default_factory=dict)
    copies: dict[str, list[int]] = field(default_factory=dict)  # direction -> [bytes, ns, count]
    api: dict[str, list[int]] = field(default_factory=dict)  # name -> [count, total, min, max, sum of squares]
    tasks: int = 0
    first_ns: int = -1
    last_ns: int = 0
    _busy: tuple[int, int, Busy, Busy] | None = field(default=None, repr=False, compare=False)  # the last task's

    def add_task(self, record: TaskRecord, op_name: str) -> None:
        """One device task (not discarded)."""
        sqe = record.sqe_type
        if sqe == SqeType.KERNEL or sqe == SqeType.AICPU:
            self.kernel_totals(op_name, record).add(record, self.chip)
        elif sqe == SqeType.SDMA:
            direction = MEMCPY_KIND_NAMES.get(
                record.copy_kind, "MEMSET" if record.copy_kind == RECORD_MEMSET else "OTHER"
            )
            entry = self.copies.setdefault(direction, [0, 0, 0])
            entry[0] += record.bytes_written
            entry[1] += record.end_ns - record.start_ns
            entry[2] += 1
        self.add_timing(record)

    def kernel_totals(self, op_name: str, record: TaskRecord) -> KernelTotals:
        """The totals of a kernel task's op (made on first use)."""
        key = (op_name, task_type(record))
        totals = self.kernels.get(key)
        if totals is None:
            totals = self.kernels[key] = KernelTotals(*key)
        return totals

    def add_timing(self, record: TaskRecord) -> None:
        """A task's time: the profile's span, and stream and device busy time (kernels and copies)."""
        self.tasks += 1
        start, end = record.start_ns, record.end_ns
        if self.first_ns < 0 or start < self.first_ns:
            self.first_ns = start
        if end > self.last_ns:
            self.last_ns = end
        if record.sqe_type not in BUSY_TYPES:
            return
        last = self._busy
        if last is not None and last[0] == record.stream_id and last[1] == record.device_id:
            stream, device = last[2], last[3]  # the stream of the task before
        else:
            stream = self.streams.setdefault((record.device_id, record.stream_id), Busy())  # on a stream change only
            device = self.devices.setdefault(record.device_id, Busy())
            self._busy = (record.stream_id, record.device_id, stream, device)
        stream.add(start, end)
        device.add(start, end)

    def add_api(self, name: str, start_ns: int, end_ns: int) -> None:
        """One host API slice (recorded or derived)."""
        self.add_api_many(name, 1, end_ns - start_ns)

    def add_api_many(self, name: str, count: int, ns: int) -> None:
        """count host API slices of the same duration ns."""
        if count <= 0:
            return
        entry = self.api.get(name)
        if entry is None:
            self.api[name] = [count, count * ns, ns, ns, count * ns * ns]
            return
        entry[0] += count
        entry[1] += count * ns
        entry[2] = min(entry[2], ns)
        entry[3] = max(entry[3], ns)
        entry[4] += count * ns * ns

    def api_rows(self) -> list[tuple[str, int, int, int, int, float]]:
        """(name, count, total, min, max ns, variance us^2), largest total first, then by name."""
        rows = []
        for name, (count, total, low, high, squares) in self.api.items():
            variance = (count * squares - total * total) / (count * count) / 1e6 if count > 1 else 0.0
            rows.append((name, count, total, low, high, variance))
        return sorted(rows, key=lambda row: (-row[2], row[0]))

    def kernel_rows(self) -> list[dict[str, Any]]:
        """Per op, largest total device time first."""
        grand = sum(k.total_ns for k in self.kernels.values())
        ordered = sorted(self.kernels.values(), key=lambda k: (-k.total_ns, k.name, k.kind))
        return [k.summary(grand) for k in ordered]

    def overlap(self) -> dict[str, Any]:
        """Per device: busy time of each stream, of the device (their union) and their ratio."""
        result: dict[str, Any] = {}
        for device, busy in sorted(self.devices.items()):
            streams = {s: b.value() for (d, s), b in sorted(self.streams.items()) if d == device}
            union = busy.value()
            result[str(device)] = {
                "streams_us": {str(s): v / 1000.0 for s, v in streams.items()},
                "busy_us": union / 1000.0,
                "overlap": sum(streams.values()) / union if union else 0.0,
            }
        return result

    def copy_rows(self) -> list[dict[str, Any]]:
        """Per direction: bytes, time, count and bandwidth (GB/s = bytes per ns)."""
        return [
            {"direction": d, "bytes": b, "time_us": ns / 1000.0, "count": n, "gbps": b / ns if ns else 0.0}
            for d, (b, ns, n) in sorted(self.copies.items())
        ]
