"""dump.json: the manifest of one dump folder, in mindstudio-probe's dump.json shape.

Top level `task`, `level`, `framework`, `dump_data_dir` and `data`: one entry per op, keyed
`{opType}.{opName}.{n}`, with its `input_args` and `output` tensors (dtype, shape, Max, Min, Mean,
Norm as msprobe's statistics compare reads them) and what CANN's dump records add: op type and
name, stream and task ids, modelled end time, status, device address of each tensor, and the file
(and array inside it) that holds each tensor's bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cannrt.dtypes import numpy_dtype

MANIFEST = "dump.json"
MSPROBE_DTYPES = {
    "float16": "Float16", "float32": "Float32", "float64": "Float64", "bfloat16": "BFloat16", "int8": "Int8",
    "int16": "Int16", "int32": "Int32", "int64": "Int64", "uint8": "UInt8", "bool": "Bool",
}  # fmt: skip


def _tensor_entry(file: str, tensor: dict[str, Any], stats_only: bool) -> dict[str, Any]:
    dtype = numpy_dtype(tensor["dtype"]).name
    stats = tensor.get("stats", {})
    entry: dict[str, Any] = {
        "type": "numpy.ndarray",
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
    if tensor.get("readable", True) and not stats_only:
        entry["data_name"] = f"{file}:{tensor['role']}_{tensor['index']}"
    return entry


class Manifest:
    """The dump.json of one device folder, rewritten as ops are added."""

    def __init__(self, folder: Path, stats_only: bool = False) -> None:
        self.folder = folder
        self.stats_only = stats_only
        self.data: dict[str, dict[str, Any]] = {}

    def add(self, file: str, meta: dict[str, Any]) -> None:
        """An op written to `file` with the meta its archive holds."""
        key = f"{meta['op_type']}.{meta['op_name']}.{meta['occurrence']}"
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
            "input_args": [_tensor_entry(file, t, self.stats_only) for t in tensors if t["role"] == "input"],
            "output": [_tensor_entry(file, t, self.stats_only) for t in tensors if t["role"] == "output"],
        }

    def write(self) -> Path:
        """Write dump.json into the folder; returns its path."""
        document = {
            "task": "statistics" if self.stats_only else "tensor",
            "level": "L1",
            "framework": "cannrt",
            "dump_data_dir": str(self.folder),
            "data": self.data,
        }
        target = self.folder / MANIFEST
        target.write_text(json.dumps(document, indent=1))
        return target


def load_manifest(folder: str | Path) -> dict[str, Any]:
    """The dump.json of a device folder."""
    loaded: dict[str, Any] = json.loads((Path(folder) / MANIFEST).read_text())
    return loaded
