"""The host's BLAS runs each cube kernel on one thread.

A kernel's numpy code runs on the simulated device's worker thread while the host's own threads
(and, on a shared machine, other processes) hold the other cores; a multi-threaded OpenBLAS
busy-waits for cores it does not get. On this project's 2-core machines under load a resnet50's
convolutions took 10x longer with OpenBLAS's default 2 threads than with 1 (2.1 s against 0.2 s).
The device's parallelism is modelled (block_dim over the AI cores), not borrowed from the host.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from threadpoolctl import ThreadpoolController

KERNEL_BLAS_THREADS = 1

_lock = threading.Lock()
_state: dict[str, Any] = {"controllers": None, "depth": 0, "saved": []}


def _controllers() -> list[Any]:
    if _state["controllers"] is None:
        _state["controllers"] = list(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _state["controllers"]  # type: ignore[no-any-return]


@contextmanager
def kernel_blas() -> Iterator[None]:
    """BLAS limited to KERNEL_BLAS_THREADS inside (nested and concurrent uses share one limit;
    the user's setting comes back when the last one leaves)."""
    with _lock:
        if _state["depth"] == 0:
            libs = _controllers()
            _state["saved"] = [lib.get_num_threads() for lib in libs]
            for lib in libs:
                if _state["saved"][libs.index(lib)] != KERNEL_BLAS_THREADS:
                    lib.set_num_threads(KERNEL_BLAS_THREADS)
        _state["depth"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["depth"] -= 1
            if _state["depth"] == 0:
                for lib, threads in zip(_controllers(), _state["saved"], strict=True):
                    if threads != KERNEL_BLAS_THREADS:
                        lib.set_num_threads(threads)
