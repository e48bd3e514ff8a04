"""`cannrt.memory.summary()`: a device's memory statistics as a table, in the layout of
torch.cuda.memory_summary (current, peak, total allocated and total freed of each metric, by pool).

This module only formats; the API registers `stats_source`, which finds the device's caching-pool
statistics and the lines about its other memory (stream-ordered pools, HBM), so the memory layer
stays below the runtime.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from cannrt.errors import CannError, ErrorCode
from cannrt.memory.timeline import MemoryEvent, MemoryTimeline

WIDTH = 75

# (title, stats kind, is bytes)
ROWS = (
    ("Allocated memory", "allocated_bytes", True),
    ("Active memory", "active_bytes", True),
    ("Requested memory", "requested_bytes", True),
    ("NPU reserved memory", "reserved_bytes", True),
    ("Non-releasable memory", "inactive_split_bytes", True),
    ("Allocations", "allocation", False),
    ("Active allocs", "active", False),
    ("NPU reserved segments", "segment", False),
    ("Non-releasable allocs", "inactive_split", False),
)
POOL_ROWS = (("all", ""), ("large_pool", "from large pool"), ("small_pool", "from small pool"))
OVERSIZE_ROWS = (("Oversize allocations", "oversize_allocations"), ("Oversize NPU segments", "oversize_segments"))

StatsSource = Callable[[object], tuple[int, dict[str, int], list[str]]]
stats_source: StatsSource | None = None  # set by cannrt.api.pools: device -> (id, stats, extra lines)


def format_size(nbytes: int) -> str:
    """Bytes in the largest unit that keeps the number at or above 1 (as torch's summary does)."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value):6d} {unit:<3}" if unit == "B" else f"{value:6.2f} {unit:<3}"
        value /= 1024
    raise AssertionError("unreachable")


def format_count(count: int) -> str:
    """A count, in thousands once it is large."""
    return f"{count:7d}   " if abs(count) < 100_000 else f"{count / 1000:7.1f} K "


def _line(char: str = "-") -> str:
    return "|" + char * WIDTH + "|"


def _row(title: str, cells: list[str]) -> str:
    return f"| {title:<22}|" + "|".join(f" {cell:^11}" for cell in cells) + "|"


def format_summary(
    device: int, stats: dict[str, int], extra: list[str] | None = None, abbreviated: bool = False
) -> str:
    """The summary table of one device's caching-pool statistics (the keys of memory_stats)."""
    title = f"cannrt NPU memory summary, device ID {device}"
    ooms, retries = f"NPU OOMs: {stats.get('num_ooms', 0)}", f"segment retries: {stats.get('num_alloc_retries', 0)}"
    lines = [
        _line("="),
        f"|{title:^{WIDTH}}|",
        _line(),
        f"|{ooms:^37}|{retries:^37}|",
        _line("="),
        _row("Metric", ["Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed"]),
    ]
    pools = (
        (("all", ""),)
        if abbreviated
        else (("all", ""), ("large_pool", "from large pool"), ("small_pool", "from small pool"))
    )
    for title, kind, is_bytes in ROWS:
        lines.append(_line())
        fmt = format_size if is_bytes else format_count
        for pool, label in pools:
            cells = [fmt(stats.get(f"{kind}.{pool}.{stat}", 0)) for stat in ("current", "peak", "allocated", "freed")]
            lines.append(_row(title if pool == "all" else f"{label:>22}"[-21:], cells))
    lines.append(_line())
    for title, kind in OVERSIZE_ROWS:
        cells = [format_count(stats.get(f"{kind}.{stat}", 0)) for stat in ("current", "peak", "allocated", "freed")]
        lines.append(_row(title, cells))
    lines.append(_line("="))
    for text in extra or []:
        lines.append(f"| {text:<{WIDTH - 1}}|")
    if extra:
        lines.append(_line("="))
    return "\n".join(lines) + "\n"


def summary(device: object = None, abbreviated: bool = False, file: TextIO | None = sys.stdout) -> str:
    """Print (to file; None: do not print) and return the memory summary of device (a Device or
    an index; None: the calling thread's current device), as torch.cuda.memory_summary."""
    if stats_source is None:
        raise CannError(ErrorCode.UNINITIALIZE, "cannrt.memory.summary needs the cannrt API: import cannrt")
    index, stats, extra = stats_source(device)
    text = format_summary(index, stats, extra, abbreviated)
    if file is not None:
        file.write(text)
    return text


TimelineSource = Callable[[object], MemoryTimeline]
timeline_source: TimelineSource | None = None  # set by cannrt.api.pools: device -> its timeline


def _timeline(device: object) -> MemoryTimeline:
    if timeline_source is None:
        raise CannError(ErrorCode.UNINITIALIZE, "cannrt.memory needs the cannrt API: import cannrt")
    return timeline_source(device)


def history(device: object = None) -> list[MemoryEvent]:
    """The memory events kept for device (oldest first; see cannrt.memory.timeline)."""
    return _timeline(device).events()


def record_history(enabled: bool = True, call_sites: bool = False, device: object = None) -> None:
    """Keep memory events for device (on by default), with the Python call site of each when asked
    (torch.cuda.memory._record_memory_history)."""
    timeline = _timeline(device)
    timeline.enabled, timeline.call_sites = enabled, call_sites and enabled
