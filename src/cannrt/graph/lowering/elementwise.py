"""Elementwise ONNX ops onto the vector kernels: one launch per node, variadic Sum / Max / Min
as a chain of binary launches accumulating into the output."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cannrt.graph.lowering.context import FUSABLE, Lowering, rule
from cannrt.graph.lowering.cube import ACTIVATIONS, activation
from cannrt.graph.lowering.types import Value

UNARY = {
    "Relu": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Exp": "exp",
    "Log": "log",
    "Sqrt": "sqrt",
    "Neg": "neg",
    "Abs": "abs",
    "Reciprocal": "reciprocal",
    "Floor": "floor",
    "Ceil": "ceil",
    "Round": "round",
    "Sign": "sign",
    "Erf": "erf",
    "Sin": "sin",
    "Cos": "cos",
    "Softplus": "softplus",
    "Softsign": "softsign",
    "HardSwish": "hard_swish",
    "Mish": "mish",
    "Not": "not",
}
UNARY_PARAMS: dict[str, tuple[str, tuple[tuple[str, float], ...]]] = {
    "HardSigmoid": ("hard_sigmoid", (("alpha", 0.2), ("beta", 0.5))),
    "LeakyRelu": ("leaky_relu", (("alpha", 0.01),)),
    "Elu": ("elu", (("alpha", 1.0),)),
    "Celu": ("celu", (("alpha", 1.0),)),
    "Selu": ("selu", (("alpha", 1.67326319217681884765625), ("gamma", 1.05070102214813232421875))),
    "ThresholdedRelu": ("thresholded_relu", (("alpha", 1.0),)),
}
BINARY = {
    "Add": "add",
    "Sub": "sub",
    "Mul": "mul",
    "Div": "div",
    "Pow": "pow",
    "PRelu": "prelu",
    "Equal": "equal",
    "Less": "less",
    "LessOrEqual": "less_equal",
    "Greater": "greater",
    "GreaterOrEqual": "greater_equal",
    "And": "and",
    "Or": "or",
    "Xor": "xor",
}
VARIADIC = {"Sum": "add", "Max": "max", "Min": "min"}


@rule(*UNARY)
def unary(low: Lowering) -> None:
    low.emit(UNARY[low.node.op_type], [low.input(0), low.output()])


@rule(*UNARY_PARAMS)
def unary_with_params(low: Lowering) -> None:
    kernel, params = UNARY_PARAMS[low.node.op_type]
    low.emit(kernel, [low.input(0), low.output()], [float(low.attr(name, default)) for name, default in params])


@rule("Clip")
def clip(low: Lowering) -> None:
    x, y = low.input(0), low.output()
    if "min" in low.node.attrs or "max" in low.node.attrs:  # opset 6: attributes
        low.emit("clip", [x, y], [float(low.attr("min", -math.inf)), float(low.attr("max", math.inf))])
        return
    bounds = [(i, low.node.inputs[i]) for i in (1, 2) if low.has(i)]
    if all(name in low.constants for _, name in bounds):  # opset 11+: folded inputs, one launch
        lo, hi = low.optional_constant(1, "Clip min"), low.optional_constant(2, "Clip max")
        low.emit("clip", [x, y], [-math.inf if lo is None else float(lo.reshape(-1)[0]),
                                  math.inf if hi is None else float(hi.reshape(-1)[0])])  # fmt: skip
        return
    source = x  # bounds known only at run time: max with the lower, then min with the upper, in y
    for index, name in bounds:
        if name in low.constants:
            bound = float(np.asarray(low.constants[name]).reshape(-1)[0])
            low.emit("clip", [source, y], [bound, math.inf] if index == 1 else [-math.inf, bound])
        else:
            low.emit("max" if index == 1 else "min", [source, low.value(name), y])
        source = y


FUSABLE["Add"] = FUSABLE["Sum"] = ACTIVATIONS


@rule(*BINARY)
def binary(low: Lowering) -> None:
    tensors = [low.input(0), low.input(1), low.output()]
    fused = low.attr("activation")
    if fused is None:
        low.emit(BINARY[low.node.op_type], tensors)
    elif low.node.op_type == "Add" and tensors[2].dtype.kind == "f":
        low.emit("add_act", tensors, list(activation(low)))
    else:  # an integer Add (or another op) with an activation attached: two launches, in place
        low.emit(BINARY[low.node.op_type], tensors)
        _activate_in_place(low, tensors[2], fused)


def _activate_in_place(low: Lowering, y: Value, fused: tuple[str, Any]) -> None:
    """The fused activation as a launch of its own over y."""
    op_type, attrs = fused
    kernel, params = UNARY.get(op_type), UNARY_PARAMS.get(op_type)
    if kernel is not None:
        low.emit(kernel, [y, y])
    elif params is not None:
        low.emit(params[0], [y, y], [float(dict(attrs).get(n, d)) for n, d in params[1]])
    elif op_type == "Clip":
        low.emit("clip", [y, y], [float(dict(attrs).get("min", -math.inf)), float(dict(attrs).get("max", math.inf))])
    else:
        raise low.fail(f"activation {op_type} cannot follow {low.node.op_type}")


@rule("Mod")
def mod(low: Lowering) -> None:
    low.emit("mod", [low.input(0), low.input(1), low.output()], [int(low.attr("fmod", 0))])


@rule("BitShift")
def bitshift(low: Lowering) -> None:
    right = low.attr("direction", "RIGHT") == "RIGHT"
    low.emit("bitshift", [low.input(0), low.input(1), low.output()], [int(right)])


@rule("Where")
def where(low: Lowering) -> None:
    low.emit("where", [low.input(0), low.input(1), low.input(2), low.output()])


@rule(*VARIADIC)
def variadic(low: Lowering) -> None:
    inputs = [low.value(name) for name in low.node.inputs if name]
    y = low.output()
    if not inputs:
        raise low.fail("needs at least one input")
    fused = low.attr("activation")  # a Sum's (resnet's residual Sum -> Relu): the last add applies it
    if len(inputs) == 1:
        low.emit("expand", [inputs[0], y])
        if fused is not None:
            _activate_in_place(low, y, fused)
        return
    kernel = VARIADIC[low.node.op_type]
    pairs = [(inputs[0], inputs[1]), *((y, extra) for extra in inputs[2:])]
    for index, (a, b) in enumerate(pairs):
        if fused is not None and index == len(pairs) - 1 and y.dtype.kind == "f":
            low.emit("add_act", [a, b, y], list(activation(low)))
        else:
            low.emit(kernel, [a, b, y])
    if fused is not None and y.dtype.kind != "f":
        _activate_in_place(low, y, fused)
