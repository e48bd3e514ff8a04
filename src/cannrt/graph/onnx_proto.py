"""Reading ONNX protobufs: attributes decoded to Python values, tensor types to numpy dtypes and shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper


def decode_attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """A node's attributes as Python values: bytes -> str, TensorProto -> numpy, lists -> tuples."""
    attrs: dict[str, Any] = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        attrs[attr.name] = _decode(value)
    return attrs


def _decode(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


def np_dtype(elem_type: int) -> np.dtype:
    """The numpy dtype of an ONNX element type; ValueError for one numpy has no dtype for."""
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"ONNX element type {elem_type} has no numpy dtype") from None


def onnx_elem_type(dtype: np.dtype) -> int:
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def type_of(info: onnx.ValueInfoProto) -> tuple[int, tuple[int | str | None, ...] | None]:
    """(element type, dims) of a value: a dim is an int, a symbolic name or None; dims None if unranked."""
    if not info.type.HasField("tensor_type"):
        return 0, None
    tensor = info.type.tensor_type
    if not tensor.HasField("shape"):
        return tensor.elem_type, None
    dims: list[int | str | None] = []
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param"):
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return tensor.elem_type, tuple(dims)


def static_shape(dims: tuple[int | str | None, ...] | None) -> tuple[int, ...] | None:
    """dims if every one is a known non-negative int, else None."""
    if dims is None or not all(isinstance(d, int) and d >= 0 for d in dims):
        return None
    return tuple(int(d) for d in dims if isinstance(d, int))


def opset_of(model: onnx.ModelProto) -> int:
    """The default-domain opset the model imports (1 if it names none, as ONNX reads it)."""
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return 1
