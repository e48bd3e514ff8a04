"""`cannrt prof report DIR`: read a profile folder back and summarise it in the terminal.

The writer leaves `report_data_<ts>.json` beside the msprof CSVs: the per-op aggregates (device
time, share, busy-weighted pipe ratios, L2 hit rate, bound), stream overlap, copy bandwidth, API
statistics, memory peaks and a bounded timeline sample. The memory-in-use series is read from
memory_record_<ts>.csv. Everything here reads files; nothing drives the device.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cannrt.tools.profiler.writer import OUTPUT_DIR

MEMORY_POINTS = 5000  # memory-in-use points the report keeps (evenly strided)


class ReportError(Exception):
    """A folder that holds no readable cannrt profile."""


@dataclass
class ReportData:
    """One profile folder's report data."""

    folder: Path  # the mindstudio_profiler_output folder
    stamp: str
    summary: dict[str, Any]

    def memory_series(self) -> dict[int, tuple[list[float], list[float]]]:
        """Per device: (time us, HBM in use MiB) from memory_record, at most MEMORY_POINTS each."""
        path = self.folder / f"memory_record_{self.stamp}.csv"
        if not path.is_file():
            return {}
        with path.open(newline="") as handle:
            total = max(0, sum(1 for _ in handle) - 1)
        stride = max(1, -(-total // MEMORY_POINTS))
        series: dict[int, tuple[list[float], list[float]]] = {}
        with path.open(newline="") as handle:
            for index, row in enumerate(csv.DictReader(handle)):
                if index % stride:
                    continue
                times, values = series.setdefault(int(row["Device_id"]), ([], []))
                times.append(float(row["Timestamp(us)"]))
                values.append(int(row["Total Reserved(KB)"]) / 1024.0)
        return series


def _output_folder(path: Path) -> Path:
    """The mindstudio_profiler_output folder of DIR: itself, its child, or that of its newest PROF_."""
    if path.name == OUTPUT_DIR:
        return path
    if (path / OUTPUT_DIR).is_dir():
        return path / OUTPUT_DIR
    profiles = sorted(p for p in path.glob("PROF_*") if (p / OUTPUT_DIR).is_dir())
    if not profiles:
        raise ReportError(f"{path} holds no PROF_*/{OUTPUT_DIR} folder")
    return profiles[-1] / OUTPUT_DIR


def find_report(directory: str | Path) -> ReportData:
    """The report data of a profile folder; ReportError if there is none or it cannot be read."""
    path = Path(directory)
    if not path.is_dir():
        raise ReportError(f"{path} is not a folder")
    folder = _output_folder(path)
    found = sorted(folder.glob("report_data_*.json"))
    if not found:
        raise ReportError(f"{folder} has no report_data_*.json (not written by cannrt's profiler)")
    try:
        summary = json.loads(found[-1].read_text())
    except (OSError, ValueError) as exc:
        raise ReportError(f"cannot read {found[-1]}: {exc}") from None
    if not isinstance(summary, dict) or "kernels" not in summary:
        raise ReportError(f"{found[-1]} is not a cannrt report data file")
    return ReportData(folder, found[-1].stem.removeprefix("report_data_"), summary)


class TextTable(Table):
    """A rich Table that also prints as text with print() (str renders it)."""

    def __str__(self) -> str:
        buffer = io.StringIO()
        Console(file=buffer, width=160, force_terminal=False, color_system=None).print(self)
        return buffer.getvalue()


def _table(title: str, columns: list[str]) -> TextTable:
    table = TextTable(title=title, title_justify="left")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    return table


def kernel_rows_table(
    rows: list[dict[str, Any]], top: int = 10, title: str = "Top kernels by device time"
) -> TextTable:
    """Top kernels (ProfileStats.kernel_rows) by device time: share, pipe ratios, L2 hit rate and
    what bounds each."""
    table = _table(title, ["Op Name", "Task Type", "Count", "Total(us)", "Avg(us)", "Time %"])
    for column in ("mac", "vec", "scalar", "mte2", "mte3", "L2 hit", "bound"):
        table.add_column(column, justify="right")
    for row in rows[:top]:
        ratios = row["ratios"]
        table.add_row(
            row["name"],
            row["type"],
            str(row["count"]),
            f"{row['total_us']:.3f}",
            f"{row['avg_us']:.3f}",
            f"{100 * row['share']:.1f}",
            *(f"{ratios[p]:.2f}" for p in ("mac", "vec", "scalar", "mte2", "mte3")),
            f"{row['l2_hit']:.2f}",
            row["bound"],
        )
    return table


def kernel_table(data: ReportData, top: int = 10) -> TextTable:
    """The top kernels of a profile folder."""
    return kernel_rows_table(data.summary["kernels"], top)


def render_text(data: ReportData, top: int = 10) -> str:
    """The terminal summary as text."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=140, force_terminal=False, color_system=None)
    s = data.summary
    span = s["span_us"]
    console.print(
        f"Profile {data.folder.parent.name} ({s['chip']}, {s['aic_metrics']}): {s['tasks']} tasks "
        f"over {span[1] - span[0]:.3f} us of device time"
    )
    console.print(kernel_table(data, top))
    overlap = _table("Stream overlap", ["Device", "Streams", "Busy(us)", "Sum of streams(us)", "Overlap"])
    for device, entry in s["overlap"].items():
        streams = entry["streams_us"]
        total = sum(streams.values())
        overlap.add_row(
            device, str(len(streams)), f"{entry['busy_us']:.3f}", f"{total:.3f}", f"{entry['overlap']:.2f}x"
        )
    console.print(overlap)
    copies = _table("Copies", ["Direction", "Count", "Bytes", "Time(us)", "GB/s"])
    for row in s["copies"]:
        copies.add_row(
            row["direction"], str(row["count"]), str(row["bytes"]), f"{row['time_us']:.3f}", f"{row['gbps']:.2f}"
        )
    console.print(copies)
    api = _table("API statistics", ["API Name", "Count", "Time(us)", "Avg(us)", "Max(us)"])
    for name, count, total, _low, high, _variance in s["api"][:top]:
        api.add_row(name, str(count), f"{total / 1e3:.3f}", f"{total / count / 1e3:.3f}", f"{high / 1e3:.3f}")
    console.print(api)
    for device, peak in s.get("memory_peak_bytes", {}).items():
        console.print(f"NPU {device}: peak HBM in use {peak / (1 << 20):.2f} MiB")
    return buffer.getvalue()
