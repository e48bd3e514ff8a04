"""Launch-path benchmark: host launch cost and end-to-end tasks/s for three launch shapes.

Every figure is a ratio to a baseline measured in the same run (these machines are noisy):
- (a) the empty kernel `nop`, against numpy.add on 1-element arrays;
- (b) `add` on three 16-element fp32 tensors, against numpy.add on the same (host) arrays;
- (c) `matmul` of 16x16 fp16 inputs into fp32, against numpy.matmul on the same arrays;
- a 2048x2048 fp32 matmul launched and synchronised, against numpy.matmul (the overhead row).
Host launch cost: launches and baseline calls interleaved in short rounds (below the SQ depth, so
no round waits for the device), the minimum of each. End to end: launched, scheduled, executed,
completed and synchronised: the best of many runs (the goal) and their median, with the median
process CPU time per task (both threads).
Run: python3 benchmarks/launch.py [--tasks N] [--repeats R] [--edge E]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from rich.console import Console
from rich.table import Table

import cannrt

GOAL_EMPTY_RATIO = 1.7  # (a): no worse than before the launch path was unified
GOAL_LAUNCH_US = 2.0  # (b), (c)
GOAL_LAUNCH_RATIO = 4.0  # (b), (c)
GOAL_TASKS_PER_S = 100_000  # (b), (c)
GOAL_MATMUL_OVERHEAD = 0.05
LAUNCH_ROUNDS = 200
ROUND_CALLS = 1000
E2E_RUNS = 20


@dataclass
class Shape:
    """One launch shape: how to launch it on the device and its numpy counterpart."""

    label: str
    launch: Callable[[cannrt.Stream], None]
    baseline: Callable[[], object]
    baseline_name: str
    goal_us: float | None
    goal_ratio: float
    goal_rate: int | None


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    """Microseconds per call of fn."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def launch_us(stream: cannrt.Stream, launch: Callable[[cannrt.Stream], None], calls: int) -> float:
    """Host cost of one asynchronous launch, in microseconds (the synchronize is not timed)."""
    start = time.perf_counter()
    for _ in range(calls):
        launch(stream)
    elapsed = time.perf_counter() - start
    stream.synchronize()
    return elapsed / calls * 1e6


def tasks_per_s(stream: cannrt.Stream, launch: Callable[[cannrt.Stream], None], calls: int) -> tuple[float, float]:
    """Tasks launched, run, completed and synchronised per second, and the process CPU time per
    task in microseconds (host and device threads: they share one interpreter, so it bounds the rate)."""
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        launch(stream)
    stream.synchronize()
    return calls / (time.perf_counter() - start), (time.process_time() - cpu) / calls * 1e6


def shapes(device: cannrt.Device) -> list[Shape]:
    """The three launch shapes of the issue, with arrays on the device and their host twins."""
    rng = np.random.default_rng(0)
    one_x, one_y = np.ones(1), np.ones(1)
    hx, hy = rng.standard_normal(16, dtype=np.float32), rng.standard_normal(16, dtype=np.float32)
    hz = np.empty(16, np.float32)
    x, y, z = device.array(hx), device.array(hy), device.empty(16, np.float32)
    ha = rng.standard_normal((16, 16)).astype(np.float16)
    hb = rng.standard_normal((16, 16)).astype(np.float16)
    hc = np.empty((16, 16), np.float32)
    a, b, c = device.array(ha), device.array(hb), device.empty((16, 16), np.float32)
    return [
        Shape("(a) empty kernel", lambda s: s.launch("nop"), lambda: np.add(one_x, one_y),
              "numpy.add 1 elem", None, GOAL_EMPTY_RATIO, None),
        Shape("(b) add 3 x 16 fp32", lambda s: s.launch("add", x, y, z), lambda: np.add(hx, hy, out=hz),
              "numpy.add same arrays", GOAL_LAUNCH_US, GOAL_LAUNCH_RATIO, GOAL_TASKS_PER_S),
        Shape("(c) matmul 16x16 fp16", lambda s: s.launch("matmul", a, b, c),
              lambda: np.matmul(ha, hb, out=hc, dtype=np.float32),
              "numpy.matmul same arrays", GOAL_LAUNCH_US, GOAL_LAUNCH_RATIO, GOAL_TASKS_PER_S),
    ]  # fmt: skip


def matmul_times(device: cannrt.Device, stream: cannrt.Stream, edge: int) -> tuple[float, float]:
    """(numpy.matmul seconds, cannrt launch+sync seconds) for an fp32 edge x edge matmul."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((edge, edge), dtype=np.float32)
    b = rng.standard_normal((edge, edge), dtype=np.float32)
    out = np.empty((edge, edge), np.float32)
    da, db, dout = device.array(a), device.array(b), device.empty((edge, edge), np.float32)
    start = time.perf_counter()
    np.matmul(a, b, out=out)
    direct = time.perf_counter() - start
    start = time.perf_counter()
    stream.launch("matmul", da, db, dout, block_dim=24)
    stream.synchronize()
    ours = time.perf_counter() - start
    assert np.allclose(dout.to_numpy(), out, rtol=1e-4, atol=1e-3)
    for array in (da, db, dout):
        array.free()
    return direct, ours


def _goal(shape: Shape) -> str:
    parts = [f"<= {shape.goal_us} us"] if shape.goal_us else []
    parts.append(f"<= {shape.goal_ratio}x")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--edge", type=int, default=2048)
    options = parser.parse_args()
    device = cannrt.Device(0)
    stream = device.stream()
    table = Table(title=f"cannrt launch path ({device.name}); baselines measured in the same run")
    columns = ("launch shape", "host launch", "baseline", "ratio", "goal", "end to end", "median", "goal ", "CPU/task")
    for column in columns:
        table.add_column(column, justify="right")
    for shape in shapes(device):
        tasks_per_s(stream, shape.launch, 2000)  # warm up: kernel load, caches, argument areas
        rounds = [
            (per_call_us(shape.baseline, ROUND_CALLS), launch_us(stream, shape.launch, ROUND_CALLS))
            for _ in range(LAUNCH_ROUNDS)
        ]
        base = min(r[0] for r in rounds)
        launch = min(r[1] for r in rounds)
        runs = [tasks_per_s(stream, shape.launch, options.tasks) for _ in range(E2E_RUNS)]
        rates = [rate for rate, _ in runs]
        rate_goal = f">= {shape.goal_rate:,} /s" if shape.goal_rate else ""
        table.add_row(shape.label, f"{launch:.2f} us", f"{shape.baseline_name} {base:.2f} us",
                      f"{launch / base:.2f}x", _goal(shape), f"{max(rates):,.0f} /s",
                      f"{statistics.median(rates):,.0f} /s", rate_goal,
                      f"{statistics.median(cpu for _, cpu in runs):.2f} us")  # fmt: skip
    pairs = [matmul_times(device, stream, options.edge) for _ in range(options.repeats)]
    direct = min(p[0] for p in pairs)
    ours = min(p[1] for p in pairs)
    spread = statistics.pstdev(p[1] / p[0] for p in pairs)
    table.add_row(f"matmul {options.edge}^2 fp32 launch+sync", f"{ours * 1e3:.1f} ms",
                  f"numpy.matmul {direct * 1e3:.1f} ms", f"{ours / direct:.3f}x (+/-{spread:.3f})",
                  f"<= {1 + GOAL_MATMUL_OVERHEAD:.2f}x", "", "", "", "")  # fmt: skip
    Console(width=200).print(table)
    cannrt.get_runtime().close()


if __name__ == "__main__":
    main()
