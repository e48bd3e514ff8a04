"""Model benchmark: three light models of the onnx wheel (random weights) on cannrt against
onnxruntime's CPU provider, on the same input, in the same run.

Per model: compile time (goal < 10 s for resnet50); wall time per inference of cannrt.Model and
of onnxruntime, median of the runs, as a ratio (goal <= 2.0x, moonshot <= 1.2x); the host time of
an execute (the task replay, before waiting) as a share of the wall time (goal <= 5 %); the
modelled device time; feature-map bytes planned against the unplanned sum and the lower bound
(goal: planned within 1 % of the bound); the largest difference to onnxruntime.

The shipped weights are ConstantOfShape fills of 0.02; tests/graph/light_models.py (the shared
fixture) replaces them by seeded random initialisers chosen by role, so outputs are not degenerate.
Run: python3 benchmarks/model.py [--runs N] [--models resnet50,squeezenet,densenet121]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime
from rich.console import Console
from rich.table import Table

import cannrt
from cannrt.api.model import Model
from cannrt.graph import CompileOptions, compile_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "graph"))
import light_models

MODELS = ("resnet50", "squeezenet", "densenet121")
GOAL_RATIO, MOONSHOT_RATIO = 2.0, 1.2
GOAL_HOST_SHARE = 0.05
GOAL_PLAN_OVER_BOUND = 1.01
GOAL_COMPILE_S = {"resnet50": 10.0}


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


def measure(name: str, runs: int, precision: str) -> Row:
    model = light_models.load(name)
    started = time.perf_counter()
    offline = compile_model(model, CompileOptions(precision_mode=precision))
    compile_s = time.perf_counter() - started
    runner = Model(offline)
    feeds = light_models.input_for(model)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # the fixture leaves the fills' shape tensors unused: no warning per tensor
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    reference = session.run(None, feeds)[0]
    ours = runner(**feeds)[0]
    cannrt_s, ort_s, host_s = [], [], []
    for _ in range(runs):  # interleaved: both see the same machine load
        runner(**feeds)
        cannrt_s.append(runner.stats.wall_s)
        host_s.append(runner.stats.submit_s)
        began = time.perf_counter()
        session.run(None, feeds)
        ort_s.append(time.perf_counter() - began)
    figures = runner.feature_map_bytes()
    device_ns = runner.stats.device_ns
    runner.close()
    diff = float(np.max(np.abs(ours.astype(np.float64) - reference.astype(np.float64))))
    return Row(
        name, compile_s, statistics.median(cannrt_s) * 1e3, statistics.median(ort_s) * 1e3,
        statistics.median(host_s) * 1e3, device_ns / 1e6, figures.planned, figures.unplanned,
        figures.lower_bound, diff,
    )  # fmt: skip


def _mark(ok: bool) -> str:
    return "[green]ok[/green]" if ok else "[red]miss[/red]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--precision", default="force_fp32", help="atc --precision_mode of the build")
    args = parser.parse_args()
    cannrt.reset_runtime()
    rows = [measure(name, args.runs, args.precision) for name in args.models.split(",")]
    table = Table(title=f"cannrt.Model vs onnxruntime CPU, median of {args.runs} runs ({args.precision})")
    for column in (
        "model", "compile s", "cannrt ms", "onnxruntime ms", "ratio", "host ms", "host %", "device ms (modelled)",
        "fmap planned", "unplanned sum", "lower bound", "planned / bound", "max |diff|",
    ):  # fmt: skip
        table.add_column(column, justify="left" if column == "model" else "right")
    for r in rows:
        ratio, share, over = r.cannrt_ms / r.ort_ms, r.host_ms / r.cannrt_ms, r.planned / max(r.bound, 1)
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
        )
    Console(width=240).print(table)


if __name__ == "__main__":
    main()
