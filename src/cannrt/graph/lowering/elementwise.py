"""Elementwise ONNX ops onto the vector kernels: one launch per node, variadic Sum / Max / Min
as a chain of binary launches accumulating into the output."""

from __future__ import annotations

import math

from cannrt.graph.lowering.context import Lowering, rule

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
    if "min" in low.node.attrs or "max" in low.node.attrs:  # opset 6: attributes
        lo, hi = float(low.attr("min", -math.inf)), float(low.attr("max", math.inf))
    else:  # opset 11+: optional constant inputs
        lo_in, hi_in = low.optional_constant(1, "Clip min"), low.optional_constant(2, "Clip max")
        lo = -math.inf if lo_in is None else float(lo_in.reshape(-1)[0])
        hi = math.inf if hi_in is None else float(hi_in.reshape(-1)[0])
    low.emit("clip", [low.input(0), low.output()], [lo, hi])


@rule(*BINARY)
def binary(low: Lowering) -> None:
    low.emit(BINARY[low.node.op_type], [low.input(0), low.input(1), low.output()])


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
    if len(inputs) == 1:
        low.emit("expand", [inputs[0], y])
        return
    kernel = VARIADIC[low.node.op_type]
    low.emit(kernel, [inputs[0], inputs[1], y])
    for extra in inputs[2:]:
        low.emit(kernel, [y, extra, y])
