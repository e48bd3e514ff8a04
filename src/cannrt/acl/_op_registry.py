"""Single operators by atc name (Add, Mul, Relu, Gelu, SoftmaxV2, MatMul/MatMulV2, Cast) planned onto
the kernel registry: an operator becomes one or more kernel launches over its inputs and outputs.

Planning validates descriptions and attributes once (create_handle); binding puts buffer
addresses into the plan for each execution.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cannrt.acl import constants as c
from cannrt.acl._buffers import TensorDesc
from cannrt.acl._state import fail
from cannrt.dtypes import PLAIN_FORMATS
from cannrt.errors import ErrorCode
from cannrt.kernels import KernelArgumentError, get_kernel
from cannrt.runtime.core import tensor_arg

FLOAT_TYPES = (c.ACL_FLOAT, c.ACL_FLOAT16, c.ACL_BF16, c.ACL_DOUBLE)
MATMUL_TYPES = (c.ACL_FLOAT, c.ACL_FLOAT16, c.ACL_BF16, c.ACL_INT8)


@dataclass(frozen=True)
class Ref:
    """A kernel tensor argument taken from an operator input or output."""

    output: bool
    index: int


@dataclass(frozen=True)
class Step:
    """One kernel launch of a planned operator."""

    kernel: str
    args: tuple[Ref | int | float, ...]


@dataclass(frozen=True)
class Plan:
    """A validated operator: descriptions, attributes and its kernel launches."""

    op_type: str
    inputs: tuple[TensorDesc, ...]
    outputs: tuple[TensorDesc, ...]
    steps: tuple[Step, ...]

    def bind(self, in_addrs: Sequence[int], out_addrs: Sequence[int]) -> list[tuple[str, list[Any]]]:
        """Kernel name and arguments of each step for these buffer addresses."""
        launches: list[tuple[str, list[Any]]] = []
        for step in self.steps:
            args: list[Any] = []
            for arg in step.args:
                if isinstance(arg, Ref):
                    desc = (self.outputs if arg.output else self.inputs)[arg.index]
                    address = (out_addrs if arg.output else in_addrs)[arg.index]
                    args.append(tensor_arg(address, desc.dtype, desc.shape))
                else:
                    args.append(arg)
            launches.append((step.kernel, args))
        return launches


Planner = Callable[[list[TensorDesc], list[TensorDesc], dict[str, Any]], list[Step]]
IN0, IN1, IN2, OUT0 = Ref(False, 0), Ref(False, 1), Ref(False, 2), Ref(True, 0)


def _same_dtype(op: str, descs: list[TensorDesc]) -> None:
    if len({d.dtype for d in descs}) > 1:
        raise fail(c.ACL_ERROR_OP_INPUT_NOT_MATCH, f"{op}: inputs and output must share one data type")


def _elementwise(kernel: str, floats_only: bool = False) -> Planner:
    def plan(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> list[Step]:
        _same_dtype(kernel, ins + outs)
        if floats_only and outs[0].dtype not in FLOAT_TYPES:
            raise fail(c.ACL_ERROR_UNSUPPORTED_DATA_TYPE, f"{kernel} needs a floating-point type")
        refs = (IN0, IN1, OUT0) if len(ins) == 2 else (IN0, OUT0)
        return [Step(kernel, refs)]

    return plan


def _softmax(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> list[Step]:
    _same_dtype("SoftmaxV2", ins + outs)
    if outs[0].dtype not in FLOAT_TYPES:
        raise fail(c.ACL_ERROR_UNSUPPORTED_DATA_TYPE, "SoftmaxV2 needs a floating-point type")
    axes = attrs.get("axes", [-1])
    if not isinstance(axes, list) or len(axes) != 1 or not isinstance(axes[0], int):
        raise fail(c.ACL_ERROR_OP_ATTR_NOT_MATCH, f"SoftmaxV2: attribute axes must be a list of one int, got {axes!r}")
    return [Step("softmax", (IN0, OUT0, axes[0]))]


def _matmul(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> list[Step]:
    for name in ("transpose_x1", "transpose_x2", "adj_x1", "adj_x2"):
        if attrs.get(name):
            raise fail(ErrorCode.FEATURE_UNSUPPORTED, f"MatMul with {name}=true is not supported (no transpose kernel)")
    if len(ins) > 3:
        raise fail(ErrorCode.FEATURE_UNSUPPORTED, "MatMulV2 offset_w (4th input) is not supported")
    if ins[0].dtype not in MATMUL_TYPES:
        raise fail(c.ACL_ERROR_UNSUPPORTED_DATA_TYPE, "MatMul takes float32, float16, bfloat16 or int8")
    steps = [Step("matmul", (IN0, IN1, OUT0))]
    if len(ins) == 3:
        if ins[2].dtype != outs[0].dtype:
            raise fail(c.ACL_ERROR_OP_INPUT_NOT_MATCH, "MatMul: bias must have the output's data type")
        steps.append(Step("add", (OUT0, IN2, OUT0)))
    return steps


def _cast(ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> list[Step]:
    dst = attrs.get("dst_type", outs[0].dtype)
    if dst != outs[0].dtype:
        raise fail(c.ACL_ERROR_OP_ATTR_NOT_MATCH, f"Cast: dst_type {dst} differs from the output type {outs[0].dtype}")
    return [Step("cast", (IN0, OUT0))]


@dataclass(frozen=True)
class OpSpec:
    """An operator type: how many inputs and outputs, and its planner."""

    inputs: tuple[int, int]  # min, max
    outputs: int
    plan: Planner


OPS: dict[str, OpSpec] = {
    "Add": OpSpec((2, 2), 1, _elementwise("add")),
    "Mul": OpSpec((2, 2), 1, _elementwise("mul")),
    "Relu": OpSpec((1, 1), 1, _elementwise("relu")),
    "Gelu": OpSpec((1, 1), 1, _elementwise("gelu", floats_only=True)),
    "SoftmaxV2": OpSpec((1, 1), 1, _softmax),
    "MatMul": OpSpec((2, 3), 1, _matmul),
    "MatMulV2": OpSpec((2, 4), 1, _matmul),
    "Cast": OpSpec((1, 1), 1, _cast),
}


def _check_counts(op_type: str, spec: OpSpec, ins: list[TensorDesc], outs: list[TensorDesc]) -> None:
    low, high = spec.inputs
    if not low <= len(ins) <= high:
        raise fail(c.ACL_ERROR_OP_INPUT_NOT_MATCH, f"{op_type} takes {low}..{high} inputs, got {len(ins)}")
    if len(outs) != spec.outputs:
        raise fail(c.ACL_ERROR_OP_OUTPUT_NOT_MATCH, f"{op_type} has {spec.outputs} output(s), got {len(outs)}")
    for desc in ins + outs:
        if desc.format not in PLAIN_FORMATS.values():  # kernels take these layouts as they are
            raise fail(c.ACL_ERROR_FORMAT_NOT_MATCH, f"{op_type}: format {desc.format} needs a format conversion")


def _check_kernels(op_type: str, plan: Plan) -> None:
    fake_in = [0x1000] * len(plan.inputs)
    fake_out = [0x1000] * len(plan.outputs)
    for kernel_name, args in plan.bind(fake_in, fake_out):
        try:
            get_kernel(kernel_name).check(args)
        except KernelArgumentError as exc:
            raise fail(c.ACL_ERROR_OP_INPUT_NOT_MATCH, f"{op_type}: {exc}") from None


def plan_op(op_type: str, ins: list[TensorDesc], outs: list[TensorDesc], attrs: dict[str, Any]) -> Plan:
    """Validate an operator call and plan its kernel launches (raises CannError with an op code)."""
    spec = OPS.get(op_type)
    if spec is None:
        raise fail(c.ACL_ERROR_OP_NOT_FOUND, f"operator type {op_type!r} is not supported; known: {', '.join(OPS)}")
    _check_counts(op_type, spec, ins, outs)
    plan = Plan(op_type, tuple(ins), tuple(outs), tuple(spec.plan(ins, outs, attrs)))
    _check_kernels(op_type, plan)
    return plan
