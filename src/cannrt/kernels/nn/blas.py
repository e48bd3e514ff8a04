"""The host's BLAS runs the cube kernels on one thread.

A kernel's numpy code runs on the simulated device's worker thread while the host's own threads
(and, on a shared machine, other processes) hold the other cores; a multi-threaded OpenBLAS
busy-waits for cores it does not get. On this project's 2-core machines under load a resnet50's
convolutions took 10x longer with OpenBLAS's default 2 threads than with 1 (2.1 s against 0.2 s).
The device's parallelism is modelled (block_dim over the AI cores), not borrowed from the host.

The limit is set once, when the first cube kernel runs, and stays (process-wide, as
torch.set_num_threads does): switching it per launch costs 0.1-0.2 ms, since OpenBLAS parks
and wakes its threads on every change.
"""

from __future__ import annotations

import threading

from threadpoolctl import ThreadpoolController

KERNEL_BLAS_THREADS = 1

_lock = threading.Lock()
_done = [False]


def limit_blas_threads() -> None:
    """Set the host BLAS libraries to KERNEL_BLAS_THREADS (once per process)."""
    if _done[0]:
        return
    with _lock:
        if not _done[0]:
            for lib in ThreadpoolController().select(user_api="blas").lib_controllers:
                if lib.get_num_threads() != KERNEL_BLAS_THREADS:
                    lib.set_num_threads(KERNEL_BLAS_THREADS)
            _done[0] = True
