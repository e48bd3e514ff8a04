"""Shape and data-movement ops: data-free ones become a copy (ge may alias them away), Concat one
slab copy per input, Split one slice per output, the rest their own movement kernel."""

from __future__ import annotations

import math

import numpy as np

from cannrt.graph.lowering.context import Lowering, normalize_axis, rule
from cannrt.kernels.casting import round_mode_code
from cannrt.kernels.nn.movement import PAD_CONSTANT, PAD_EDGE, PAD_REFLECT, PAD_WRAP

PAD_MODES = {"constant": PAD_CONSTANT, "reflect": PAD_REFLECT, "edge": PAD_EDGE, "wrap": PAD_WRAP}


def _check_count(low: Lowering) -> None:
    x, y = low.input(0), low.output()
    if math.prod(x.shape) != math.prod(y.shape):
        raise low.fail(f"input {x.shape} and output {y.shape} hold different element counts")


@rule("Reshape")
def reshape(low: Lowering) -> None:
    shape = low.constant(1, "Reshape shape")
    if shape.ndim != 1:
        raise low.fail(f"shape must be 1-D, got {shape.shape}")
    _check_count(low)
    low.emit("copy", [low.input(0), low.output()])


@rule("Squeeze", "Unsqueeze")
def squeeze(low: Lowering) -> None:
    if low.has(1):
        low.constant(1, f"{low.node.op_type} axes")
    _check_count(low)
    low.emit("copy", [low.input(0), low.output()])


@rule("Flatten", "Identity")
def flatten(low: Lowering) -> None:
    _check_count(low)
    low.emit("copy", [low.input(0), low.output()])


@rule("Dropout")
def dropout(low: Lowering) -> None:
    training = low.has(2) and bool(low.constant(2, "training_mode").reshape(-1)[0])
    ratio = low.optional_constant(1, "Dropout ratio") if low.has(1) else None
    if training and (ratio is None or float(ratio.reshape(-1)[0]) != 0.0):
        raise low.fail("training mode with a non-zero ratio draws a random mask: not supported")
    low.emit("copy", [low.input(0), low.output()])
    if len(low.node.outputs) > 1 and low.node.outputs[1]:
        low.emit("fill", [low.output(1)], [1.0])


@rule("Transpose")
def transpose(low: Lowering) -> None:
    x = low.input(0)
    perm = low.attr("perm")
    perm = list(range(len(x.shape)))[::-1] if perm is None else [normalize_axis(low, p, len(x.shape)) for p in perm]
    low.emit("transpose", [x, low.output()], perm)


@rule("Concat")
def concat(low: Lowering) -> None:
    y = low.output()
    axis = normalize_axis(low, int(low.attr("axis", 0)), len(y.shape))
    offset = 0
    for name in low.node.inputs:
        if not name:
            continue
        x = low.value(name)
        if len(x.shape) == len(y.shape) and x.shape[axis] and math.prod(x.shape):
            low.emit("concat_into", [x, y], [axis, offset])
        offset += x.shape[axis] if len(x.shape) == len(y.shape) else 0
    if offset != y.shape[axis]:
        raise low.fail(f"inputs add up to {offset} along axis {axis}, the output has {y.shape[axis]}")


