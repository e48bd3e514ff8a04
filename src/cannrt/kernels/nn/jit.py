"""numba loops for the kernels numpy cannot do in one pass (fp16 conversion, a fused per-channel
affine): compiled, or loaded from numba's on-disk cache, at their first call, so that importing
cannrt does not import numba. They release the GIL, so both host threads can run them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

LOOP_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))  # the float dtypes the kernels' numba loops take
_lock = threading.Lock()


def jit(function: Callable[..., None]) -> Callable[..., None]:
    """function compiled by numba.njit(cache=True, nogil=True) at its first call."""
    compiled: list[Callable[..., None]] = []

    def call(*args: Any) -> None:
        if not compiled:
            with _lock:
                if not compiled:
                    import numba

                    compiled.append(numba.njit(cache=True, nogil=True)(function))
        compiled[0](*args)

    call.__name__ = call.__qualname__ = function.__name__
    call.__doc__ = function.__doc__
    return call
