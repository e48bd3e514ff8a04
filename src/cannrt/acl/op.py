"""acl.op: single-operator execution (aclopExecuteV2, aclopCreateHandle, aclopSetAttr*...).

Operators run as kernels of the kernel registry on the given stream (asynchronously, like on
an NPU): Add, Mul, Relu, Gelu, SoftmaxV2, MatMul, MatMulV2, Cast. See _op_models for the
model directory format read by set_model_dir.
"""

from __future__ import annotations

import threading
from typing import Any

from cannrt.acl import constants as c
from cannrt.acl._buffers import TensorDesc, buffer_of, desc_of
from cannrt.acl._handles import HandleTable, Kind
from cannrt.acl._op_models import OpModel, load_model_dir
from cannrt.acl._op_registry import OPS, Plan, plan_op
from cannrt.acl._state import (
    ArgTypeError,
    api,
    as_handle,
    as_int,
    as_list,
    as_str,
    fail,
    on_finalize,
    require,
    runtime,
    stream_of,
)
from cannrt.errors import ErrorCode
from cannrt.kernels import get_kernel

_attrs: HandleTable[dict[str, Any]] = HandleTable(Kind.OP_ATTR)
_handles: HandleTable[Plan] = HandleTable(Kind.OP_HANDLE)
_models: list[OpModel] = []
_models_set = threading.Event()


# -- attributes -------------------------------------------------------------------------------
def create_attr() -> int:
    """A new, empty operator attribute set (aclopCreateAttr)."""
    return _attrs.add({})


def destroy_attr(attr: int) -> None:
    """Destroy an attribute set (aclopDestroyAttr)."""
    _attrs.remove(as_handle("attr", attr))


def _attr_table(attr: object) -> dict[str, Any]:
    return require(_attrs, "attr", attr, "an attribute set from create_attr")


def _as_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgTypeError(f"{name} must be a float, not {type(value).__name__}")
    return float(value)


def _as_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool | int):
        raise ArgTypeError(f"{name} must be a bool, not {type(value).__name__}")
    return bool(value)


def _setter(convert: Any, doc: str) -> Any:
    @api()
    def set_attr(attr: int, attr_name: str, attr_value: Any) -> None:
        name = as_str("attr_name", attr_name)
        _attr_table(attr)[name] = convert(attr_value)

    set_attr.__doc__ = doc
    return set_attr


def _list_of(convert: Any) -> Any:
    def to_list(values: Any) -> list[Any]:
        if hasattr(values, "tolist") and not isinstance(values, list | tuple):
            values = values.tolist()  # a 1-D numpy array, as pyACL also accepts
        return [convert("attr_value", v) for v in as_list("attr_value", values)]

    return to_list


set_attr_int = _setter(lambda v: as_int("attr_value", v), "Set an int attribute (aclopSetAttrInt).")
set_attr_float = _setter(lambda v: _as_float("attr_value", v), "Set a float attribute (aclopSetAttrFloat).")
set_attr_bool = _setter(lambda v: _as_bool("attr_value", v), "Set a bool attribute (aclopSetAttrBool).")
set_attr_string = _setter(lambda v: as_str("attr_value", v), "Set a string attribute (aclopSetAttrString).")
set_attr_data_type = _setter(lambda v: as_int("attr_value", v), "Set a data-type attribute (aclopSetAttrDataType).")
set_attr_list_int = _setter(_list_of(as_int), "Set a list-of-int attribute (aclopSetAttrListInt).")
set_attr_list_float = _setter(_list_of(_as_float), "Set a list-of-float attribute (aclopSetAttrListFloat).")
set_attr_list_bool = _setter(_list_of(_as_bool), "Set a list-of-bool attribute (aclopSetAttrListBool).")
set_attr_list_string = _setter(_list_of(as_str), "Set a list-of-str attribute (aclopSetAttrListString).")
set_attr_list_data_type = _setter(_list_of(as_int), "Set a list of data types (aclopSetAttrListDataType).")
set_attr_list_list_int = _setter(
    lambda v: [_list_of(as_int)(inner) for inner in as_list("attr_value", v)],
    "Set a list-of-list-of-int attribute (aclopSetAttrListListInt).",
)


# -- models and planning ----------------------------------------------------------------------
@api()
def set_model_dir(model_dir: str) -> None:
    """Load the single-operator models of a directory (aclopSetModelDir); calls then must match one."""
    models = load_model_dir(as_str("model_dir", model_dir))
    _models.extend(models)
    _models_set.set()


