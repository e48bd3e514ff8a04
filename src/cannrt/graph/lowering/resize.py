"""Resize (opsets 10, 11, 13, 18, 19) and Upsample (9) onto the resize kernel: the scale per axis
from scales, or from sizes and the aspect-ratio policy; the region of interest per axis."""

from __future__ import annotations

import numpy as np

from cannrt.graph.lowering.context import Lowering, normalize_axis, rule
from cannrt.kernels.nn.resize import COORDINATE_CODES, CUBIC, LINEAR, NEAREST, ROUNDING_CODES

MODES = {"nearest": NEAREST, "linear": LINEAR, "bilinear": LINEAR, "cubic": CUBIC}


def _scales(low: Lowering, shape: tuple[int, ...], axes: list[int], old: bool) -> list[float]:
    """Per-axis scale factors of the whole input rank."""
    rank = len(shape)
    scales_at, sizes_at = (1, None) if old else (2, 3)
    given = low.optional_constant(scales_at, "Resize scales") if low.has(scales_at) else None
    if given is not None:
        values = [float(v) for v in given.reshape(-1)]
        if len(values) != len(axes):
            raise low.fail(f"{len(values)} scales for {len(axes)} axes")
        scales = [1.0] * rank
        for axis, value in zip(axes, values, strict=True):
            scales[axis] = value
        return scales
    sizes = low.optional_constant(sizes_at, "Resize sizes") if sizes_at is not None and low.has(sizes_at) else None
    if sizes is None:
        raise low.fail("needs scales or sizes")
    wanted = [int(v) for v in sizes.reshape(-1)]
    if len(wanted) != len(axes):
        raise low.fail(f"{len(wanted)} sizes for {len(axes)} axes")
    ratios = {axis: size / shape[axis] for axis, size in zip(axes, wanted, strict=True)}
    policy = low.attr("keep_aspect_ratio_policy", "stretch")
    if policy == "not_larger":
        ratios = dict.fromkeys(axes, min(ratios.values()))
    elif policy == "not_smaller":
        ratios = dict.fromkeys(axes, max(ratios.values()))
    elif policy != "stretch":
        raise low.fail(f"keep_aspect_ratio_policy {policy!r}")
    return [ratios.get(axis, 1.0) for axis in range(rank)]


@rule("Resize", "Upsample")
def resize(low: Lowering) -> None:
    x, y = low.input(0), low.output()
    rank = len(x.shape)
    old = low.node.op_type == "Upsample" or low.node.opset < 11
    mode = low.attr("mode", "nearest")
    if mode not in MODES:
        raise low.fail(f"mode {mode!r}")
    axes_attr = low.attr("axes")
    axes = list(range(rank)) if axes_attr is None else [normalize_axis(low, int(a), rank) for a in axes_attr]
    if low.node.op_type == "Upsample" and "scales" in low.node.attrs:  # opset 7-8: an attribute
        scales = [float(s) for s in low.attr("scales")]
    else:
        scales = _scales(low, x.shape, axes, old)
    coordinate = "asymmetric" if old else low.attr("coordinate_transformation_mode", "half_pixel")
    rounding = "floor" if old else low.attr("nearest_mode", "round_prefer_floor")
    if coordinate not in COORDINATE_CODES or rounding not in ROUNDING_CODES:
        raise low.fail(f"coordinate_transformation_mode {coordinate!r}, nearest_mode {rounding!r}")
    roi = [0.0] * rank + [1.0] * rank
    given_roi = low.optional_constant(1, "Resize roi") if not old and low.has(1) else None
    if coordinate == "tf_crop_and_resize":
        if given_roi is None or given_roi.size != 2 * len(axes):
            raise low.fail("tf_crop_and_resize needs a roi of 2 values per axis")
        flat = [float(v) for v in np.asarray(given_roi).reshape(-1)]
        for i, axis in enumerate(axes):
            roi[axis], roi[axis + rank] = flat[i], flat[i + len(axes)]
    ints = [
        MODES[mode],
        COORDINATE_CODES[coordinate],
        ROUNDING_CODES[rounding],
        int(low.attr("exclude_outside", 0)),
        int(low.attr("antialias", 0)),
    ]
    floats = [float(low.attr("cubic_coeff_a", -0.75)), float(low.attr("extrapolation_value", 0.0))]
    low.emit("resize", [x, y], [*ints, *floats, *scales, *roi])
