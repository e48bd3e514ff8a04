"""Dump files: a kernel's inputs and outputs written from device dump records, and read back.

Names follow CANN: `{dump_path}/{device}/{opType}.{opName}.{n}.{taskId}.{streamId}.{timestamp}`
(timestamp: the op's modelled end in microseconds; op types capitalised as CANN writes them,
`Relu`, `MatMul`). Each file is a numpy .npz archive without a suffix: `meta` (JSON: op, tensors
with role, dtype, format, shape, device address, stats) and one raw-byte array per dumped tensor
(`input_0`, `output_2`, ...), so any dtype (bf16 too) round trips. Each device folder also gets
a `dump.json` manifest (manifest.py) listing every op and tensor with the file that holds it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cannrt.abi import DumpRecord, DumpTensor
from cannrt.dtypes import NPY_WIDENED, numpy_dtype
from cannrt.tools.manifest import TENSOR_DIR, UNSAFE, Manifest, manifest_key

# CANN's op types of the built-in kernels (aclnn / TBE names); others are capitalised
OP_TYPES = {
    "add": "Add", "mul": "Mul", "div": "RealDiv", "relu": "Relu", "gelu": "Gelu", "softmax": "SoftmaxV2",
    "matmul": "MatMul", "cast": "Cast", "spin": "Spin", "nop": "Nop",
}  # fmt: skip


def op_type_of(kernel_name: str) -> str:
    """The op type CANN writes for a kernel: `Relu` for relu, `MatMul` for matmul; names that
    already carry capitals are kept; snake_case becomes CamelCase."""
    known = OP_TYPES.get(kernel_name)
    if known is not None:
        return known
    if kernel_name != kernel_name.lower():
        return kernel_name
    return "".join(part[:1].upper() + part[1:] for part in kernel_name.split("_") if part) or kernel_name


_SHARED: dict[Path, DumpWriter] = {}


def shared_writer(root: Path) -> DumpWriter:
    """One writer per folder for the exception dumps of every context (occurrences count once)."""
    writer = _SHARED.get(root)
    if writer is None:
        writer = _SHARED[root] = DumpWriter(root)
    return writer


def exception_dump_root() -> Path | None:
    """Where exception dumps go outside a dump session: `$ASCEND_WORK_PATH/extra-info/data-dump`
    (the current directory without ASCEND_WORK_PATH), as CANN writes them; None when
    CANNRT_EXCEPTION_DUMP=0."""
    if os.environ.get("CANNRT_EXCEPTION_DUMP", "1") == "0":
        return None
    return Path(os.environ.get("ASCEND_WORK_PATH") or ".") / "extra-info" / "data-dump"


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
    kernel: str = ""  # the kernel binary's registered name (the op type is CANN's spelling)

    @property
    def key(self) -> tuple[str, int]:
        """How ops of two dumps are matched: name and occurrence."""
        return (self.op_name, self.occurrence)

    def role(self, role: str) -> list[DumpedTensor]:
        """The inputs or the outputs."""
        return [t for t in self.tensors if t.role == role]


def tensor_stats(array: np.ndarray) -> dict[str, float]:
    """max, min, mean and L2 norm (in float64), as msprobe reports them."""
    values = array.ravel()
    if values.size == 0:
        return {"max": 0.0, "min": 0.0, "mean": 0.0, "l2norm": 0.0}
    if values.dtype not in (np.float32, np.float64):  # fp16, bf16, integers: reduce in float64
        values = values.astype(np.float64)
    with np.errstate(all="ignore"):  # inf and nan give inf and nan statistics
        squares = float(np.einsum("i,i->", values, values, dtype=np.float64))  # no BLAS: its fp64 dot is slow here
        return {
            "max": float(values.max()),
            "min": float(values.min()),
            "mean": float(np.mean(values, dtype=np.float64)),
            "l2norm": math.sqrt(squares) if squares >= 0 else math.nan,
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
        self._occurrences: dict[tuple[int, str], int] = {}  # (device, op name) -> next occurrence
        self.written: list[Path] = []
        self.manifests: dict[Path, Manifest] = {}  # device folder -> its dump.json

    def write(self, record: DumpRecord, op_name: str) -> Path:
        """Write one record; returns the file's path."""
        folder = self.path / str(record.device_id)
        folder.mkdir(parents=True, exist_ok=True)
        manifest = self.manifests.get(folder)
        if manifest is None:  # a folder written before (another run) keeps its ops
            manifest = self.manifests[folder] = Manifest(folder, self.stats_only)
        counted = (record.device_id, op_name)
        occurrence = self._occurrences.get(counted)
        if occurrence is None:  # the first of this op in this run: count what the folder holds
            occurrence = manifest.occurrences(op_name)
        self._occurrences[counted] = occurrence + 1
        op_type = op_type_of(record.kernel_name)
        name = dump_file_name(op_type, op_name, occurrence, record.task_id, record.stream_id, record.end_ns // 1000)
        key = manifest_key(op_type, UNSAFE.sub("_", op_name), occurrence)
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
                    entry["data_file"] = f"{key}.{tensor.role}.{tensor.index}.npy"
                    save_tensor(folder / TENSOR_DIR / entry["data_file"], array)
            tensors.append(entry)
        meta = {
            "op_type": op_type, "kernel": record.kernel_name, "op_name": op_name, "occurrence": occurrence,
            "task_id": record.task_id, "stream_id": record.stream_id, "timestamp_us": record.end_ns // 1000,
            "status": record.status, "exception": record.exception, "tensors": tensors,
            "scalars": [list(pair) for pair in record.scalars],
        }  # fmt: skip
        target = folder / name
        write_archive(target, meta, {})
        self.written.append(target)
        manifest.add(name, meta)
        return target

    def write_manifests(self) -> list[Path]:
        """Write (or rewrite) the dump.json of every device folder written to."""
        return [manifest.write() for manifest in self.manifests.values()]


def write_archive(target: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """One dump file: the JSON meta and the raw tensors in an .npz archive without suffix."""
    with target.open("wb") as handle:
        np.savez(handle, meta=np.array(json.dumps(meta)), **arrays)  # type: ignore[arg-type]


def save_tensor(target: Path, array: np.ndarray) -> None:
    """One tensor as a .npy file (bfloat16, float8, float4, int4, int2..., which .npy cannot name,
    widened exactly to float32, int8 or uint8: NPY_WIDENED)."""
    target.parent.mkdir(exist_ok=True)
    widened = NPY_WIDENED.get(array.dtype)
    np.save(target, array if widened is None else array.astype(widened))


def _load_tensor(folder: Path, entry: dict[str, Any], archive: Any) -> np.ndarray | None:
    """A dumped tensor's array: raw bytes inside the archive, or its .npy file."""
    dtype = numpy_dtype(entry["dtype"])
    key = f"{entry['role']}_{entry['index']}"
    if key in archive.files:
        loaded: np.ndarray = archive[key].view(dtype).reshape(entry["shape"])
        return loaded
    if entry.get("data_file"):
        stored: np.ndarray = np.load(folder / TENSOR_DIR / entry["data_file"], allow_pickle=False)
        return stored.astype(dtype, copy=False).reshape(entry["shape"])
    return None


def load_dump(path: str | Path) -> DumpedOp:
    """Read one dump file."""
    with np.load(Path(path), allow_pickle=False) as archive:
        meta = json.loads(str(archive["meta"]))
        tensors = []
        for entry in meta["tensors"]:
            dtype = numpy_dtype(entry["dtype"])
            array = _load_tensor(Path(path).parent, entry, archive)
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
        [(int(i), v) for i, v in meta.get("scalars", [])], meta.get("kernel", meta["op_type"]),
    )  # fmt: skip


def load_dump_dir(path: str | Path) -> list[DumpedOp]:
    """Every dump file under path (all devices), in execution order."""
    files = [p for p in Path(path).rglob("*") if p.is_file() and p.name.count(".") >= 5 and p.parent.name != TENSOR_DIR]
    ops = [load_dump(p) for p in files]
    return sorted(ops, key=lambda op: (op.timestamp_us, op.path.parent.name, op.stream_id, op.task_id))