def _descs(name: str, handles: object) -> list[TensorDesc]:
    return [desc_of(as_handle(f"{name}[{i}]", h)) for i, h in enumerate(as_list(name, handles))]


def _attributes(attr: object) -> dict[str, Any]:
    handle = as_handle("attr", attr)
    return {} if handle == 0 else dict(_attr_table(handle))


def _plan(op_type: object, input_desc: object, output_desc: object, attr: object) -> Plan:
    name = as_str("op_type", op_type)
    ins, outs, attrs = _descs("input_desc", input_desc), _descs("output_desc", output_desc), _attributes(attr)
    if _models_set.is_set() and name in OPS and not any(m.matches(name, ins, outs, attrs) for m in _models):
        raise fail(c.ACL_ERROR_OP_NOT_FOUND, f"no model in the model directory matches this {name} call")
    return plan_op(name, ins, outs, attrs)


def _addresses(name: str, buffers: object, descs: tuple[TensorDesc, ...], code: int) -> list[int]:
    handles = as_list(name, buffers)
    if len(handles) != len(descs):
        raise fail(code, f"{len(handles)} {name} for {len(descs)} tensor descriptions")
    addresses = []
    for index, (handle, desc) in enumerate(zip(handles, descs, strict=True)):
        buffer = buffer_of(handle)
        if buffer.size < desc.nbytes or (desc.nbytes and not buffer.address):
            raise fail(
                ErrorCode.INVALID_PARAM,
                f"{name}[{index}] holds {buffer.size} bytes at 0x{buffer.address:x}; the tensor needs {desc.nbytes}",
            )
        addresses.append(buffer.address)
    return addresses


def _launch(plan: Plan, inputs: object, outputs: object, stream: object) -> None:
    in_addrs = _addresses("inputs", inputs, plan.inputs, c.ACL_ERROR_OP_INPUT_NOT_MATCH)
    out_addrs = _addresses("outputs", outputs, plan.outputs, c.ACL_ERROR_OP_OUTPUT_NOT_MATCH)
    target = stream_of(as_handle("stream", stream), submit=True)
    rt = runtime()
    cores = rt.settings.chip.aicore_count
    for kernel_name, args in plan.bind(in_addrs, out_addrs):
        units = get_kernel(kernel_name).work(args).units
        rt.launch(target, kernel_name, max(1, min(units, cores)), args)


# -- execution --------------------------------------------------------------------------------
@api()
def execute_v2(
    op_type: str,
    input_desc: list[int],
    inputs: list[int],
    output_desc: list[int],
    outputs: list[int],
    attr: int,
    stream: int,
) -> None:
    """Run an operator on stream, asynchronously (aclopExecuteV2)."""
    _launch(_plan(op_type, input_desc, output_desc, attr), inputs, outputs, stream)


execute = execute_v2  # aclopExecute (the older name takes the same arguments in pyACL)


@api(0)
def create_handle(op_type: str, input_desc: list[int], output_desc: list[int], op_attr: int) -> int:
    """(handle, ret): an operator validated once for repeated execute_with_handle (aclopCreateHandle)."""
    plan = _plan(op_type, input_desc, output_desc, op_attr)
    runtime()
    return _handles.add(plan)


@api()
def execute_with_handle(handle: int, inputs: list[int], outputs: list[int], stream: int) -> None:
    """Run an operator from create_handle on stream, asynchronously (aclopExecWithHandle)."""
    as_handle("handle", handle)
    runtime()
    plan = require(_handles, "handle", handle, "an operator handle from create_handle")
    _launch(plan, inputs, outputs, stream)


def destroy_handle(handle: int) -> None:
    """Destroy an operator handle (aclopDestroyHandle)."""
    _handles.remove(as_handle("handle", handle))


@on_finalize
def _forget_all() -> None:
    """Drop attribute sets, operator handles and loaded models."""
    _attrs.clear()
    _handles.clear()
    _models.clear()
    _models_set.clear()


__all__ = [
    "create_attr",
    "create_handle",
    "destroy_attr",
    "destroy_handle",
    "execute",
    "execute_v2",
    "execute_with_handle",
    "set_attr_bool",
    "set_attr_data_type",
    "set_attr_float",
    "set_attr_int",
    "set_attr_list_bool",
    "set_attr_list_data_type",
    "set_attr_list_float",
    "set_attr_list_int",
    "set_attr_list_list_int",
    "set_attr_list_string",
    "set_attr_string",
    "set_model_dir",
]
