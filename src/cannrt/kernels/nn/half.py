"""fp16 <-> fp32 conversion at memory speed, for the kernels that compute fp16 tensors in fp32.

numpy converts float16 one element at a time in scalar C (1.5 ns per element to fp32, 3 ns
back on this project's machines, 10 ns for an fp16 add); here numba loops do it: widening reads
a 65536-entry table (exact by construction), narrowing rounds to nearest even on the bits (the
IEEE rule numpy's astype follows: overflow to inf, fp16 subnormals, NaN kept NaN with its sign).
Both release the GIL, and large arrays are converted in slabs on both host threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from cannrt.kernels.nn import blas

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
TABLE = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
SLAB = 1 << 18  # elements per item of a parallel conversion
PARALLEL_MIN = 1 << 19  # arrays at least this large are converted on both threads


def _widen(bits: np.ndarray, table: np.ndarray, out: np.ndarray) -> None:
    for i in range(bits.shape[0]):
        for j in range(bits.shape[1]):
            out[i, j] = table[bits[i, j]]


def _narrow(value: np.ndarray, bits: np.ndarray, out: np.ndarray) -> None:
    for i in range(value.shape[0]):
        for j in range(value.shape[1]):
            u = np.int64(bits[i, j])
            sign = (u >> 16) & 0x8000
            a = u & 0x7FFFFFFF
            if a >= 0x47800000:  # |v| >= 2**16, inf or NaN
                h = np.int64(0x7E00 if a > 0x7F800000 else 0x7C00)
            elif a < 0x38800000:  # below the smallest normal fp16 (2**-14): a subnormal or zero
                h = np.int64(np.rint(np.abs(np.float64(value[i, j])) * 16777216.0))
            else:  # rebias the exponent, round the 13 dropped bits to nearest even
                h = (a - 0x38000000 + 0xFFF + ((a >> 13) & 1)) >> 13
            out[i, j] = np.uint16(sign | h)


_compiled: dict[str, Callable[..., None]] = {}
_lock = threading.Lock()


def _kernel(name: str) -> Callable[..., None]:
    """The numba-compiled loop (compiled, or loaded from numba's cache, at its first use: numba
    is imported only by the kernels that convert fp16)."""
    kernel = _compiled.get(name)
    if kernel is None:
        with _lock:
            if not _compiled:
                import numba

                for function in (_widen, _narrow):
                    _compiled[function.__name__] = numba.njit(cache=True, nogil=True)(function)
            kernel = _compiled[name]
    return kernel


def _widen_table(bits: np.ndarray, out: np.ndarray) -> None:
    _kernel("_widen")(bits, TABLE, out)


def _narrow_bits(value: np.ndarray, bits: np.ndarray, out: np.ndarray) -> None:
    _kernel("_narrow")(value, bits, out)


def _rows(x: np.ndarray) -> np.ndarray:
    """x as a 2-D view, leading axes merged (x is _viewable)."""
    if x.ndim == 2:
        return x
    if x.ndim < 2:
        return x.reshape(1, -1)
    return x.reshape(-1, x.shape[-1])


def _slabs(rows: int, cols: int) -> list[tuple[int, int]]:
    step = max(1, SLAB // max(1, cols))
    return [(r, min(r + step, rows)) for r in range(0, rows, step)]


def _run(kernel: Callable[..., None], arrays: tuple[np.ndarray, ...]) -> None:
    rows, cols = arrays[0].shape
    if rows * cols < PARALLEL_MIN:
        kernel(*arrays)
        return
    parts = _slabs(rows, cols)

    def part(index: int) -> None:
        start, stop = parts[index]
        kernel(*(a[start:stop] for a in arrays))

    blas.parallel_for(len(parts), part)


def _viewable(x: np.ndarray) -> bool:
    """x reshapes to 2-D rows without a copy (C-contiguous, or 2-D with unit column stride)."""
    return x.flags.c_contiguous or (x.ndim == 2 and x.strides[1] == x.itemsize)


def widen(x: np.ndarray) -> np.ndarray:
    """An fp16 array as a new fp32 array of its shape (other dtypes: x.astype(fp32, copy=False))."""
    if x.dtype != F16 or not _viewable(x) or x.size == 0:
        return x.astype(F32, copy=False)
    out = np.empty(x.shape, F32)
    widen_into(out, x)
    return out


def widen_into(out: np.ndarray, x: np.ndarray) -> None:
    """out (fp32) = x (fp16), same shape; numpy's copy where either cannot be viewed as rows."""
    if x.dtype != F16 or out.dtype != F32 or x.shape != out.shape or not (_viewable(x) and _viewable(out)):
        np.copyto(out, x, casting="unsafe")
        return
    if x.size:
        _run(_widen_table, (_rows(x.view(np.uint16)), _rows(out)))


def narrow_into(out: np.ndarray, value: np.ndarray) -> None:
    """out (fp16) = value (fp32) rounded to nearest even, same shape; numpy's cast otherwise."""
    if out.dtype != F16 or value.dtype != F32 or out.shape != value.shape or not (_viewable(out) and _viewable(value)):
        np.copyto(out, value, casting="unsafe")
        return
    if value.size:
        rows = _rows(value)
        _run(_narrow_bits, (rows, rows.view(np.uint32), _rows(out.view(np.uint16))))
