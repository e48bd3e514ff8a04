"""Convolution cuts: every distinct convolution of the light models, each way conv_plan could cut
it (and Winograd's F(2x2, 3x3) for a 3x3 unit-stride window), on the thread team, against the
same product on one host BLAS thread.

Per shape (x channels @ size -> output channels, kernel, stride; calls per model execute): the
wall time of the cut conv_plan chooses, of each other applicable cut (row bands of im2col, per-tap
bands, output-channel parts over one im2col matrix; two and four bands), and of the baseline, the
convolution's product alone (M x K @ K x N, no im2col, no bias) through numpy on one OpenBLAS
thread (as the kernels set it), as a ratio: two threads that did nothing else would reach about
0.55x (two products of half the size at once, on this project's 2-core machines). OpenBLAS's own
threads are not the baseline: they spin for about 0.1 s after each product, taking the core the
team's second thread needs. Medians of R rounds in which the cuts and the baseline take turns (hot
caches: each is run twice before it is timed). The shapes come from one execute of each model
(tests/graph/light_models.py, force_fp32).
Run: python3 benchmarks/conv.py [--repeats R] [--models resnet50,squeezenet,densenet121]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from cannrt.api.model import Model
from cannrt.graph import CompileOptions, compile_model
from cannrt.kernels.nn import blas, conv, conv_gemm, conv_plan, conv_winograd
from cannrt.kernels.nn.window import Window

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "graph"))
import light_models

Shape = tuple[int, int, int, int, int, int]  # input channels, size, output channels, kernel, stride, pad


def model_shapes(names: list[str]) -> collections.Counter[Shape]:
    """Distinct square 2-D convolutions (group 1) of the models, with their calls per execute."""
    seen: collections.Counter[Shape] = collections.Counter()
    original = conv.convolve_into

    def record(
        x: np.ndarray, w: np.ndarray, b: object, group: int, window: Window, y: np.ndarray, *more: object
    ) -> None:
        if group == 1 and x.ndim == 4:
            seen[(x.shape[1], x.shape[2], w.shape[0], w.shape[2], window.strides[0], window.pads_begin[0])] += 1
        original(x, w, b, group, window, y, *more)  # type: ignore[arg-type]

    conv.convolve_into = record  # type: ignore[assignment]
    try:
        for name in names:
            model = light_models.load(name)
            runner = Model(compile_model(model, CompileOptions(precision_mode="force_fp32")))
            runner(**light_models.input_for(model))
            runner.close()
    finally:
        conv.convolve_into = original
    return seen


def cuts(shape: Shape) -> dict[str, Callable[[], None]]:
    """The chosen cut and every other applicable one, as calls."""
    c, size, m, k, stride, pad = shape
    out = (size + 2 * pad - k) // stride + 1
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, size, size), dtype=np.float32)
    w = rng.standard_normal((m, c, k, k), dtype=np.float32)
    b = rng.standard_normal(m, dtype=np.float32)
    y = np.empty((1, m, out, out), np.float32)
    window = Window((k, k), (stride, stride), (1, 1), (pad, pad), (pad, pad))
    geometry = conv._geometry(x.shape, window, (out, out), 1, c, m)
    arrays = (x.reshape(1, c, -1), w.reshape(1, m, -1), b, y.reshape(1, m, -1))
    pointwise = k == 1 and stride == 1 and pad == 0
    flags = (True, True, pointwise)
    flops = 2.0 * m * c * k * k * out * out
    found: dict[str, Callable[[], None]] = {"chosen": lambda: conv.convolve_into(x, w, b, 1, window, y, (1, 0.0, 0.0))}
    for count in (2, 4):
        bands = conv_plan._bands(1, 1, out, count)
        found[f"bands {count}"] = lambda bands=bands: conv_gemm.conv_bands(
            flops, arrays, geometry, bands, flags, np.zeros(len(bands))
        )
        if stride == 1 and k > 1:
            found[f"taps {count}"] = lambda bands=bands: conv_gemm.conv_taps(
                flops, arrays, geometry, bands, flags, np.zeros(len(bands))
            )
    if m >= 2 * conv_plan.MIN_PART_ROWS:
        cols = np.empty((1, 1, 1) if pointwise else (1, c * k * k, out * out), np.float32)
        builds = conv_plan._items([] if pointwise else [(0, 0, c0, c1) for c0, c1 in conv_plan._halves(c, 2)])
        parts = conv_plan._items([(0, 0, m0, m1) for m0, m1 in conv_plan._halves(m, 2)])
        found["parts"] = lambda: conv_gemm.conv_parts(
            flops, arrays, geometry, builds, parts, cols, flags, np.zeros(len(parts))
        )
    if k == 3 and stride == 1:  # Winograd's F(2x2, 3x3), whether chosen or not
        scratch = conv_winograd.workspace(conv_winograd.workspace_size(1, geometry), np.dtype(np.float32))
        found["winograd"] = lambda: conv_winograd.conv_winograd(
            flops, arrays, geometry, flags, scratch, np.zeros(conv_winograd.PARTS), np.empty((0, 0), np.float32)
        )
        u = conv_winograd.transform_weights(w).reshape(16, -1)
        found["winograd ahead"] = lambda: conv_winograd.conv_winograd(
            flops, arrays, geometry, flags, scratch, np.zeros(conv_winograd.PARTS), u
        )
    a = rng.standard_normal((m, c * k * k), dtype=np.float32)
    columns = rng.standard_normal((c * k * k, out * out), dtype=np.float32)
    product = np.empty((m, out * out), np.float32)

    found["baseline"] = lambda: np.matmul(a, columns, out=product)
    return found


def chosen_name(shape: Shape) -> str:
    c, size, m, k, stride, pad = shape
    out = (size + 2 * pad - k) // stride + 1
    pointwise = k == 1 and stride == 1 and pad == 0
    if conv_plan.winograd(1, m, c, (k, k), (stride, stride), (1, 1), (out, out)):
        return "winograd"
    items = conv_plan.plan(1, 1, m, c, k * k, out, out, 4, pointwise, stride == 1)
    if items.bands is None:
        return "parts"
    return f"{'taps' if items.by_taps else 'bands'} {len(items.bands)}"


def measure(calls: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Median ms of each call over rounds in which they take turns."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            call()
            call()
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: 1e3 * statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--models", default="resnet50,squeezenet,densenet121")
    args = parser.parse_args()
    shapes = model_shapes(args.models.split(","))
    blas.limit_blas_threads()
    title = f"convolution cuts on the thread team vs the product on one BLAS thread (median of {args.repeats})"
    table = Table(title=title)
    for column in ("shape", "calls", "chosen", "ms", "vs baseline", "other cuts (ms)", "best"):
        table.add_column(column, justify="left" if column in ("shape", "other cuts (ms)") else "right")
    total = total_base = 0.0
    for shape, count in sorted(shapes.items(), key=lambda kv: -kv[0][0] * kv[0][2] * kv[0][3] ** 2 * kv[0][1] ** 2):
        c, size, m, k, stride, _ = shape
        times = measure(cuts(shape), args.repeats)
        base, mine = times.pop("baseline"), times.pop("chosen")
        best = min(times, key=lambda name: times[name])
        total, total_base = total + count * mine, total_base + count * base
        others = " ".join(f"{name} {value:.3f}" for name, value in times.items())
        label = f"{c}@{size} -> {m} {k}x{k}/{stride}"
        table.add_row(label, str(count), chosen_name(shape), f"{mine:.3f}", f"{mine / base:.2f}x", others, best)
    table.add_row("all (per execute)", "", "", f"{total:.2f}", f"{total / total_base:.2f}x", "", "")
    Console(width=260).print(table)


if __name__ == "__main__":
    main()
