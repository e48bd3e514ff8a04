"""dump.json: the manifest of one dump folder, in mindstudio-probe's MindSpore dump layout.

Top level `task`, `level`, `framework` ("mindspore": the layout msprobe compares with .npy
tensors), `dump_data_dir` (the `dump_tensor_data` folder beside it) and `data`: one entry per
op, keyed `{opType}.{opName}.{n}.forward`, with its `input_args` and `output` tensors (type,
dtype, shape, Max, Min, Mean, Norm and data_name, the .npy file in dump_tensor_data) and what
CANN's dump records add: op type and name, stream and task ids, modelled end time, status, the
device address of each tensor, and the CANN-named file of the op.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from cannrt.dtypes import numpy_dtype

UNSAFE = re.compile(r"[^A-Za-z0-9_\-]")

MANIFEST = "dump.json"
TENSOR_DIR = "dump_tensor_data"


def manifest_key(op_type: str, op_name: str, occurrence: int) -> str:
    """An op's key in dump.json (msprobe's `{type}.{name}.{n}.forward` form)."""
    return f"{op_type}.{op_name}.{occurrence}.forward"


MSPROBE_DTYPES = {
    "float16": "Float16", "float32": "Float32", "float64": "Float64", "bfloat16": "BFloat16", "int8": "Int8",
    "int16": "Int16", "int32": "Int32", "int64": "Int64", "uint8": "UInt8", "bool": "Bool",
}  # fmt: skip


def _tensor_entry(tensor: dict[str, Any]) -> dict[str, Any]:
    dtype = numpy_dtype(tensor["dtype"]).name
    stats = tensor.get("stats", {})
    entry: dict[str, Any] = {
        "type": "mindspore.Tensor",
        "dtype": MSPROBE_DTYPES.get(dtype, dtype),
        "shape": tensor["shape"],
        "Max": stats.get("max"),
        "Min": stats.get("min"),
        "Mean": stats.get("mean"),
        "Norm": stats.get("l2norm"),
        "address": f"0x{tensor['address']:x}",
        "format": tensor.get("format", "ND"),
        "readable": tensor.get("readable", True),
    }
    if tensor.get("data_file"):
        entry["data_name"] = tensor["data_file"]
    return entry


class Manifest:
    """The dump.json of one device folder, rewritten as ops are added."""

    def __init__(self, folder: Path, stats_only: bool = False) -> None:
        self.folder = folder
        self.stats_only = stats_only
        self.data: dict[str, dict[str, Any]] = {}
        self.data = self._on_disk()  # ops an earlier writer left in this folder stay listed

    def _on_disk(self) -> dict[str, dict[str, Any]]:
        existing = self.folder / MANIFEST
        try:
            return dict(json.loads(existing.read_text()).get("data", {})) if existing.is_file() else {}
        except (ValueError, AttributeError):
            return {}

    def occurrences(self, op_name: str) -> int:
        """How many ops of this name the folder lists already (the next occurrence number)."""
        safe = UNSAFE.sub("_", op_name)
        return sum(1 for entry in self.data.values() if UNSAFE.sub("_", str(entry.get("op_name"))) == safe)

    def add(self, file: str, meta: dict[str, Any]) -> None:
        """An op written to `file` with the meta its archive holds."""
        key = manifest_key(meta["op_type"], UNSAFE.sub("_", meta["op_name"]), meta["occurrence"])
        tensors = meta["tensors"]
        self.data[key] = {
            "op_type": meta["op_type"],
            "op_name": meta["op_name"],
            "stream_id": meta["stream_id"],
            "task_id": meta["task_id"],
            "timestamp_us": meta["timestamp_us"],
            "status": meta["status"],
            "exception": meta["exception"],
            "file": file,
            "input_args": [_tensor_entry(t) for t in tensors if t["role"] == "input"],
            "input_kwargs": {},
            "output": [_tensor_entry(t) for t in tensors if t["role"] == "output"],
        }

    def write(self) -> Path:
        """Write dump.json into the folder (merged with what another writer put there since)."""
        self.data = {**self._on_disk(), **self.data}
        document = {
            "task": "statistics" if self.stats_only else "tensor",
            "level": "L1",
            "framework": "mindspore",  # the layout msprobe compares with .npy tensors
            "producer": "cannrt",
            "dump_data_dir": str((self.folder / TENSOR_DIR).absolute()) if not self.stats_only else None,
            "data": self.data,
        }
        target = self.folder / MANIFEST
        target.write_text(json.dumps(document, indent=1))
        return target


def load_manifest(folder: str | Path) -> dict[str, Any]:
    """The dump.json of a device folder."""
    loaded: dict[str, Any] = json.loads((Path(folder) / MANIFEST).read_text())
    return loaded
