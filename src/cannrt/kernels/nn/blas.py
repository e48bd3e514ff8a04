"""The host threads the operator kernels compute on: single-threaded BLAS, work shared by hand.

A kernel's numpy code runs on the simulated device's worker thread while the host's own threads
(and, on a shared machine, other processes) hold the other cores; a multi-threaded OpenBLAS
busy-waits for cores it does not get. On this project's 2-core machines under load a resnet50's
convolutions took 10x longer with OpenBLAS's default 2 threads than with 1 (2.1 s against 0.2 s).
The device's parallelism is modelled (block_dim over the AI cores), not borrowed from the host.

The limit is set once, when the first cube kernel runs, and stays (process-wide, as
torch.set_num_threads does): switching it per launch costs 0.1-0.2 ms, since OpenBLAS parks
and wakes its threads on every change.

Large kernels still use both host cores, without spinning: `parallel_for` hands the items of a
kernel (bands of a convolution's output, channel slabs of a pooling) to the calling thread and
one helper thread, both pulling the next item from one shared counter. A helper that the
scheduler does not start (a loaded machine) costs nothing: the caller runs every item and
withdraws the helper's job instead of waiting for it; one descheduled while it holds an item
makes the caller wait, and after such a stall kernels run on the caller alone for a while
(longer while the stalls repeat). A stall is told from a late start (on a quiet machine the
helper wakes 0.05-0.2 ms after the caller started, and a kernel of two items then ends with the
caller waiting that long) by the helper's own clocks: it was off its core (wall time minus
thread CPU time over the items it held) for most of the caller's wait. A kernel whose caller
was itself off its core for a share of its own items backs off too: other processes hold the
cores, and a second thread of this one then costs more than it gains.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from threadpoolctl import ThreadpoolController

KERNEL_BLAS_THREADS = 1

_lock = threading.Lock()
_done = [False]


def limit_blas_threads(recheck: bool = False) -> None:
    """Set the host BLAS libraries to KERNEL_BLAS_THREADS (once per process; again with recheck,
    for a BLAS loaded since, such as SciPy's that numba's np.dot calls)."""
    if _done[0] and not recheck:
        return
    with _lock:
        if recheck or not _done[0]:
            for lib in ThreadpoolController().select(user_api="blas").lib_controllers:
                if lib.get_num_threads() != KERNEL_BLAS_THREADS:
                    lib.set_num_threads(KERNEL_BLAS_THREADS)
            _done[0] = True


SPLIT_FLOPS = 2e7  # products at least this large share their items with the helper thread
PARALLEL_ELEMENTS = 1 << 18  # vector kernels on at least this many input elements share theirs
_pool: list[ThreadPoolExecutor] = []
SPLITS = [0]  # kernels shared with the helper so far (tests read it)


def _helper() -> ThreadPoolExecutor:
    with _lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="cannrt-kernel-blas"))
        return _pool[0]


STALL_SHARE = 0.3  # the caller waited this share of a shared kernel for the helper ...
STALL_MIN_S = 2e-4  # ... and at least this long (shorter waits are the last item's own length) ...
OFF_CORE_SHARE = 0.5  # ... and the helper was off its core for this share of the wait: a stall
BACKOFF_MIN_S = 0.05  # after a stall, kernels run on the caller alone this long, doubled while
BACKOFF_MAX_S = 2.0  # ... the helper stalls again at each retry (a loaded spell lasts seconds)
_backoff = [0.0, BACKOFF_MIN_S]  # perf_counter() until which kernels run on the caller alone; the next length
CROWDED_SHARE = 0.3  # the caller itself was off its core this share of its own items: a crowded host
STALLS = [0]  # stalls seen so far, crowded kernels included (tests read it)
CROWDED = [0]  # shared kernels whose caller was off its core (tests read it)
thread_clock = time.thread_time  # CPU time of the calling thread (tests replace it)


def reset_backoff() -> None:
    """Try the helper again on the next kernel, as after a shared kernel that ran well (tests
    start from this state)."""
    _backoff[0], _backoff[1] = 0.0, BACKOFF_MIN_S


def stalled(waited: float, total: float, off_core: float) -> bool:
    """Whether a shared kernel stalled on its helper: the caller waited for it at least
    STALL_MIN_S and STALL_SHARE of the kernel's wall time, and the helper spent most of that
    wait (OFF_CORE_SHARE) off its core while holding an item. A helper that started late but
    then ran on its core is no stall: the wait is its item's own length."""
    return waited > STALL_MIN_S and waited > STALL_SHARE * total and off_core > OFF_CORE_SHARE * waited