def slice_scalars(
    shape: tuple[int, ...], starts: list[int], ends: list[int], axes: list[int], steps: list[int]
) -> tuple[list[int], tuple[int, ...]]:
    """Per axis (start, step) of ONNX Slice after clamping, and the output shape."""
    scalars = [0, 1] * len(shape)
    out = list(shape)
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        extent = shape[axis]
        start, end = (start + extent if start < 0 else start), (end + extent if end < 0 else end)
        if step > 0:
            start, end = min(max(start, 0), extent), min(max(end, 0), extent)
        else:
            start, end = min(max(start, 0), extent - 1), min(max(end, -1), extent - 1)
        out[axis] = max(0, -(-(end - start) // step))
        scalars[2 * axis : 2 * axis + 2] = [start if out[axis] else 0, step]
    return scalars, tuple(out)


@rule("Slice")
def slice_(low: Lowering) -> None:
    x, y = low.input(0), low.output()
    rank = len(x.shape)
    if "starts" in low.node.attrs:  # opset < 10
        starts, ends = list(low.attr("starts")), list(low.attr("ends"))
        axes, steps = list(low.attr("axes", range(len(starts)))), [1] * len(starts)
    else:
        starts = [int(v) for v in low.constant(1, "Slice starts").reshape(-1)]
        ends = [int(v) for v in low.constant(2, "Slice ends").reshape(-1)]
        given_axes, given_steps = low.optional_constant(3, "Slice axes"), low.optional_constant(4, "Slice steps")
        axes = list(range(len(starts))) if given_axes is None else [int(v) for v in given_axes.reshape(-1)]
        steps = [1] * len(starts) if given_steps is None else [int(v) for v in given_steps.reshape(-1)]
    if not len(starts) == len(ends) == len(axes) == len(steps) or 0 in steps:
        raise low.fail(f"starts {starts}, ends {ends}, axes {axes}, steps {steps}")
    axes = [normalize_axis(low, a, rank) for a in axes]
    clip = [max(-(2**62), min(2**62, v)) for v in (*starts, *ends)]
    scalars, shape = slice_scalars(x.shape, clip[: len(starts)], clip[len(starts) :], axes, steps)
    if shape != y.shape:
        raise low.fail(f"slice gives {shape}, the output value has {y.shape}")
    low.emit("slice", [x, y], scalars)


@rule("Split")
def split(low: Lowering) -> None:
    x = low.input(0)
    axis = normalize_axis(low, int(low.attr("axis", 0)), len(x.shape))
    outputs = low.outputs()
    sizes = [y.shape[axis] for y in outputs]
    given = low.optional_constant(1, "Split split") if low.has(1) else low.attr("split")
    if given is not None and [int(v) for v in np.asarray(given).reshape(-1)] != sizes:
        raise low.fail(f"split {list(np.asarray(given).reshape(-1))} but the outputs hold {sizes}")
    if sum(sizes) != x.shape[axis]:
        raise low.fail(f"outputs hold {sum(sizes)} of {x.shape[axis]} along axis {axis}")
    offset = 0
    for y, size in zip(outputs, sizes, strict=True):
        scalars = [0, 1] * len(x.shape)
        scalars[2 * axis] = offset if size else 0
        low.emit("slice", [x, y], scalars)
        offset += size


@rule("Gather")
def gather(low: Lowering) -> None:
    data = low.input(0)
    axis = normalize_axis(low, int(low.attr("axis", 0)), len(data.shape))
    low.emit("gather", [data, low.input(1), low.output()], [axis])


@rule("Pad")
def pad(low: Lowering) -> None:
    x, y = low.input(0), low.output()
    rank = len(x.shape)
    mode = low.attr("mode", "constant")
    if mode not in PAD_MODES:
        raise low.fail(f"mode {mode!r}")
    if "pads" in low.node.attrs:  # opset < 11
        pads, value = [int(p) for p in low.attr("pads")], float(low.attr("value", 0.0))
    else:
        pads = [int(p) for p in low.constant(1, "Pad pads").reshape(-1)]
        given = low.optional_constant(2, "Pad constant_value")
        value = 0.0 if given is None else float(given.reshape(-1)[0])
        axes_given = low.optional_constant(3, "Pad axes")
        if axes_given is not None:
            axes = [normalize_axis(low, int(a), rank) for a in axes_given.reshape(-1)]
            full = [0] * (2 * rank)
            for i, a in enumerate(axes):
                full[a], full[a + rank] = pads[i], pads[i + len(axes)]
            pads = full
    if len(pads) != 2 * rank:
        raise low.fail(f"{len(pads)} pads for rank {rank}")
    low.emit("pad", [x, y], [PAD_MODES[mode], value, *pads])


@rule("Cast", "CastLike")
def cast(low: Lowering) -> None:
    """Cast / CastLike: saturate (float8 targets, default 1) and round_mode (E8M0 targets, default up)."""
    try:
        mode = round_mode_code(low.attr("round_mode", "up"))
    except ValueError as exc:
        raise low.fail(str(exc)) from None
    low.emit("cast", [low.input(0), low.output()], [int(low.attr("saturate", 1)), mode])


@rule("Shape")
def shape(low: Lowering) -> None:
    x = low.input(0)
    start = int(low.attr("start", 0))
    start = min(max(start + len(x.shape) if start < 0 else start, 0), len(x.shape))
    low.emit("shape", [x, low.output()], [start])


@rule("Size")
def size(low: Lowering) -> None:
    low.emit("fill", [low.output()], [math.prod(low.input(0).shape)])


@rule("ConstantOfShape")
def constant_of_shape(low: Lowering) -> None:
    y = low.output()
    given = low.attr("value")
    value = np.zeros(1, np.float32) if given is None else np.asarray(given).reshape(-1)
    fill = int(value[0]) if y.dtype.kind in "iub" else float(value[0])
    if math.prod(y.shape):
        low.emit("fill", [y], [fill])


@rule("Expand")
def expand(low: Lowering) -> None:
    low.emit("expand", [low.input(0), low.output()])


@rule("Tile")
def tile(low: Lowering) -> None:
    low.emit("tile", [low.input(0), low.output()])
