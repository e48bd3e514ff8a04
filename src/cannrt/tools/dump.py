"""Dump files: a kernel's inputs and outputs written from device dump records, and read back.

Names follow CANN: `{dump_path}/{device}/{opType}.{opName}.{n}.{taskId}.{streamId}.{timestamp}`
(timestamp: the op's modelled end in microseconds). Each file is a numpy .npz archive without
a suffix: `meta` (JSON: op, tensors with role, dtype, format, shape, device address, stats) and one
raw-byte array per dumped tensor (`input_0`, `output_2`, ...), so any dtype (bf16 too) round trips.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cannrt.abi import DumpRecord, DumpTensor
from cannrt.dtypes import numpy_dtype

UNSAFE = re.compile(r"[^A-Za-z0-9_\-]")


@dataclass
class DumpedTensor:
    """A tensor read back from a dump file (array None in stats-only dumps or unreadable)."""

    role: str
    index: int
    dtype: np.dtype
    shape: tuple[int, ...]
    address: int
    array: np.ndarray | None
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """e.g. `input.0` or `output.2`."""
        return f"{self.role}.{self.index}"


@dataclass
class DumpedOp:
    """One dump file: the op, where and when it ran, and its tensors."""

    path: Path
    op_type: str
    op_name: str
    occurrence: int
    task_id: int
    stream_id: int
    timestamp_us: int
    status: int
    exception: bool
    tensors: list[DumpedTensor]
    scalars: list[tuple[int, int | float]] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, int]:
        """How ops of two dumps are matched: name and occurrence."""
        return (self.op_name, self.occurrence)

    def role(self, role: str) -> list[DumpedTensor]:
        """The inputs or the outputs."""
        return [t for t in self.tensors if t.role == role]


def tensor_stats(array: np.ndarray) -> dict[str, float]:
    """max, min, mean and L2 norm (in float64), as msprobe reports them."""
    values = array.astype(np.float64).ravel()
    if values.size == 0:
        return {"max": 0.0, "min": 0.0, "mean": 0.0, "l2norm": 0.0}
    return {
        "max": float(values.max()),
        "min": float(values.min()),
        "mean": float(values.mean()),
        "l2norm": float(np.linalg.norm(values)),
    }


def _as_array(tensor: DumpTensor) -> np.ndarray | None:
    if tensor.data is None:
        return None
    return np.frombuffer(tensor.data, dtype=numpy_dtype(tensor.dtype)).reshape(tensor.shape)


def dump_file_name(op_type: str, op_name: str, occurrence: int, task_id: int, stream_id: int, timestamp_us: int) -> str:
    """The CANN dump file name (unsafe characters of op names become `_`)."""
    return f"{UNSAFE.sub('_', op_type)}.{UNSAFE.sub('_', op_name)}.{occurrence}.{task_id}.{stream_id}.{timestamp_us}"


class DumpWriter:
    """Writes dump records under a dump path, counting occurrences of each op name."""

    def __init__(self, path: str | Path, stats_only: bool = False) -> None:
        self.path = Path(path)
        self.stats_only = stats_only
        self._occurrences: dict[str, int] = {}
        self.written: list[Path] = []

    def write(self, record: DumpRecord, op_name: str) -> Path:
        """Write one record; returns the file's path."""
        occurrence = self._occurrences.get(op_name, 0)
        self._occurrences[op_name] = occurrence + 1
        folder = self.path / str(record.device_id)
        folder.mkdir(parents=True, exist_ok=True)
        name = dump_file_name(
            record.kernel_name, op_name, occurrence, record.task_id, record.stream_id, record.end_ns // 1000
        )
        arrays: dict[str, np.ndarray] = {}
        tensors = []
        for tensor in record.tensors:
            array = _as_array(tensor)
            entry: dict[str, Any] = {
                "role": tensor.role, "index": tensor.index, "dtype": tensor.dtype, "format": "ND",
                "shape": list(tensor.shape), "address": tensor.address, "readable": array is not None,
            }  # fmt: skip
            if array is not None:
                entry["stats"] = tensor_stats(array)
                if not self.stats_only:
                    arrays[f"{tensor.role}_{tensor.index}"] = np.frombuffer(tensor.data or b"", dtype=np.uint8)
            tensors.append(entry)
        meta = {
            "op_type": record.kernel_name, "op_name": op_name, "occurrence": occurrence,
            "task_id": record.task_id, "stream_id": record.stream_id, "timestamp_us": record.end_ns // 1000,
            "status": record.status, "exception": record.exception, "tensors": tensors,
            "scalars": [list(pair) for pair in record.scalars],
        }  # fmt: skip
        target = folder / name
        write_archive(target, meta, arrays)
        self.written.append(target)
        return target


def write_archive(target: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """One dump file: the JSON meta and the raw tensors in an .npz archive without suffix."""
    with target.open("wb") as handle:
        np.savez(handle, meta=np.array(json.dumps(meta)), **arrays)  # type: ignore[arg-type]


def load_dump(path: str | Path) -> DumpedOp:
    """Read one dump file."""
    with np.load(Path(path), allow_pickle=False) as archive:
        meta = json.loads(str(archive["meta"]))
        tensors = []
        for entry in meta["tensors"]:
            dtype = numpy_dtype(entry["dtype"])
            key = f"{entry['role']}_{entry['index']}"
            array = archive[key].view(dtype).reshape(entry["shape"]) if key in archive.files else None
            tensors.append(
                DumpedTensor(
                    entry["role"],
                    entry["index"],
                    dtype,
                    tuple(entry["shape"]),
                    entry["address"],
                    array,
                    entry.get("stats", {}),
                )
            )
    return DumpedOp(
        Path(path), meta["op_type"], meta["op_name"], meta["occurrence"], meta["task_id"], meta["stream_id"],
        meta["timestamp_us"], meta["status"], meta["exception"], tensors,
        [(int(i), v) for i, v in meta.get("scalars", [])],
    )  # fmt: skip


def load_dump_dir(path: str | Path) -> list[DumpedOp]:
    """Every dump file under path (all devices), in execution order."""
    files = [p for p in Path(path).rglob("*") if p.is_file() and p.name.count(".") >= 5]
    ops = [load_dump(p) for p in files]
    return sorted(ops, key=lambda op: (op.timestamp_us, op.path.parent.name, op.stream_id, op.task_id))
