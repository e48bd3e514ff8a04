"""A float64 bench dump: every dumped op re-run in numpy from the NPU's own inputs.

Comparing a dump against its reference isolates each op: inputs match by construction, so an op
whose outputs fail is where precision or logic goes wrong (overflow, a faulty kernel).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cannrt.dtypes import NUMPY_TO_ACL
from cannrt.kernels.registry import get_kernel
from cannrt.tools.dump import DumpedOp, load_dump_dir, tensor_stats, write_archive

FLOATS = {np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)}
KEEP_OUTPUT_DTYPE = {"cast", "nn.cast"}  # ops whose output dtype is the point of the op


def _widen(array: np.ndarray) -> np.ndarray:
    if array.dtype in FLOATS or array.dtype.kind == "V" or "bfloat16" in str(array.dtype):
        return array.astype(np.float64)
    return array.copy()


def reference_outputs(op: DumpedOp) -> list[np.ndarray] | None:
    """The op's outputs recomputed in float64 from its dumped inputs (None if it cannot be)."""
    try:
        kernel = get_kernel(op.kernel)
    except KeyError:
        return None
    by_index: dict[int, np.ndarray] = {}
    for tensor in op.tensors:
        if tensor.array is None:
            return None
        if tensor.role == "input":
            by_index[tensor.index] = _widen(tensor.array)
        else:
            dtype = tensor.dtype if op.kernel in KEEP_OUTPUT_DTYPE else _widen(np.zeros(0, tensor.dtype)).dtype
            by_index[tensor.index] = np.zeros(tensor.shape, dtype)
    args: dict[int, object] = {**by_index, **dict(op.scalars)}
    kernel.compute(*(args[i] for i in sorted(args)))
    return [by_index[t.index] for t in op.tensors if t.role == "output"]


def write_reference_dump(npu_dir: str | Path, bench_dir: str | Path) -> list[Path]:
    """Write a bench dump with the same file names as npu_dir; returns the files written."""
    written = []
    for op in load_dump_dir(npu_dir):
        outputs = reference_outputs(op)
        if outputs is None:
            continue
        arrays: dict[str, np.ndarray] = {}
        tensors = []
        output_iter = iter(outputs)
        for tensor in op.tensors:
            array = tensor.array if tensor.role == "input" else next(output_iter)
            assert array is not None
            arrays[f"{tensor.role}_{tensor.index}"] = np.ascontiguousarray(array).view(np.uint8).ravel()
            tensors.append({
                "role": tensor.role, "index": tensor.index, "dtype": NUMPY_TO_ACL[array.dtype], "format": "ND",
                "shape": list(array.shape), "address": 0, "readable": True, "stats": tensor_stats(array),
            })  # fmt: skip
        meta = {
            "op_type": op.op_type, "kernel": op.kernel, "op_name": op.op_name, "occurrence": op.occurrence,
            "task_id": op.task_id, "stream_id": op.stream_id, "timestamp_us": op.timestamp_us, "status": 0,
            "exception": False, "tensors": tensors, "scalars": [list(pair) for pair in op.scalars],
        }  # fmt: skip
        target = Path(bench_dir) / op.path.relative_to(Path(npu_dir))
        target.parent.mkdir(parents=True, exist_ok=True)
        write_archive(target, meta, arrays)
        written.append(target)
    return written
