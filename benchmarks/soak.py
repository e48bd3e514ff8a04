"""Soak benchmark: mixed work for a while, then what it left behind (issue 13's acceptance).

Four host threads share one device for --seconds (default 60): kernels on their own streams,
cross-stream waits through `wait_stream` (a new event each time, dropped at once), host round trips
(`Device.array` + `to_numpy` + `free`), queries, and now and then a copy whose synchronize times
out on a stream held by a legacy event (its host target dropped meanwhile). The resident set size is
sampled once a second; after a warm-up (the first quarter) its growth and slope are measured
against the size at the end of the warm-up (the same run's baseline). At the end: device events
still held, and the HBM free after a device reset against the HBM total.
Goals: RSS growth < 16 MiB, events held bounded (<= 4 per thread), every byte of HBM free.
Run: python3 benchmarks/soak.py [--seconds S] [--threads T]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import threading
import time

import numpy as np
from rich.console import Console
from rich.table import Table

import cannrt
from cannrt.driver.hal import Resource
from cannrt.runtime.core import get_runtime

GOAL_RSS_GROWTH_MIB = 16.0
GOAL_EVENTS_PER_THREAD = 4
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mib() -> float:
    """Resident set size of this process in MiB (/proc/self/statm)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE / (1 << 20)


def slope_mib_per_min(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) samples, in MiB per minute."""
    if len(samples) < 2:
        return 0.0
    times = np.array([t for t, _ in samples])
    sizes = np.array([m for _, m in samples])
    return float(np.polyfit(times, sizes, 1)[0] * 60.0)


def events_held(device: int) -> int:
    """Device event ids allocated and not given back."""
    next_id, free = get_runtime().driver._ids.get((device, Resource.EVENT), (0, set()))
    return next_id - len(free)


def worker(dev: cannrt.Device, index: int, stop: threading.Event, counts: list[int], errors: list[str]) -> None:
    """One host thread's mix of work until stop is set; counts[index] = iterations done."""
    dev.use()
    main, side = dev.stream(), dev.stream()
    rng = np.random.default_rng(index)
    x = dev.array(rng.random(4096, dtype=np.float32))
    y = dev.empty(4096)
    step = 0
    while not stop.is_set():
        try:
            main.launch("add", x, x, y)
            main.launch("relu", y, y)
            side.wait_stream(main)  # an event made and dropped
            side.launch("mul", y, x, y)
            sent = rng.integers(0, 1 << 20, 1024, dtype=np.int32)
            echo = dev.array(sent, stream=side)
            if not np.array_equal(echo.to_numpy(side), sent):
                errors.append(f"thread {index} step {step}: round trip differs")
            echo.free()
            main.query()
            if step % 50 == 0:
                failing_round_trip(dev, side)
            step += 1
        except cannrt.CannError as exc:
            errors.append(f"thread {index} step {step}: {exc.code} {str(exc)[:80]}")
    main.synchronize()
    side.synchronize()
    counts[index] = step


def failing_round_trip(dev: cannrt.Device, stream: cannrt.Stream) -> None:
    """A to_numpy whose synchronize times out with its copy queued, then the copy released."""
    blocker = dev.legacy_event()
    held = dev.stream()
    held.wait(blocker)
    data = dev.array(np.arange(256, dtype=np.float32), stream=stream)
    stream.synchronize()
    data.copy_to(np.empty(256, np.float32), held)  # the target is dropped here: the stream holds it
    with contextlib.suppress(cannrt.CannTimeout):
        held.synchronize(1)
    stream.record(blocker)
    held.synchronize()
    data.free()
    held.destroy()
    blocker.destroy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=4)
    options = parser.parse_args()
    dev = cannrt.Device(0)
    stop = threading.Event()
    counts = [0] * options.threads
    errors: list[str] = []
    threads = [
        threading.Thread(target=worker, args=(dev, i, stop, counts, errors), daemon=True)
        for i in range(options.threads)
    ]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    samples: list[tuple[float, float]] = []
    peak_events = 0
    while (now := time.monotonic() - start) < options.seconds:
        time.sleep(1.0)
        gc.collect()
        samples.append((now, rss_mib()))
        peak_events = max(peak_events, events_held(0))
    stop.set()
    for thread in threads:
        thread.join(60)
    warm = [s for s in samples if s[0] >= options.seconds / 4]
    baseline = warm[0][1] if warm else rss_mib()
    growth = (warm[-1][1] if warm else rss_mib()) - baseline
    slope = slope_mib_per_min(warm)
    dev.synchronize()
    gc.collect()
    dev.event().destroy()  # a creation reaps the events dropped last
    held = events_held(0)
    dev.reset()
    free, total = cannrt.Device(0).mem_info()
    table = Table(title=f"cannrt soak: {options.threads} threads, {options.seconds:.0f} s, {sum(counts):,} iterations")
    for column in ("measure", "value", "baseline (same run)", "ratio", "goal", "met"):
        table.add_column(column, justify="right")
    table.add_row("RSS growth after warm-up", f"{growth:+.1f} MiB", f"{baseline:.1f} MiB at warm-up end",
                  f"{(baseline + growth) / baseline:.3f}x", f"< {GOAL_RSS_GROWTH_MIB:.0f} MiB",
                  str(growth < GOAL_RSS_GROWTH_MIB))  # fmt: skip
    table.add_row("RSS slope after warm-up", f"{slope:+.2f} MiB/min", "", "", "flat", "")
    bound = GOAL_EVENTS_PER_THREAD * options.threads
    table.add_row("device events held (peak / end)", f"{peak_events} / {held}", f"{bound} allowed",
                  f"{peak_events / bound:.2f}x", f"<= {bound}", str(peak_events <= bound))  # fmt: skip
    table.add_row("HBM free after reset", f"{free:,} B", f"{total:,} B total", f"{free / total:.6f}x",
                  "all free", str(free == total))  # fmt: skip
    table.add_row("errors in the mix", str(len(errors)), "", "", "0", str(not errors))
    Console(width=160).print(table)
    for line in errors[:5]:
        print(line)


if __name__ == "__main__":
    main()
