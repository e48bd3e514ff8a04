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
from concurrent.futures import ThreadPoolExecutor

import numpy as np
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


SPLIT_FLOPS = 2e7  # products at least this large use a second host thread
_pool: list[ThreadPoolExecutor] = []
SPLITS = [0]  # products split so far (tests read it)


def _helper() -> ThreadPoolExecutor:
    with _lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="cannrt-kernel-blas"))
        return _pool[0]


def matmul_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out = a @ b for a 2-D a (m x k) and b (k x n), out C-contiguous (m x n): large products
    split their rows between the calling thread and one helper, each on single-threaded BLAS
    (both cores busy, neither spinning while the other is descheduled)."""
    m = a.shape[0]
    if 2.0 * m * a.shape[1] * b.shape[1] < SPLIT_FLOPS or m < 32:
        np.matmul(a, b, out=out)
        return
    half = m // 2
    SPLITS[0] += 1
    other = _helper().submit(np.matmul, a[half:], b, out=out[half:])
    np.matmul(a[:half], b, out=out[:half])
    other.result()
