"""Model benchmark: three light models of the onnx wheel (random weights) on cannrt against
onnxruntime's CPU provider, on the same input, in the same run.

Per model: compile time (goal < 10 s for resnet50); wall time per inference of cannrt.Model and
of onnxruntime, median of the runs; their ratio (goal <= 2.0x, moonshot <= 1.2x), the median of
each cannrt execute's time over the onnxruntime run right after it: these virtual machines switch
between a fast state and one about 1.5x slower every few seconds, both runtimes alike, and a
ratio of the two medians can set one state's median against the other's; the host time of
an execute (the task replay, before waiting) as a share of the wall time (goal <= 5 %); the
modelled device time; feature-map bytes planned against the unplanned sum and the lower bound
(goal: planned within 1 % of the bound); the largest difference to onnxruntime. Concats run in
place (graph/inplace.py: a placed input keeps its whole output alive, which the bound counts); the
next two columns are the same build with every Concat a copy: its planned bytes / bound and its
modelled device time, so the in-place plan is compared with the copy plan it replaces. The last
counts the convolution teams found crowded during the timed runs (other processes, or other
virtual machines, held the cores: their loops then ran on one thread for 5 ms to 2 s,
kernels/nn/team.py), which says whether a slow row met a loaded host.

The shipped weights are ConstantOfShape fills of 0.02; tests/graph/light_models.py (the shared
fixture) replaces them by seeded random initialisers chosen by role, so outputs are not degenerate.
With --breakdown, a second table per model splits the wall time of an execute into the kernels'
numpy compute per op (kernel name and the shapes of its first two arguments: each conv shape
on its own row) and the rest (task replay, the device simulation, waits), measured by timing
every kernel's compute function (registry replaced for the run, the numbers are the kernels').
Run: python3 benchmarks/model.py [--runs N] [--models resnet50,squeezenet,densenet121]
     [--precision force_fp16] [--breakdown [--top K]]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime
from rich.console import Console
from rich.table import Table

import cannrt
from cannrt.api.model import Model
from cannrt.graph import CompileOptions, compile_model
from cannrt.kernels import registry
from cannrt.kernels.nn import team

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "graph"))
import light_models

MODELS = ("resnet50", "squeezenet", "densenet121")
GOAL_RATIO, MOONSHOT_RATIO = 2.0, 1.2
GOAL_HOST_SHARE = 0.05
GOAL_PLAN_OVER_BOUND = 1.01
GOAL_COMPILE_S = {"resnet50": 10.0}
# between the runs: the kernels' thread team spins for a few ms after its last item (GNU OpenMP's
# wait policy) and would take a core from onnxruntime's run that follows; each starts on idle cores
SETTLE_S = 0.01


@dataclass
class Row:
    name: str
    compile_s: float
    cannrt_ms: float
    ort_ms: float
    host_ms: float
    device_ms: float
    planned: int
    unplanned: int
    bound: int
    max_diff: float
    copies_planned: int  # the same build with every Concat a copy (concat_in_place=False)
    copies_bound: int
    copies_device_ms: float
    ratio: float = 0.0  # median over the runs of cannrt's time / onnxruntime's right after it
    crowded: int = 0  # teams found crowded during the timed runs (their loops then ran serially a while)
    mean_ms: float = 0.0  # mean wall time of an execute (the breakdown's kernel times are means)
    kernels: dict[tuple[str, str], float] = field(default_factory=dict)  # (op, shapes) -> ms per execute
    calls: dict[tuple[str, str], int] = field(default_factory=dict)


class KernelClock:
    """Times every kernel's compute function (wall, on whichever thread runs it) by op and shapes."""

    def __init__(self) -> None:
        self.seconds: collections.defaultdict[tuple[str, str], float] = collections.defaultdict(float)
        self.calls: collections.Counter[tuple[str, str]] = collections.Counter()
        self.on = False

    def wrap(self, kernel: registry.Kernel) -> registry.Kernel:
        inner = kernel.compute
        op = kernel.name.removeprefix("nn.")

        def compute(*args: object) -> None:
            if not self.on:
                inner(*args)
                return
            began = time.perf_counter()
            inner(*args)
            shapes = " ".join(str(tuple(a.shape)) for a in args[:2] if isinstance(a, np.ndarray))
            key = (op, f"{shapes} {getattr(args[0], 'dtype', '')}")
            self.seconds[key] += time.perf_counter() - began
            self.calls[key] += 1

        return dataclasses.replace(kernel, compute=compute)

    @contextmanager
    def installed(self) -> Iterator[None]:
        originals = [registry.get_kernel(name) for name in registry.kernel_names()]
        for kernel in originals:
            registry.register_kernel(self.wrap(kernel), replace=True)
        try:
            yield
        finally:
            for kernel in originals:
                registry.register_kernel(kernel, replace=True)