def shares() -> bool:
    """Whether parallel_for shares the next kernel's items with the helper (not while backed
    off): a kernel that cuts its work only for the two threads need not cut it otherwise."""
    return not (_backoff[0] and time.perf_counter() < _backoff[0])


def crowded(own: float, off_core: float) -> bool:
    """Whether a shared kernel ran on a crowded host: the caller's own items took at least
    STALL_MIN_S and it was off its core (wall time minus thread CPU time) for CROWDED_SHARE of
    them. Other processes hold the cores then, and a second thread of this one gains nothing: on
    this project's 2-core machines with two other busy processes, squeezenet / resnet50 /
    densenet121 executes took 1.13 / 1.06 / 1.11x as long with their kernels shared as on the
    caller alone (the caller was off its core about half of its items' time; 0 when quiet)."""
    return own > STALL_MIN_S and off_core > CROWDED_SHARE * own


def parallel_for(count: int, body: Callable[[int], None]) -> None:
    """body(i) for every i in range(count), on the calling thread and one helper: each takes the
    next index from a shared counter until none is left. An exception in either is raised here,
    after both stopped.

    On a loaded host the helper may be descheduled while it holds an item, and the caller can
    only wait; or both threads share cores with other processes (`crowded`: then kernels run on
    the caller alone for BACKOFF_MIN_S, and the next shared kernel tests again). After a stall
    (`stalled`), kernels run on the caller alone for BACKOFF_MIN_S,
    doubled up to BACKOFF_MAX_S each time the helper stalls again when it is next tried (a
    loaded spell lasts seconds; a stall on a quiet host is a one-off), and back to the shortest
    once a shared kernel ran without a stall."""
    if count <= 1 or not shares():
        for index in range(count):
            body(index)
        return
    SPLITS[0] += 1
    counter = itertools.count()  # next() on it is atomic: one C call under the GIL
    off_core = [0.0]  # the helper's wall time minus its CPU time while it drained items

    def drain() -> None:
        for index in counter:
            if index >= count:
                return
            body(index)

    def helper_drain() -> None:  # between items it only takes the next index: one measure for all
        wall, cpu = time.perf_counter(), thread_clock()
        try:
            drain()
        finally:
            off_core[0] = max(0.0, (time.perf_counter() - wall) - (thread_clock() - cpu))

    started, own_cpu = time.perf_counter(), thread_clock()
    job = _helper().submit(helper_drain)
    try:
        drain()
    finally:
        mine = time.perf_counter()
        own_off = max(0.0, (mine - started) - (thread_clock() - own_cpu))
        if not job.cancel():  # the helper started: it finishes the item it holds
            job.result()
    now = time.perf_counter()
    with _lock:  # the workers of two devices may both run kernels: one update of the back-off at a time
        if stalled(now - mine, now - started, off_core[0]):
            STALLS[0] += 1
            _backoff[0] = now + _backoff[1]
            _backoff[1] = min(2 * _backoff[1], BACKOFF_MAX_S)
        elif crowded(mine - started, own_off):  # retried soon: the next shared kernel costs little if still crowded
            STALLS[0] += 1
            CROWDED[0] += 1
            _backoff[0] = now + BACKOFF_MIN_S
        elif _backoff[0]:
            reset_backoff()  # the helper kept up: a quiet host again
