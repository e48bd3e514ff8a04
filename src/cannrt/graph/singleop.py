"""atc --singleop: one single-operator offline model per entry of an ops.json, named as atc names them.

An entry is {"op", "input_desc": [{"format", "shape", "type"}], "output_desc": [...], "attr": [{"name",
"type", "value"}], optional "name"}. Each becomes a one-node ONNX graph compiled as it is given
(must_keep_origin_dtype); the model's graph keeps the normalised entry under "singleop", which is
what acl.op.set_model_dir matches an execute against. File name, unless the entry names it:
`{index}_{op}`, then per input and then per output `_{dtype code}_{format code}` and `_{dim}` per dim,
cut at 128 characters, plus ".om" (e.g. 0_Add_3_2_8_16_3_2_8_16_3_2_8_16.om).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper

from cannrt.dtypes import CANONICAL_TYPE_NAMES, PLAIN_FORMATS, TYPE_NAMES, acl_code, numpy_dtype
from cannrt.graph.compiler import CompileOptions, compile_model
from cannrt.graph.errors import GraphError
from cannrt.graph.onnx_proto import onnx_elem_type
from cannrt.om import OfflineModel

NAME_LIMIT = 128
OPSET = 18
TYPES: dict[str, np.dtype] = {name: numpy_dtype(code) for name, code in TYPE_NAMES.items()}
"""ops.json type names (one table with acl.op.set_model_dir's reader: cannrt.dtypes.TYPE_NAMES)."""
# CANN operator names whose ONNX op type is spelled differently
CANN_TO_ONNX = {"MatMulV2": "MatMul", "RealDiv": "Div", "Maximum": "Max", "Minimum": "Min", "SoftmaxV2": "Softmax"}


def load_ops(path: str | Path) -> list[dict[str, Any]]:
    """The entries of an ops.json; GraphError for a file that is not a list of operator entries."""
    try:
        entries = json.loads(Path(path).read_text())
    except OSError as exc:
        raise GraphError(f"--singleop {path}: cannot read it ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GraphError(f"--singleop {path}: not JSON ({exc})") from None
    if isinstance(entries, dict):
        entries = [entries]
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise GraphError(f"--singleop {path}: expected a list of operator entries")
    return entries


def _desc(entry: Mapping[str, Any], key: str, where: str) -> list[tuple[tuple[int, ...], np.dtype, str]]:
    descs = entry.get(key, [])
    if not isinstance(descs, list):
        raise GraphError(f"{where}: {key} must be a list")
    result = []
    for i, desc in enumerate(descs):
        if not isinstance(desc, dict):
            raise GraphError(f"{where}: {key}[{i}] must be an object")
        kind = str(desc.get("type", "")).lower()
        if kind not in TYPES:
            raise GraphError(f"{where}: {key}[{i}] type {desc.get('type')!r} (expected one of {', '.join(TYPES)})")
        fmt = str(desc.get("format", "ND")).upper()
        if fmt not in PLAIN_FORMATS:
            expected = ", ".join(PLAIN_FORMATS)
            raise GraphError(
                f"{where}: {key}[{i}] format {desc.get('format')!r} (expected {expected}: no format conversion)"
            )
        shape = desc.get("shape")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise GraphError(f"{where}: {key}[{i}] shape {shape!r} must be a list of dims >= 0")
        result.append((tuple(shape), TYPES[kind], fmt))
    return result


def _type_name(dtype: np.dtype) -> str:
    return CANONICAL_TYPE_NAMES[acl_code(dtype)]


def _attr(item: Any, where: str) -> tuple[str, Any]:
    if not isinstance(item, dict) or "name" not in item or "value" not in item:
        raise GraphError(f"{where}: an attr must be {{name, type, value}}, got {item!r}")
    name, kind, value = str(item["name"]), str(item.get("type", "")), item["value"]
    if kind in ("bool", "list_bool"):
        value = [int(bool(v)) for v in value] if kind == "list_bool" else int(bool(value))
    elif kind == "data_type":
        if str(value).lower() not in TYPES:
            raise GraphError(f"{where}: attr {name} data_type {value!r} (expected one of {', '.join(TYPES)})")
        value = onnx_elem_type(TYPES[str(value).lower()])
    return name, value


def _infos(names: Sequence[str], descs: Sequence[tuple[tuple[int, ...], np.dtype, str]]) -> list[onnx.ValueInfoProto]:
    return [helper.make_tensor_value_info(n, onnx_elem_type(t), s) for n, (s, t, _) in zip(names, descs, strict=True)]


def file_name(index: int, entry: Mapping[str, Any], descs: Sequence[tuple[tuple[int, ...], np.dtype, str]]) -> str:
    """atc's name for the model of entry `index` (its own "name" when given)."""
    if entry.get("name"):
        return f"{entry['name']}.om"
    parts = [f"{index}_{entry['op']}"]
    for shape, dtype, fmt in descs:
        parts.append(f"_{acl_code(dtype)}_{PLAIN_FORMATS[fmt]}" + "".join(f"_{d}" for d in shape))
    return "".join(parts)[:NAME_LIMIT] + ".om"


def build(entry: Mapping[str, Any], index: int, soc_version: str) -> tuple[str, OfflineModel]:
    """(file name, model) of one entry."""
    where = f"--singleop entry {index}"
    op = entry.get("op")
    if not isinstance(op, str) or not op:
        raise GraphError(f'{where}: no "op"')
    inputs, outputs = _desc(entry, "input_desc", where), _desc(entry, "output_desc", where)
    if not outputs:
        raise GraphError(f"{where} ({op}): output_desc is empty")
    attrs = dict(_attr(item, where) for item in entry.get("attr", []) or [])
    op_type = CANN_TO_ONNX.get(op, op)
    if not check_onnx_op(op_type):
        raise GraphError(f"{where}: op {op!r} is no operator this compiler knows")
    if op_type == "Cast" and "dst_type" in attrs:
        attrs["to"] = onnx_elem_type(numpy_dtype(int(attrs.pop("dst_type"))))
    in_names = [f"x{i}" for i in range(len(inputs))]
    out_names = [f"y{i}" for i in range(len(outputs))]
    try:
        node = helper.make_node(op_type, in_names, out_names, name=f"{index}_{op}", **attrs)
        graph = helper.make_graph(
            [node],
            f"{index}_{op}",
            [
                helper.make_tensor_value_info(n, onnx_elem_type(t), s)
                for n, (s, t, _) in zip(in_names, inputs, strict=True)
            ],
            [
                helper.make_tensor_value_info(n, onnx_elem_type(t), s)
                for n, (s, t, _) in zip(out_names, outputs, strict=True)
            ],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    except (ValueError, TypeError) as exc:
        raise GraphError(f"{where} ({op}): {exc}") from None
    options = CompileOptions(soc_version=soc_version, precision_mode="must_keep_origin_dtype", name=f"{index}_{op}")
    try:
        compiled = compile_model(model, options)
    except GraphError as exc:
        raise GraphError(f"{where} ({op}): {exc}") from None
    for k, ((shape, dtype, _), io) in enumerate(zip(outputs, compiled.outputs, strict=True)):
        if io.shape != shape or io.dtype != acl_code(dtype):
            raise GraphError(
                f"{where} ({op}): output {k} is {list(io.shape)} {numpy_dtype(io.dtype)},"
                f" output_desc says {list(shape)} {dtype}"
            )
    normalised = {
        "op": op,
        "input_desc": [{"format": f, "shape": list(s), "type": _type_name(t)} for s, t, f in inputs],
        "output_desc": [{"format": f, "shape": list(s), "type": _type_name(t)} for s, t, f in outputs],
        "attr": [dict(item) for item in entry.get("attr", []) or []],
    }
    graph_json = {**compiled.graph, "singleop": normalised}
    model_out = OfflineModel(
        compiled.name,
        compiled.soc_version,
        compiled.inputs,
        compiled.outputs,
        compiled.weights,
        compiled.num_streams,
        compiled.num_events,
        compiled.gears,
        graph_json,
    )
    return file_name(index, entry, [*inputs, *outputs]), model_out


def compile_ops(path: str | Path, soc_version: str) -> list[tuple[str, OfflineModel]]:
    """Every entry of ops.json compiled: (file name, model) in entry order."""
    return [build(entry, i, soc_version) for i, entry in enumerate(load_ops(path))]


def check_onnx_op(op_type: str) -> bool:
    """Whether onnx knows op_type in the default domain (for error messages)."""
    try:
        onnx.defs.get_schema(op_type, OPSET)
    except onnx.defs.SchemaError:
        return False
    return True