def measure(name: str, runs: int, precision: str, clock: KernelClock | None = None) -> Row:
    model = light_models.load(name)
    started = time.perf_counter()
    offline = compile_model(model, CompileOptions(precision_mode=precision))
    compile_s = time.perf_counter() - started
    feeds = light_models.input_for(model)
    copies = Model(compile_model(model, CompileOptions(precision_mode=precision, concat_in_place=False)))
    for _ in range(2):  # the second execute's modelled time, as the rows below take a later one's
        copies(**feeds)
    copies_figures, copies_device_ms = copies.feature_map_bytes(), copies.stats.device_ns / 1e6
    copies.close()
    runner = Model(offline)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # the fixture leaves the fills' shape tensors unused: no warning per tensor
    # onnxruntime's idle pool threads spin after each run by default, taking the cores from the
    # cannrt run interleaved after it; they sleep instead (its own runs are unaffected: each is timed alone)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    reference = session.run(None, feeds)[0]
    ours = runner(**feeds)[0]
    cannrt_s, ort_s, host_s = [], [], []
    if clock is not None:
        clock.seconds.clear()
        clock.calls.clear()
        clock.on = True
    crowded = team.CROWDED[0]
    for _ in range(runs):  # interleaved: both see the same machine load
        runner(**feeds)
        cannrt_s.append(runner.stats.wall_s)
        host_s.append(runner.stats.submit_s)
        time.sleep(SETTLE_S)
        began = time.perf_counter()
        session.run(None, feeds)
        ort_s.append(time.perf_counter() - began)
        time.sleep(SETTLE_S)
    crowded = team.CROWDED[0] - crowded
    if clock is not None:
        clock.on = False
    figures = runner.feature_map_bytes()
    device_ns = runner.stats.device_ns
    runner.close()
    diff = float(np.max(np.abs(ours.astype(np.float64) - reference.astype(np.float64))))
    row = Row(
        name, compile_s, statistics.median(cannrt_s) * 1e3, statistics.median(ort_s) * 1e3,
        statistics.median(host_s) * 1e3, device_ns / 1e6, figures.planned, figures.unplanned,
        figures.lower_bound, diff, copies_figures.planned, copies_figures.lower_bound, copies_device_ms,
        statistics.median(c / o for c, o in zip(cannrt_s, ort_s, strict=True)), crowded,
    )  # fmt: skip
    if clock is not None:
        row.mean_ms = statistics.fmean(cannrt_s) * 1e3
        row.kernels = {key: seconds * 1e3 / runs for key, seconds in clock.seconds.items()}
        row.calls = {key: count // runs for key, count in clock.calls.items()}
    return row


def breakdown(row: Row, top: int, precision: str) -> Table:
    """Where an execute's wall time goes: kernel compute per op, per shape, and the rest."""
    mean_wall = row.mean_ms  # kernel times are means over the runs, so is this
    table = Table(title=f"{row.name} ({precision}): mean wall {mean_wall:.1f} ms per execute, by kernel compute")
    for column in ("op", "shapes (first two arguments), dtype", "calls", "ms per execute", "share of wall"):
        table.add_column(column, justify="left" if column.startswith(("op", "shapes")) else "right")
    per_op: collections.defaultdict[str, float] = collections.defaultdict(float)
    for (op, _), ms in row.kernels.items():
        per_op[op] += ms
    kernel_ms = sum(per_op.values())
    for op, ms in sorted(per_op.items(), key=lambda kv: -kv[1]):
        calls = sum(n for (o, _), n in row.calls.items() if o == op)
        table.add_row(op, "(all)", str(calls), f"{ms:.2f}", f"{ms / mean_wall:.1%}")
    table.add_row("[bold]kernels[/bold]", "", "", f"{kernel_ms:.2f}", f"{kernel_ms / mean_wall:.1%}")
    rest = mean_wall - kernel_ms
    table.add_row("[bold]rest[/bold]", "replay, simulation, waits", "", f"{rest:.2f}", f"{rest / mean_wall:.1%}")
    for (op, shapes), ms in sorted(row.kernels.items(), key=lambda kv: -kv[1])[:top]:
        table.add_row(op, shapes, str(row.calls[(op, shapes)]), f"{ms:.2f}", f"{ms / mean_wall:.1%}")
    return table


def _mark(ok: bool) -> str:
    return "[green]ok[/green]" if ok else "[red]miss[/red]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--precision", default="force_fp32", help="atc --precision_mode of the build")
    parser.add_argument("--breakdown", action="store_true", help="also time every kernel (its own table)")
    parser.add_argument("--top", type=int, default=12, help="kernel shapes listed per model with --breakdown")
    args = parser.parse_args()
    cannrt.reset_runtime()
    clock = KernelClock() if args.breakdown else None
    with clock.installed() if clock is not None else nullcontext():
        rows = [measure(name, args.runs, args.precision, clock) for name in args.models.split(",")]
    table = Table(title=f"cannrt.Model vs onnxruntime CPU, median of {args.runs} runs ({args.precision})")
    for column in (
        "model", "compile s", "cannrt ms", "onnxruntime ms", "ratio", "host ms", "host %", "device ms (modelled)",
        "fmap planned", "unplanned sum", "lower bound", "planned / bound", "max |diff|",
        "copies: fmap / bound", "copies: device ms", "crowded teams",
    ):  # fmt: skip
        table.add_column(column, justify="left" if column == "model" else "right")
    for r in rows:
        ratio, share, over = r.ratio, r.host_ms / r.cannrt_ms, r.planned / max(r.bound, 1)
        goal = GOAL_COMPILE_S.get(r.name)
        table.add_row(
            r.name,
            f"{r.compile_s:.2f}" + (f" {_mark(r.compile_s < goal)}" if goal else ""),
            f"{r.cannrt_ms:.1f}",
            f"{r.ort_ms:.1f}",
            f"{ratio:.2f}x {_mark(ratio <= GOAL_RATIO)}" + (" moonshot" if ratio <= MOONSHOT_RATIO else ""),
            f"{r.host_ms:.2f}",
            f"{share:.1%} {_mark(share <= GOAL_HOST_SHARE)}",
            f"{r.device_ms:.3f}",
            f"{r.planned:,}",
            f"{r.unplanned:,}",
            f"{r.bound:,}",
            f"{over:.4f} {_mark(over <= GOAL_PLAN_OVER_BOUND)}",
            f"{r.max_diff:.2e}",
            f"{r.copies_planned:,} / {r.copies_bound:,}",
            f"{r.copies_device_ms:.3f}",
            str(r.crowded),
        )
    console = Console(width=300)
    console.print(table)
    if clock is not None:
        for r in rows:
            console.print(breakdown(r, args.top, args.precision))


if __name__ == "__main__":
    main()
