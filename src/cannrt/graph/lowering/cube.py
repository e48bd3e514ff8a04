"""Conv, Gemm and MatMul onto the cube kernels, with a fused activation when ge put one in
attrs["activation"]; the window attributes of Conv and the pools (auto_pad settled here)."""

from __future__ import annotations

from typing import Any

import numpy as np

from cannrt.graph.lowering.context import FUSABLE, Lowering, rule
from cannrt.graph.lowering.types import Value
from cannrt.kernels.builtins import compute_dtype
from cannrt.kernels.nn import conv_plan
from cannrt.kernels.nn.common import (
    ACT_CLIP,
    ACT_HARD_SIGMOID,
    ACT_HARD_SWISH,
    ACT_LEAKY,
    ACT_NONE,
    ACT_RELU,
    ACT_SIGMOID,
    ACT_TANH,
)

ACTIVATIONS = frozenset({"Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Clip"})
for _op in ("Conv", "Gemm", "MatMul"):
    FUSABLE[_op] = ACTIVATIONS


def activation(low: Lowering) -> tuple[int, float, float]:
    """(code, alpha, beta) of the fused activation in attrs["activation"], or none."""
    fused = low.attr("activation")
    if fused is None:
        return ACT_NONE, 0.0, 0.0
    op_type, attrs = fused
    attrs = dict(attrs or {})
    if op_type == "Relu":
        return ACT_RELU, 0.0, 0.0
    if op_type == "LeakyRelu":
        return ACT_LEAKY, float(attrs.get("alpha", 0.01)), 0.0
    if op_type == "Sigmoid":
        return ACT_SIGMOID, 0.0, 0.0
    if op_type == "Tanh":
        return ACT_TANH, 0.0, 0.0
    if op_type == "HardSigmoid":
        return ACT_HARD_SIGMOID, float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))
    if op_type == "HardSwish":
        return ACT_HARD_SWISH, 0.0, 0.0
    if op_type == "Clip":  # min / max as attributes (ge folds opset-11 constant inputs into them)
        return ACT_CLIP, float(attrs.get("min", float("-inf"))), float(attrs.get("max", float("inf")))
    raise low.fail(f"activation {op_type} cannot be fused")


def window(low: Lowering, spatial: tuple[int, ...], kernel: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Window scalars (kernel, strides, dilations, pads begin, pads end) from the attributes."""
    nd = len(spatial)
    strides = tuple(low.attr("strides", None) or [1] * nd)
    dilations = tuple(low.attr("dilations", None) or [1] * nd)
    if len(strides) != nd or len(dilations) != nd or len(kernel) != nd:
        raise low.fail(f"strides {strides}, dilations {dilations}, kernel {kernel} for {nd} spatial axes")
    auto_pad = low.attr("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", ""):
        pads = list(low.attr("pads", None) or [0] * (2 * nd))
    elif auto_pad == "VALID":
        pads = [0] * (2 * nd)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for extent, s, k, d in zip(spatial, strides, kernel, dilations, strict=True):
            total = max(0, (-(-extent // s) - 1) * s + (k - 1) * d + 1 - extent)
            small = total // 2
            begins.append(small if auto_pad == "SAME_UPPER" else total - small)
            ends.append(total - begins[-1])
        pads = begins + ends
    else:
        raise low.fail(f"auto_pad {auto_pad!r}")
    if len(pads) != 2 * nd:
        raise low.fail(f"pads {pads} for {nd} spatial axes")
    if len(out) != nd:
        raise low.fail(f"output rank {len(out) + 2} for {nd} spatial axes")
    return [*kernel, *strides, *dilations, *pads]


@rule("Conv")
def conv(low: Lowering) -> None:
    x, w, y = low.input(0), low.input(1), low.output()
    group = int(low.attr("group", 1))
    kernel = tuple(low.attr("kernel_shape", None) or w.shape[2:])
    scalars: list[Any] = [group, 0, *window(low, x.shape[2:], kernel, y.shape[2:])]
    code, alpha, beta = activation(low)
    scalars[1] = code
    tensors = [x, w, low.input(2), y] if low.has(2) else [x, w, y]
    name = "conv_bias" if low.has(2) else "conv"
    nd = len(kernel)
    strides, dilations = tuple(scalars[2 + nd : 2 + 2 * nd]), tuple(scalars[2 + 2 * nd : 2 + 3 * nd])
    transformed = winograd_weights(low, group, kernel, strides, dilations)
    if transformed is not None:
        tensors.insert(2, transformed)
        name += "_winograd"
    low.emit(name, tensors, [*scalars, alpha, beta])


def winograd_weights(
    low: Lowering, group: int, kernel: tuple[int, ...], strides: tuple[int, ...], dilations: tuple[int, ...]
) -> Value | None:
    """The weights of a Conv transformed for the Winograd kernels, as a weight of the model, when
    they are constant and conv_plan takes Winograd with them for this window; else None."""
    if low.node.inputs[1] not in low.constants:
        return None
    w = low.constant(1, "weights")
    if not np.issubdtype(w.dtype, np.floating):
        return None
    if not conv_plan.winograd_window(group, kernel, strides, dilations, low.output().shape[2:]):
        return None
    if not conv_plan.winograd_ahead(w.shape[0], w.shape[1], compute_dtype(w).itemsize):
        return None
    from cannrt.kernels.nn.conv_winograd import transform_weights  # numba: only for such a Conv

    return low.new_constant("winograd_weights", transform_weights(w))


@rule("Gemm")
def gemm(low: Lowering) -> None:
    a, b, y = low.input(0), low.input(1), low.output()
    code, act_alpha, act_beta = activation(low)
    ints = [int(low.attr("transA", 0)), int(low.attr("transB", 0)), code]
    floats = [float(low.attr("alpha", 1.0)), float(low.attr("beta", 1.0)), act_alpha, act_beta]
    if low.has(2):
        low.emit("gemm_bias", [a, b, low.input(2), y], [*ints, *floats])
    else:
        low.emit("gemm", [a, b, y], [*ints, *floats])


@rule("MatMul")
def matmul(low: Lowering) -> None:
    code, alpha, beta = activation(low)
    low.emit("matmul", [low.input(0), low.input(1), low.output()], [code, alpha, beta])


@rule("MaxPool")
def maxpool(low: Lowering) -> None:
    x, y = low.input(0), low.output()
    scalars = window(low, x.shape[2:], tuple(low.attr("kernel_shape")), y.shape[2:])
    if len(low.node.outputs) > 1 and low.node.outputs[1]:
        order = int(low.attr("storage_order", 0))
        low.emit("maxpool_indices", [x, y, low.output(1)], [order, *scalars])
    else:
        low.emit("maxpool", [x, y], scalars)


@rule("AveragePool")
def avgpool(low: Lowering) -> None:
    x, y = low.input(0), low.output()
    scalars = window(low, x.shape[2:], tuple(low.attr("kernel_shape")), y.shape[2:])
    low.emit("avgpool", [x, y], [int(low.attr("count_include_pad", 0)), *scalars])


@rule("GlobalAveragePool")
def global_avgpool(low: Lowering) -> None:
    low.emit("global_avgpool", [low.input(0), low.output()])


@rule("GlobalMaxPool")
def global_maxpool(low: Lowering) -> None:
    low.emit("global_maxpool", [low.input(0), low.output()])
