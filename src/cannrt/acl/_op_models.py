"""Single-operator model directories (acl.op.set_model_dir).

`atc --singleop=ops.json --output=DIR` compiles a JSON list of operators into one .om model per
entry in DIR; set_model_dir reads every `*.om` there (the operator type, its input and output
descriptions and attributes). It also reads the JSON itself, from every `*.json` file in DIR,
so a directory holding only ops.json works without compiling. Each JSON entry: {"op": "Add",
"input_desc": [{"format": "ND", "shape": [8, 16], "type": "float16"}, ...], "output_desc": [...],
"attr": [{"name": "axes", "type": "list_int", "value": [-1]}]}. An unreadable .om gives its
model-load code (ACL_ERROR_DESERIALIZE_MODEL...). A shape dimension of -1 matches any size; the
shape [-2] matches any shape. Once a model directory is set, execute_v2 / create_handle only accept
calls matching a loaded entry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cannrt import dtypes
from cannrt.acl import constants as c
from cannrt.acl._buffers import TensorDesc
from cannrt.acl._op_registry import OPS
from cannrt.acl._state import fail
from cannrt.errors import ErrorCode
from cannrt.om.model import IoDesc, OfflineModel
from cannrt.runtime.model_file import read_model

# one table with the writer (graph/singleop.py): cannrt.dtypes names the types and formats


@dataclass(frozen=True)
class DescPattern:
    """A tensor description in a model: shape dims of -1 (or the shape [-2]) are wildcards."""

    dtype: int
    shape: tuple[int, ...]
    format: int

    def matches(self, desc: TensorDesc) -> bool:
        """True if desc fits this pattern."""
        if desc.dtype != self.dtype or desc.format != self.format:
            return False
        if self.shape == (-2,):
            return True
        return len(desc.shape) == len(self.shape) and all(
            p in (-1, d) for p, d in zip(self.shape, desc.shape, strict=True)
        )


@dataclass(frozen=True)
class OpModel:
    """One compiled single operator."""

    op_type: str
    inputs: tuple[DescPattern, ...]
    outputs: tuple[DescPattern, ...]
    attrs: tuple[tuple[str, Any], ...]

    def matches(self, op_type: str, ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> bool:
        """True if a call fits this model (attributes the call sets must equal the model's)."""
        if op_type != self.op_type or len(ins) != len(self.inputs) or len(outs) != len(self.outputs):
            return False
        if not all(p.matches(d) for p, d in zip(self.inputs + self.outputs, ins + outs, strict=True)):
            return False
        return all(name not in attrs or attrs[name] == value for name, value in self.attrs)


def _pattern(entry: Any, where: str) -> DescPattern:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: a tensor description must be an object")
    dtype = dtypes.TYPE_NAMES.get(str(entry.get("type", "")).lower())
    fmt = dtypes.FORMAT_CODES.get(str(entry.get("format", "ND")).upper())
    shape = entry.get("shape", [])
    if dtype is None or fmt is None or not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
        raise ValueError(f"{where}: bad type/format/shape in {entry}")
    return DescPattern(dtype, tuple(shape), fmt)


def _attr_value(entry: dict[str, Any]) -> Any:
    value = entry.get("value")
    if entry.get("type") == "data_type" and isinstance(value, str):
        return dtypes.TYPE_NAMES.get(value.lower(), value)
    return value


def _model(entry: Any, where: str) -> OpModel:
    if not isinstance(entry, dict) or not isinstance(entry.get("op"), str):
        raise ValueError(f"{where}: each operator needs an 'op' name")
    op_type = entry["op"]
    if op_type not in OPS:
        raise LookupError(f"{where}: operator {op_type!r} has no kernel in cannrt")
    inputs = tuple(_pattern(d, f"{where} input {i}") for i, d in enumerate(entry.get("input_desc", [])))
    outputs = tuple(_pattern(d, f"{where} output {i}") for i, d in enumerate(entry.get("output_desc", [])))
    attrs = tuple((str(a.get("name")), _attr_value(a)) for a in entry.get("attr", []) if isinstance(a, dict))
    return OpModel(op_type, inputs, outputs, attrs)


def _io_pattern(io: IoDesc) -> DescPattern:
    return DescPattern(io.dtype, tuple(io.shape), io.format)


def _om_model(model: OfflineModel, where: str) -> OpModel:
    """The operator a single-operator .om was compiled from: the ops.json entry atc recorded (read
    as the JSON files are), else the model's one node with the model's I/O descriptions."""
    graph = model.graph if isinstance(model.graph, dict) else {}
    entry = graph.get("singleop")
    if isinstance(entry, dict) and isinstance(entry.get("op"), str) and entry.get("input_desc"):
        return _model(entry, where)
    nodes = [n for n in graph.get("nodes", []) if isinstance(n, dict)]
    if isinstance(entry, dict) and isinstance(entry.get("op"), str):
        op_type = entry["op"]
        attrs = tuple((str(a.get("name")), _attr_value(a)) for a in entry.get("attr", []) if isinstance(a, dict))
    elif len(nodes) == 1 and isinstance(nodes[0].get("op_type"), str):
        op_type = nodes[0]["op_type"]
        raw = nodes[0].get("attrs", {})
        attrs = tuple(sorted(raw.items())) if isinstance(raw, dict) else ()
    else:
        raise ValueError(f"{where}: not a single-operator model ({len(nodes)} nodes)")
    if op_type not in OPS:
        raise LookupError(f"{where}: operator {op_type!r} has no kernel in cannrt")
    inputs = tuple(_io_pattern(io) for io in model.inputs)
    return OpModel(op_type, inputs, tuple(_io_pattern(io) for io in model.outputs), attrs)


def load_model_dir(path: str) -> list[OpModel]:
    """Every operator of the *.om and *.json files of a directory."""
    directory = Path(path)
    if not directory.is_dir():
        raise fail(ErrorCode.INVALID_PARAM, f"model directory {path!r} does not exist")
    models: list[OpModel] = []
    for file in sorted(directory.glob("*.om")):
        try:
            models.append(_om_model(read_model(file), file.name))
        except LookupError as exc:
            raise fail(c.ACL_ERROR_OP_LOAD_FAILED, str(exc)) from None
        except ValueError as exc:
            raise fail(c.ACL_ERROR_PARSE_FILE, f"{file}: {exc}") from None
    for file in sorted(directory.glob("*.json")):
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            entries = data if isinstance(data, list) else [data]
            models.extend(_model(e, f"{file.name}[{i}]") for i, e in enumerate(entries))
        except LookupError as exc:
            raise fail(c.ACL_ERROR_OP_LOAD_FAILED, str(exc)) from None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise fail(c.ACL_ERROR_PARSE_FILE, f"{file}: {exc}") from None
    return models
