"""Dump and allocation-tracking benchmark, every figure a ratio to a baseline of the same run.

- Dump throughput: seconds per dumped MiB of a `cannrt.dump` block (its time less the same
  launches without the dump), against numpy.save of the same arrays into the same folder.
- Dump size: bytes on disk (files and dump.json) per tensor byte, against numpy.save's.
- Allocation tracking: iterations per second of a launch-bound loop (Device.empty, a launch of
  `add` on 16 fp32 elements, free) with call-site tracking on, against the same loop off
  (goal <= 1.15x slower), rounds interleaved in alternating order, the best of each.
Run: python3 benchmarks/dump.py [--mib M] [--iterations N] [--repeats R]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

import cannrt
from cannrt.tools.allocations import track_allocations

GOAL_TRACKING_RATIO = 1.15
TENSOR_MIB = 4


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def dump_figures(device: cannrt.Device, mib: int, repeats: int) -> dict[str, float]:
    """Best-of-repeats seconds of the launches, the dumped launches and numpy.save; bytes on disk."""
    count = TENSOR_MIB * (1 << 20) // 4
    ops = max(1, mib // (3 * TENSOR_MIB))  # each add dumps two inputs and one output
    rng = np.random.default_rng(0)
    host = [rng.standard_normal(count, dtype=np.float32) for _ in range(2)]
    x, y = device.array(host[0]), device.array(host[1])
    outs = [device.empty(count, np.float32) for _ in range(ops)]
    stream = device.stream()
    best = {"plain": np.inf, "dumped": np.inf, "numpy": np.inf}
    sizes = {"dump": 0.0, "numpy": 0.0}
    dumped_bytes = ops * 3 * count * 4
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as scratch:
            start = time.perf_counter()
            for out in outs:
                stream.launch("add", x, y, out)
            stream.synchronize()
            best["plain"] = min(best["plain"], time.perf_counter() - start)
            start = time.perf_counter()
            with cannrt.dump(Path(scratch) / "dump"):
                for index, out in enumerate(outs):
                    stream.launch("add", x, y, out, name=f"add{index}")
            best["dumped"] = min(best["dumped"], time.perf_counter() - start)
            sizes["dump"] = _folder_bytes(Path(scratch) / "dump")
            arrays = [a for out in outs for a in (host[0], host[1], out.to_numpy(stream))]
            start = time.perf_counter()
            for index, array in enumerate(arrays):
                np.save(Path(scratch) / f"t{index}.npy", array)
            best["numpy"] = min(best["numpy"], time.perf_counter() - start)
            sizes["numpy"] = sum((Path(scratch) / f"t{i}.npy").stat().st_size for i in range(len(arrays)))
    mib_dumped = dumped_bytes / (1 << 20)
    return {
        "mib": mib_dumped,
        "dump_s_per_mib": (best["dumped"] - best["plain"]) / mib_dumped,
        "numpy_s_per_mib": best["numpy"] / mib_dumped,
        "dump_bytes_per_byte": sizes["dump"] / dumped_bytes,
        "numpy_bytes_per_byte": sizes["numpy"] / dumped_bytes,
    }


def loop_rate(device: cannrt.Device, stream: cannrt.Stream, iterations: int) -> float:
    """Iterations per second of empty + launch + free, synchronised at the end."""
    a, b = device.array(np.ones(16, np.float32)), device.array(np.ones(16, np.float32))
    start = time.perf_counter()
    for _ in range(iterations):
        out = device.empty(16, np.float32)
        stream.launch("add", a, b, out)
        out.free()
    stream.synchronize()
    return iterations / (time.perf_counter() - start)


def tracking_rates(device: cannrt.Device, iterations: int, repeats: int) -> tuple[float, float]:
    """(best rate with tracking off, best rate with it on), rounds interleaved."""
    stream = device.stream()
    loop_rate(device, stream, iterations)  # warm up the pool and the launch shapes
    best = {False: 0.0, True: 0.0}
    for round_ in range(repeats):
        for tracking in (False, True) if round_ % 2 == 0 else (True, False):  # order alternates
            track_allocations(tracking)
            best[tracking] = max(best[tracking], loop_rate(device, stream, iterations))
    track_allocations(False)
    return best[False], best[True]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=96, help="MiB of tensors dumped per run")
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    device = cannrt.Device(0)
    figures = dump_figures(device, options.mib, options.repeats)
    off, on = tracking_rates(device, options.iterations, options.repeats)
    table = Table(title=f"cannrt dump and allocation tracking ({device.name}); baselines measured in the same run")
    for column in ("measure", "cannrt", "baseline", "ratio", "goal"):
        table.add_column(column, justify="right")
    table.add_row(
        f"dump seconds per MiB ({figures['mib']:.0f} MiB)",
        f"{figures['dump_s_per_mib'] * 1e3:.2f} ms",
        f"numpy.save {figures['numpy_s_per_mib'] * 1e3:.2f} ms",
        f"{figures['dump_s_per_mib'] / figures['numpy_s_per_mib']:.2f}x",
        "",
    )
    table.add_row(
        "bytes on disk per tensor byte",
        f"{figures['dump_bytes_per_byte']:.4f}",
        f"numpy.save {figures['numpy_bytes_per_byte']:.4f}",
        f"{figures['dump_bytes_per_byte'] / figures['numpy_bytes_per_byte']:.4f}x",
        "",
    )
    table.add_row("empty+add+free loop, tracking on vs off", f"{on:,.0f} it/s", f"off {off:,.0f} it/s",
                  f"{off / on:.3f}x", f"<= {GOAL_TRACKING_RATIO}x")  # fmt: skip
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
