"""Accuracy compare of two dumps, as msprobe does it, the first divergent op, and the first op
that produced NaN or Inf.

Relative error = |npu - bench| / |bench| (epsilon where bench is 0); the ratios count elements
with relative error < 0.001 and < 0.005. Verdict "No" if (Cosine < 0.99 and MaxAbsErr > 0.001)
or Cosine < 0.9 or MaxAbsErr > 1. NaN/Inf on the NPU side is flagged.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cannrt.tools.dump import DumpedOp, DumpedTensor, load_dump_dir

EPSILON = 1e-10
COLUMNS = (
    "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
    "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio", "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min",
    "Bench mean", "Bench l2norm", "Accuracy Reached or Not", "Err_message",
)  # fmt: skip


@dataclass
class CompareRow:
    """One tensor of one op compared."""

    op: DumpedOp
    npu: DumpedTensor
    bench: DumpedTensor | None
    metrics: dict[str, float]
    reached: bool
    message: str

    def cells(self) -> list[object]:
        """The row in COLUMNS order."""
        npu, bench, m = self.npu, self.bench, self.metrics
        name = f"{self.op.op_name}.{self.op.occurrence}.{npu.label}"
        nstats, bstats = npu.stats, bench.stats if bench else {}
        return [
            name, name if bench else "N/A", str(npu.dtype), str(bench.dtype) if bench else "N/A",
            list(npu.shape), list(bench.shape) if bench else "N/A",
            m.get("cosine", math.nan), m.get("euc", math.nan), m.get("max_abs", math.nan),
            m.get("max_rel", math.nan), m.get("one_thousandth", math.nan), m.get("five_thousandths", math.nan),
            nstats.get("max"), nstats.get("min"), nstats.get("mean"), nstats.get("l2norm"),
            bstats.get("max"), bstats.get("min"), bstats.get("mean"), bstats.get("l2norm"),
            "Yes" if self.reached else "No", self.message,
        ]  # fmt: skip


def tensor_metrics(npu: np.ndarray, bench: np.ndarray) -> dict[str, float]:
    """Cosine, Euclidean distance, max absolute / relative error and the error ratios."""
    with np.errstate(all="ignore"):
        return _metrics(npu.astype(np.float64).ravel(), bench.astype(np.float64).ravel())


def _metrics(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    diff = np.abs(a - b)
    norms = float(np.linalg.norm(a)) * float(np.linalg.norm(b))
    both_zero = not a.any() and not b.any()
    cosine = float(np.dot(a, b) / norms) if norms else (1.0 if both_zero else 0.0)
    relative = diff / np.where(b == 0, EPSILON, np.abs(b))
    size = max(1, a.size)
    return {
        "cosine": cosine,
        "euc": float(np.linalg.norm(diff)),
        "max_abs": float(diff.max()) if a.size else 0.0,
        "max_rel": float(relative.max()) if a.size else 0.0,
        "one_thousandth": float(np.count_nonzero(relative < 0.001)) / size,
        "five_thousandths": float(np.count_nonzero(relative < 0.005)) / size,
    }


def accuracy_reached(metrics: dict[str, float]) -> bool:
    """msprobe's verdict on one tensor."""
    cosine, max_abs = metrics["cosine"], metrics["max_abs"]
    if math.isnan(cosine) or math.isnan(max_abs):
        return False
    return not ((cosine < 0.99 and max_abs > 0.001) or cosine < 0.9 or max_abs > 1)


def compare_tensor(op: DumpedOp, npu: DumpedTensor, bench: DumpedTensor | None) -> CompareRow:
    """Compare one NPU tensor against its bench counterpart."""
    if bench is None:
        return CompareRow(op, npu, None, {}, False, "no bench tensor")
    if npu.array is None or bench.array is None:
        return CompareRow(op, npu, bench, {}, False, "tensor data not dumped (stats only or unreadable)")
    if npu.array.shape != bench.array.shape:
        return CompareRow(op, npu, bench, {}, False, f"shape mismatch {npu.array.shape} vs {bench.array.shape}")
    metrics = tensor_metrics(npu.array, bench.array)
    message = "" if np.all(np.isfinite(npu.array.astype(np.float64))) else "NPU has NaN/Inf"
    return CompareRow(op, npu, bench, metrics, accuracy_reached(metrics) and not message, message)


def compare_ops(npu_ops: list[DumpedOp], bench_ops: list[DumpedOp]) -> list[CompareRow]:
    """Rows for every tensor of every NPU op, matched to the bench by op name and occurrence."""
    bench_by_key = {op.key: op for op in bench_ops}
    rows = []
    for op in npu_ops:
        bench_op = bench_by_key.get(op.key)
        for tensor in op.tensors:
            match = None
            if bench_op is not None:
                match = next((t for t in bench_op.tensors if t.label == tensor.label), None)
            rows.append(compare_tensor(op, tensor, match))
    return rows


def compare_dirs(npu_dir: str | Path, bench_dir: str | Path) -> list[CompareRow]:
    """Compare two dump folders."""
    return compare_ops(load_dump_dir(npu_dir), load_dump_dir(bench_dir))


def first_divergent(rows: list[CompareRow]) -> DumpedOp | None:
    """The earliest op (in execution order) whose inputs pass and whose outputs fail."""
    by_op: dict[int, tuple[DumpedOp, list[CompareRow]]] = {}  # insertion order = execution order
    for row in rows:
        by_op.setdefault(id(row.op), (row.op, []))[1].append(row)
    for op, op_rows in by_op.values():
        inputs_pass = all(r.reached for r in op_rows if r.npu.role == "input")
        outputs_fail = any(not r.reached for r in op_rows if r.npu.role == "output")
        if inputs_pass and outputs_fail:
            return op
    return None


def _finite(tensor: DumpedTensor) -> bool:
    """False if the tensor holds NaN or Inf (read from its data, or its statistics)."""
    if tensor.array is not None:
        return bool(np.all(np.isfinite(tensor.array.astype(np.float64))))
    return all(math.isfinite(v) for v in tensor.stats.values())


def first_nan_inf(ops: list[DumpedOp]) -> DumpedOp | None:
    """The earliest op (in execution order) that produced NaN or Inf: an output holds one while
    every input is finite (ops that only pass one along are not blamed)."""
    for op in ops:
        if all(_finite(t) for t in op.role("input")) and not all(_finite(t) for t in op.role("output")):
            return op
    return None


def write_csv(rows: list[CompareRow], path: str | Path) -> Path:
    """The compare result as msprobe's CSV."""
    target = Path(path)
    with target.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow(row.cells())
    return target
