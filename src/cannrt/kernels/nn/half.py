"""fp16 <-> fp32 conversion at memory speed, for the kernels that compute fp16 tensors in fp32.

numpy converts float16 one element at a time in scalar C (1.5 ns per element to fp32, 3 ns
back on this project's machines, 10 ns for an fp16 add); here numba loops do it: widening moves
the bits and rebiases with one exact multiply (a 65536-entry table would be exact too, but
random weights miss its cache lines: 2.6 ns per element), narrowing rounds to nearest even on
the bits (the IEEE rule numpy's astype follows: overflow to inf, fp16 subnormals, NaN kept NaN
with its sign).
Both release the GIL, and large arrays are converted in slabs on both host threads.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cannrt.kernels.casting import FP16_NUMPY_BELOW
from cannrt.kernels.nn import blas
from cannrt.kernels.nn.jit import jit

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
TABLE = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
SLAB = 1 << 18  # elements per item of a parallel conversion
PARALLEL_MIN = 1 << 19  # arrays at least this large are converted on both threads


@jit
def _widen(
    bits: np.ndarray, bstride: int, out: np.ndarray, words: np.ndarray, ostride: int, rows: int, cols: int
) -> None:
    """words is out's memory as uint32: exponent and mantissa moved into place, one exact
    multiply by 2**112 rebiases them (fp16 subnormals become fp32 normals), then inf / NaN get
    the full exponent and every value its sign. Three plain loops: vectorised, no lookups."""
    scale = np.float32(2.0**112)
    for i in range(rows):
        source = bits[i * bstride : i * bstride + cols]
        value, word = out[i * ostride : i * ostride + cols], words[i * ostride : i * ostride + cols]
        for j in range(cols):
            word[j] = np.uint32(source[j] & 0x7FFF) << 13
        for j in range(cols):
            value[j] *= scale
        for j in range(cols):
            h = np.uint32(source[j])
            special = np.uint32(0x7F800000) if (h & 0x7C00) == 0x7C00 else np.uint32(0)
            word[j] = word[j] | special | ((h & 0x8000) << 16)


@jit
def _narrow(bits: np.ndarray, vstride: int, out: np.ndarray, ostride: int, rows: int, cols: int) -> None:
    for i in range(rows):
        source, target = bits[i * vstride : i * vstride + cols], out[i * ostride : i * ostride + cols]
        for j in range(cols):
            u = np.int64(source[j])
            sign = (u >> 16) & 0x8000
            a = u & 0x7FFFFFFF
            if a >= 0x47800000:  # |v| >= 2**16, inf or NaN
                h = np.int64(0x7E00 if a > 0x7F800000 else 0x7C00)
            elif a < 0x38800000:  # below the smallest normal fp16 (2**-14): |v| * 2**24 rounded to even
                e = a >> 23
                shift = np.int64(126) - e  # |v| * 2**24 = mantissa * 2**-shift, shift >= 14
                if shift > 31:
                    shift = np.int64(31)
                m = ((a & 0x7FFFFF) | 0x800000) if e else np.int64(0)
                q, rem, half = m >> shift, m & ((1 << shift) - 1), np.int64(1) << (shift - 1)
                h = q + (1 if rem > half or (rem == half and q & 1) else 0)
            else:  # rebias the exponent, round the 13 dropped bits to nearest even
                h = (a - 0x38000000 + 0xFFF + ((a >> 13) & 1)) >> 13
            target[j] = np.uint16(sign | h)


@jit
def _relu_bits(bits: np.ndarray, out: np.ndarray) -> None:
    for i in range(bits.shape[0]):
        b = bits[i]
        negative = (b & 0x8000) != 0 and (b & 0x7FFF) <= 0x7C00  # below zero (or -0, -inf), not NaN
        out[i] = 0 if negative else b


def relu_into(out: np.ndarray, x: np.ndarray) -> bool:
    """out = max(x, 0) for C-contiguous fp16 arrays of one shape, on the bits (exact: NaN kept,
    -0 to +0); False (nothing written) for anything else."""
    if not (x.dtype == out.dtype == F16 and x.shape == out.shape and x.flags.c_contiguous and out.flags.c_contiguous):
        return False
    if x.size:
        _relu_bits(x.reshape(-1).view(np.uint16), out.reshape(-1).view(np.uint16))
    return True


BINARY_CODES = {"add": 0, "sub": 1, "mul": 2, "max": 3, "min": 4}


@jit
def _binary_wide(code: int, a: np.ndarray, b: np.ndarray, table: np.ndarray, out: np.ndarray) -> None:
    for i in range(a.shape[0]):
        x, y = table[a[i]], table[b[i]]
        if code == 0:
            r = x + y
        elif code == 1:
            r = x - y
        elif code == 2:
            r = x * y
        elif x != x or y != y:  # max / min propagate NaN, as numpy's do
            r = x + y
        elif code == 3:
            r = x if x >= y else y
        else:
            r = x if x <= y else y
        out[i] = r


def binary_into(name: str, out: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """out = a <name> b for C-contiguous fp16 arrays of one shape (name in BINARY_CODES): the
    operands widened and combined in one fp32 pass, then narrowed once (numpy's fp16 ufuncs
    compute the same way, in scalar loops); False (nothing written) for anything else."""
    code = BINARY_CODES.get(name)
    arrays = (out, a, b)
    if code is None or any(v.dtype != F16 or v.shape != out.shape or not v.flags.c_contiguous for v in arrays):
        return False
    if out.size:
        wide = np.empty(out.shape, F32)
        _binary_wide(code, a.reshape(-1).view(np.uint16), b.reshape(-1).view(np.uint16), TABLE, wide.reshape(-1))
        narrow_into(out, wide)
    return True


def _rows(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """The arrays (one shape, each _viewable) as 2-D views of one shape: a single row when all
    are contiguous (short trailing axes such as a 1x1 kernel's would make many tiny rows), else
    their rows."""
    if all(a.flags.c_contiguous for a in arrays):
        return tuple(a.reshape(1, -1) for a in arrays)
    return tuple(a.reshape(-1, a.shape[-1]) for a in arrays)


def _span(x: np.ndarray) -> tuple[np.ndarray, int]:
    """A 2-D view with unit column stride as a contiguous 1-D view from its first element to
    its last, and its row stride in elements: numba's loops then index contiguous memory
    (vectorised) instead of a strided array."""
    rows, cols = x.shape
    if x.flags.c_contiguous:  # already one span
        return x.reshape(-1), cols
    stride = x.strides[0] // x.itemsize if rows > 1 else cols
    length = (rows - 1) * stride + cols
    return np.lib.stride_tricks.as_strided(x, (length,), (x.itemsize,)), stride


def _viewable(x: np.ndarray) -> bool:
    """x reshapes to 2-D rows with unit column stride without a copy."""
    if x.flags.c_contiguous:
        return True
    if x.ndim != 2:  # a strided 1-D or N-D view: copied by the caller
        return False
    rows_apart = x.strides[0] % x.itemsize == 0 and x.strides[0] >= x.shape[1] * x.itemsize
    return x.strides[1] == x.itemsize and rows_apart


def _convert(function: Callable[..., None], source: np.ndarray, target: np.ndarray, pass_bits: bool) -> None:
    """function from source into target (one shape, each _viewable): one call over the flat
    memory of small contiguous arrays (most tensors; a few us less than _run's row views), else
    _run over their rows."""
    size = source.size
    if size < PARALLEL_MIN and source.flags.c_contiguous and target.flags.c_contiguous:
        src, dst = source.reshape(-1), target.reshape(-1)
        if pass_bits:
            function(src, size, dst, size, 1, size)
        else:
            function(src, size, dst, dst.view(np.uint32), size, 1, size)
        return
    _run(function, _rows(source, target), pass_bits)


def _run(function: Callable[..., None], arrays: tuple[np.ndarray, ...], pass_bits: bool) -> None:
    """kernel over the rows of the 2-D views `arrays` (source, destination), in slabs of rows
    on both threads for large ones."""
    source, target = arrays
    rows, cols = source.shape
    (src, sstride), (dst, dstride) = _span(source), _span(target)

    def block(start: int, stop: int, first: int = 0, last: int = cols) -> None:
        """rows [start, stop), columns [first, last) of them."""
        a, b = src[start * sstride + first :], dst[start * dstride + first :]
        if pass_bits:
            function(a, sstride, b, dstride, stop - start, last - first)
        else:
            function(a, sstride, b, b.view(np.uint32), dstride, stop - start, last - first)

    if rows * cols < PARALLEL_MIN:
        block(0, rows)
    elif rows == 1:  # one contiguous row: slabs of columns
        columns = [(c, min(c + SLAB, cols)) for c in range(0, cols, SLAB)]
        blas.parallel_for(len(columns), lambda index: block(0, 1, *columns[index]))
    else:
        step = max(1, SLAB // max(1, cols))
        parts = [(r, min(r + step, rows)) for r in range(0, rows, step)]
        blas.parallel_for(len(parts), lambda index: block(*parts[index]))


def _loops_take(source: np.ndarray, from_dtype: np.dtype, target: np.ndarray, to_dtype: np.dtype) -> bool:
    """The numba loops convert source into target: the dtypes they convert, one shape, not a
    small array, both viewable as rows."""
    if source.size < FP16_NUMPY_BELOW or source.dtype != from_dtype or target.dtype != to_dtype:
        return False
    return source.shape == target.shape and _viewable(source) and _viewable(target)


def widen(x: np.ndarray) -> np.ndarray:
    """An fp16 array as a new fp32 array of its shape (other dtypes: x.astype(fp32, copy=False))."""
    if x.dtype != F16 or x.size < FP16_NUMPY_BELOW or not _viewable(x):
        return x.astype(F32, copy=False)
    out = np.empty(x.shape, F32)
    widen_into(out, x)
    return out


def widen_into(out: np.ndarray, x: np.ndarray) -> None:
    """out (fp32) = x (fp16), same shape; numpy's copy where either cannot be viewed as rows."""
    if not _loops_take(x, F16, out, F32):
        np.copyto(out, x, casting="unsafe")
        return
    _convert(_widen, x.view(np.uint16), out, pass_bits=False)


def narrow_into(out: np.ndarray, value: np.ndarray) -> None:
    """out (fp16) = value (fp32) rounded to nearest even, same shape; numpy's cast otherwise."""
    if not _loops_take(value, F32, out, F16):
        np.copyto(out, value, casting="unsafe")
        return
    _convert(_narrow, value.view(np.uint32), out.view(np.uint16), pass_bits=True)
