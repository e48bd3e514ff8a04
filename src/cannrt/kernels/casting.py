"""ONNX Cast semantics (opset 25) on numpy arrays: the one conversion the cast kernels and the
graph engine's constant folding share.

Round to nearest even (numpy / ml_dtypes conversions); float8 targets clamped to their finite
range when saturate is 1 (NaN stays NaN, inf becomes the largest finite value); float8 E8M0
targets rounded by round_mode (ROUND_UP, ROUND_NEAREST, ROUND_DOWN); bool targets are x != 0.
"""

from __future__ import annotations

import numpy as np

from cannrt.dtypes import FLOAT8_E8M0, FLOAT8_MAX

ROUND_UP, ROUND_NEAREST, ROUND_DOWN = range(3)
ROUND_MODES = {"up": ROUND_UP, "nearest": ROUND_NEAREST, "down": ROUND_DOWN}  # ONNX Cast round_mode


def round_mode_code(mode: object) -> int:
    """The code of an ONNX Cast round_mode ("up", "nearest", "down"); ValueError otherwise."""
    try:
        return ROUND_MODES[str(mode)]
    except KeyError:
        raise ValueError(f"round_mode {str(mode)!r} (expected {', '.join(ROUND_MODES)})") from None


WIDE_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
FP16_NUMPY_BELOW = 1024  # fp16 arrays under this size convert through numpy (its scalar loop, 2.8 ns an
# element, costs less than a numba call's ~2-3 us); larger ones through kernels/nn/half.py's loops


def to_e8m0(x: np.ndarray, saturate: int, round_mode: int) -> np.ndarray:
    """float8 E8M0 (a bare biased exponent, no sign) of x: fp32's exponent field, rounded up by
    the fp32 mantissa as round_mode says; NaN and inf become 0xFF (NaN); with saturate, no value
    rounds past the largest exponent (254)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF
    if round_mode == ROUND_UP:
        up = (bits & 0x7FFFFF) > 0
    elif round_mode == ROUND_NEAREST:
        guard, rest = (bits & 0x400000) > 0, (bits & 0x3FFFFF) > 0
        up = guard & (rest | (exponent > 0))  # halfway rounds up unless the exponent field is 0
    else:
        up = np.zeros(bits.shape, np.bool_)
    up &= ~special
    if saturate:
        up &= exponent != 0xFE
    out = (exponent + up).astype(np.uint8)  # 254 + 1 = 255: NaN without saturate
    out[special] = 0xFF
    return out.view(FLOAT8_E8M0)


def cast_into(x: np.ndarray, y: np.ndarray, saturate: int = 1, round_mode: int = ROUND_UP) -> None:
    """y[...] = Cast(x) to y's dtype (ONNX Cast with its saturate and round_mode attributes)."""
    with np.errstate(all="ignore"):
        if y.dtype == np.bool_:
            np.not_equal(x, 0, out=y)
        elif y.dtype == FLOAT8_E8M0 and x.dtype != FLOAT8_E8M0:
            y[...] = to_e8m0(x, saturate, round_mode)
        elif y.dtype in FLOAT8_MAX and saturate and x.dtype != y.dtype:
            top = FLOAT8_MAX[y.dtype]
            wide = x if x.dtype in WIDE_FLOATS else x.astype(np.float32)
            np.copyto(y, np.clip(wide, wide.dtype.type(-top), wide.dtype.type(top)), casting="unsafe")
        else:
            np.copyto(y, x, casting="unsafe")


def cast_array(x: np.ndarray, dtype: np.dtype, saturate: int = 1, round_mode: int = ROUND_UP) -> np.ndarray:
    """Cast(x) to dtype as a new array (constant folding)."""
    y = np.empty(np.shape(x), dtype)
    cast_into(np.asarray(x), y, saturate, round_mode)
    return y
