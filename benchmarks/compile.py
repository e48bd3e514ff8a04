"""Benchmark `cannrt atc`'s build on the light models of the onnx wheel (as shipped: weight fills).

    python benchmarks/compile.py                      # squeezenet, resnet50, densenet121, inception_v1
    python benchmarks/compile.py --only resnet50 --precision force_fp32 --repeat 3

Per model: the best compile time (file -> OfflineModel) against the baseline of the same run,
onnxruntime building a CPU session of the same file (its own graph engine: parse, constant folding,
fusions, memory planning), as a ratio; then tasks, feature-map bytes planned against the unplanned
sum and the lower bound, and the weight section's bytes.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import onnx
from rich.console import Console
from rich.table import Table

from cannrt.graph import CompileOptions, compile_model

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
DEFAULT = ("squeezenet", "resnet50", "densenet121", "inception_v1")


def _best(repeat: int, fn) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _baseline(path: Path) -> None:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(DEFAULT), help="light model names, comma separated")
    parser.add_argument("--precision", default="force_fp16", help="--precision_mode")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    table = Table(title=f"compile ({args.precision}), best of {args.repeat}")
    for column in (
        "model",
        "compile s",
        "onnxruntime session s",
        "ratio",
        "tasks",
        "fm planned",
        "fm unplanned",
        "fm lower bound",
        "planned/bound",
        "weights",
    ):
        table.add_column(column, justify="right")
    options = CompileOptions(precision_mode=args.precision)
    for name in args.only.split(","):
        path = LIGHT / f"light_{name}.onnx"
        model = compile_model(path, options)  # warm: the planner's compiled search loads once
        seconds = _best(args.repeat, lambda path=path: compile_model(path, options))
        base = _best(args.repeat, lambda path=path: _baseline(path))
        gear = model.gears[0]
        ratio = gear.feature_map_size / max(gear.feature_map_lower_bound, 1)
        table.add_row(
            name,
            f"{seconds:.2f}",
            f"{base:.2f}",
            f"{seconds / base:.1f}x",
            str(len(gear.tasks)),
            f"{gear.feature_map_size:,}",
            f"{gear.feature_map_unplanned:,}",
            f"{gear.feature_map_lower_bound:,}",
            f"{ratio:.4f}",
            f"{model.weight_size:,}",
        )
    Console(width=180).print(table)


if __name__ == "__main__":
    main()
