"""What a lowering rule sees of its node (inputs, attributes, compile-time constants) and how it
emits kernel steps: block_dim from the kernel's own tiling units, arguments checked by the kernel
at compile time so a bad node fails here, not on the device."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from cannrt.abi import TensorArg
from cannrt.abi.params import MAX_PARAM_BYTES, pack_params
from cannrt.abi.sqe import DescriptorError
from cannrt.dtypes import acl_code
from cannrt.graph.lowering.types import KernelStep, Lowered, LoweringError, Node, Value
from cannrt.kernels import KernelArgumentError, get_kernel
from cannrt.kernels.nn import PREFIX


class Lowering:
    """One node being lowered."""

    def __init__(self, node: Node, values: Mapping[str, Value], constants: Mapping[str, np.ndarray], cores: int):
        self.node = node
        self.values = values
        self.constants = constants
        self.cores = max(1, cores)
        self.steps: list[KernelStep] = []
        self.scratch: list[Value] = []
        self.made: list[tuple[Value, np.ndarray]] = []

    def fail(self, reason: str) -> LoweringError:
        """The error to raise: names the node and its op type."""
        return LoweringError(self.node.name, self.node.op_type, reason)

    def attr(self, name: str, default: Any = None) -> Any:
        """An attribute, or default when absent."""
        return self.node.attrs.get(name, default)

    def has(self, index: int) -> bool:
        """Whether optional input `index` is given."""
        return index < len(self.node.inputs) and self.node.inputs[index] != ""

    def value(self, name: str) -> Value:
        """A value by name; LoweringError if shape inference left it out."""
        try:
            return self.values[name]
        except KeyError:
            raise self.fail(f"no shape and dtype for value {name!r}") from None

    def input(self, index: int) -> Value:
        """Input `index` (required)."""
        if not self.has(index):
            raise self.fail(f"input {index} is missing")
        return self.value(self.node.inputs[index])

    def output(self, index: int = 0) -> Value:
        """Output `index`."""
        if index >= len(self.node.outputs) or not self.node.outputs[index]:
            raise self.fail(f"output {index} is missing")
        return self.value(self.node.outputs[index])

    def outputs(self) -> list[Value]:
        """The outputs that are present."""
        return [self.value(name) for name in self.node.outputs if name]

    def constant(self, index: int, what: str) -> np.ndarray:
        """A compile-time constant input; LoweringError if it is not constant."""
        if not self.has(index):
            raise self.fail(f"{what} (input {index}) is missing")
        name = self.node.inputs[index]
        if name not in self.constants:
            raise self.fail(f"{what} (input {name!r}) must be a compile-time constant")
        return np.asarray(self.constants[name])

    def optional_constant(self, index: int, what: str) -> np.ndarray | None:
        """A constant optional input, None when absent (or given as an empty tensor)."""
        if not self.has(index):
            return None
        value = self.constant(index, what)
        return None if value.size == 0 else value

    def new_scratch(self, suffix: str, shape: tuple[int, ...], dtype: np.dtype) -> Value:
        """A temporary the steps of this node use."""
        value = Value(f"{self.node.name or self.node.outputs[0]}::{suffix}", tuple(shape), np.dtype(dtype))
        self.scratch.append(value)
        return value

    def new_constant(self, suffix: str, array: np.ndarray) -> Value:
        """A weight the steps of this node read, made from its constants (a kernel's own format
        of them, as ge converts weights offline); it goes into the weight section."""
        value = Value(f"{self.node.name or self.node.outputs[0]}::{suffix}", tuple(array.shape), array.dtype)
        self.made.append((value, array))
        return value

    def spec(self, value: Value) -> TensorArg:
        """The kernel argument a value becomes (address 0: ge places it later)."""
        try:
            code = acl_code(value.dtype)
        except ValueError:
            raise self.fail(f"value {value.name!r} has dtype {value.dtype}, which the NPU has no type for") from None
        return TensorArg(0, code, tuple(int(d) for d in value.shape))

    def emit(self, kernel: str, tensors: Sequence[Value], scalars: Sequence[int | float] = ()) -> None:
        """Add a launch of PREFIX + kernel; checks the arguments and picks block_dim."""
        name = PREFIX + kernel
        binary = get_kernel(name)
        specs: list[TensorArg | int | float] = [self.spec(t) for t in tensors]
        specs.extend(int(s) if isinstance(s, bool | np.integer) else s for s in scalars)
        try:
            binary.check(specs)
            units = binary.work(specs).units
            pack_params(specs)
        except KernelArgumentError as exc:
            raise self.fail(str(exc)) from None
        except DescriptorError as exc:
            raise self.fail(f"{exc} (at most {MAX_PARAM_BYTES} bytes of arguments per launch)") from None
        block_dim = max(1, min(self.cores, units))
        args = (*(t.name for t in tensors), *specs[len(tensors) :])
        self.steps.append(KernelStep(name, block_dim, args))  # type: ignore[arg-type]

    def lowered(self) -> Lowered:
        """The steps emitted so far."""
        return Lowered(tuple(self.steps), tuple(self.scratch), tuple(self.made))


Rule = Callable[[Lowering], None]
RULES: dict[str, Rule] = {}
FUSABLE: dict[str, frozenset[str]] = {}


def rule(*op_types: str) -> Callable[[Rule], Rule]:
    """Register a lowering rule for ONNX op types."""

    def add(function: Rule) -> Rule:
        for op_type in op_types:
            RULES[op_type] = function
        return function

    return add


def normalize_axis(low: Lowering, axis: int, rank: int) -> int:
    """axis in [0, rank); LoweringError when out of range."""
    if not -rank <= axis < max(rank, 1):
        raise low.fail(f"axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0
