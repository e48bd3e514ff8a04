"""numba loops that run their items on a team of native threads, without the GIL.

A kernel whose items are numba code (an im2col band, its product through BLAS, the bias and
activation) runs them in one `prange` loop: numba's threading layer (GNU OpenMP, else TBB)
hands the items to TEAM_THREADS native threads, which take the next item as they finish one
(chunk size 1). No item takes the GIL, so the two host threads never wait for each other in
Python: where blas.parallel_for pays a Python thread's wake-up and a GIL hand-off per kernel
(40-90 us on this project's virtual machines), a team's fork and join cost a few microseconds.

Each loop is compiled twice, parallel and serial (prange as range), at its first call; the
serial twin runs the same items in the same order, so a result never depends on which runs:
- a small kernel (fewer than TEAM_MIN_FLOPS) runs serially: a team costs more than it gains;
- in a process forked after this one started a team (GNU OpenMP's threads do not survive a
  fork: a team there would hang), and where numba has no thread-safe layer (its workqueue
  layer aborts when two threads start teams at once: two devices' workers) or cannot start one;
- on every thread but the one that leads the process's teams (the first to start one, while
  it lives), and on threads that said they never lead (`never_lead`: the device's worker, which
  runs tasks while the host is busy, or before a waiting host thread takes over). GNU OpenMP
  keeps a pool of threads per thread that starts teams; with more pool threads than cores it
  cuts its spin waits from 300,000 rounds to 100 (throttled), so every team's thread then
  sleeps between loops and is woken by futex: one execute of squeezenet run by the device's
  worker left every later execute at 11.5-16.7 ms instead of 9.0-10.0;
- for a while after a crowded team: its caller was off its core for a share of the call
  (`crowded`: other processes hold the cores, or the scheduler put the team's threads on one
  core, where GNU OpenMP's spinning waits cost a time slice per barrier: on this project's
  2-core machines under load, a loop of 0.2 ms items took 6 ms a call; a core that idled for
  tens of ms is slow to come back in their virtual machines, too). Loops then run serially for
  BACKOFF_MIN_S, doubled up to BACKOFF_MAX_S while the teams tried again are crowded too, and
  back to the shortest after a team that was not (a first back-off of 50 ms made squeezenet
  executes 10 ms apart run serially, 9.4 against 6.6 ms an execute).
The threads' BLAS is limited to one thread as the kernels' own is (blas.limit_blas_threads,
again once numba has loaded SciPy's BLAS for np.dot).
"""

from __future__ import annotations

import importlib
import os
import threading
import time
import types
from collections.abc import Callable
from typing import Any

from cannrt.kernels.nn import blas

TEAM_THREADS = 2  # the caller's core and one more, as blas.parallel_for uses
TEAM_MIN_FLOPS = 2e6  # kernels below this run serially (about 10 us of work)
_lock = threading.Lock()
# the process that started a team; whether numba's layer is usable; the thread that leads the teams
_state: dict[str, Any] = {"pid": None, "usable": None, "leader": None}
_local = threading.local()
TEAMS = [0]  # loops run on a team so far (tests read it)
CROWDED = [0]  # teams whose caller was off its core (tests read it)
BACKOFF_MIN_S, BACKOFF_MAX_S = 0.005, 2.0
_backoff = [0.0, BACKOFF_MIN_S]  # perf_counter() until which loops run serially; the next length
thread_clock = time.thread_time  # CPU time of the calling thread (tests replace it)


def _usable() -> bool:
    """Whether this process may start a team now (see the module docstring)."""
    if _state["usable"] is False or (_backoff[0] and time.perf_counter() < _backoff[0]):
        return False
    pid = _state["pid"]
    return pid is None or pid == os.getpid()


def _claimable(leader: threading.Thread | None) -> bool:
    """Whether a thread may become the leader: none yet, or the leader ended (GNU OpenMP frees
    a thread's pool when the thread ends)."""
    return leader is None or not leader.is_alive()


def never_lead() -> None:
    """The calling thread runs every loop serially: it never starts a team (the device's worker)."""
    _local.never = True


def reset_backoff() -> None:
    """Start teams again from the next loop (tests start from this state)."""
    _backoff[0], _backoff[1] = 0.0, BACKOFF_MIN_S


CROWDED_SHARE = 0.3  # a crowded team: its caller was off its core this share of the call ...
CROWDED_MIN_S = 1e-3  # ... and this long (a core shared with a spinning team thread costs a time slice)


def crowded(wall: float, off_core: float) -> bool:
    """Whether a team call was crowded: its caller off its core for CROWDED_SHARE of the call and
    CROWDED_MIN_S at least. Shorter waits (a preemption, another runtime's threads finishing)
    cost less than a back-off: in turns with onnxruntime, a 0.2 ms floor sent squeezenet's
    executes to their serial speed (10.6 against 7.0 ms)."""
    return off_core > CROWDED_MIN_S and off_core > CROWDED_SHARE * wall


def _judge(wall: float, off_core: float) -> None:
    """Back off after a crowded team, or end a back-off after one that was not."""
    with _lock:
        if crowded(wall, off_core):
            CROWDED[0] += 1
            retried = _backoff[0] != 0.0
            _backoff[0] = time.perf_counter() + _backoff[1]
            _backoff[1] = min(2 * _backoff[1], BACKOFF_MAX_S) if retried else BACKOFF_MIN_S
        elif _backoff[0]:
            reset_backoff()


def _prepare_thread() -> None:
    """The team of this calling thread: TEAM_THREADS threads, items handed out one at a time
    (numba keeps both settings per calling thread)."""
    import numba

    config: Any = numba.config
    numba.set_num_threads(min(TEAM_THREADS, config.NUMBA_NUM_THREADS))
    numba.set_parallel_chunksize(1)
    _local.ready = True


def _first_team() -> None:
    """Choose numba's layer (unless the user chose one): GNU OpenMP where numba's pool for it
    loads, else its thread-safe choice (TBB, which numba prefers: squeezenet took 6.6 ms an execute
    on TBB's threads against 5.8 on OpenMP's); remember this process."""
    import numba

    config: Any = numba.config
    if config.THREADING_LAYER == "default":
        try:
            importlib.import_module("numba.np.ufunc.omppool")
        except ImportError:
            config.THREADING_LAYER = "threadsafe"
        else:
            config.THREADING_LAYER = "omp"
    _state["pid"] = os.getpid()


def _leads() -> bool:
    """Whether the calling thread leads the process's teams; it becomes the leader where none
    lives, unless it said it never leads."""
    leader, current = _state["leader"], threading.current_thread()
    if leader is current:
        return True
    if getattr(_local, "never", False) or not _claimable(leader):
        return False
    with _lock:
        if not _claimable(_state["leader"]):  # another thread became the leader meanwhile
            return False
        if _state["pid"] is None:
            _first_team()
        _state["leader"] = current
    return True


def _renamed(function: Callable[..., None], suffix: str) -> Callable[..., None]:
    """A copy of function under another qualified name: numba's disk cache keys a function by
    its file and name, not by whether it was compiled parallel."""
    copy = types.FunctionType(function.__code__, function.__globals__, function.__name__ + suffix)
    copy.__qualname__ = function.__qualname__ + suffix
    return copy


class TeamLoop:
    """A numba function compiled parallel and serial (njit(cache=True, nogil=True)); calling
    it runs the parallel twin when `flops` is large and a team may run, else the serial one."""

    def __init__(self, function: Callable[..., None]) -> None:
        self.function = function
        self._parallel: Callable[..., None] | None = None
        self._serial: Callable[..., None] | None = None
        self.__name__ = self.__qualname__ = function.__name__
        self.__doc__ = function.__doc__

    def _compile(self) -> None:
        with _lock:
            if self._serial is None:
                import numba
                import scipy.linalg.cython_blas  # noqa: F401  (the BLAS numba's np.dot calls)

                blas.limit_blas_threads(recheck=True)
                self._parallel = numba.njit(cache=True, nogil=True, parallel=True)(self.function)
                self._serial = numba.njit(cache=True, nogil=True)(_renamed(self.function, "_serial"))

    def __call__(self, flops: float, *args: Any) -> None:
        if self._serial is None:
            self._compile()
        assert self._parallel is not None and self._serial is not None
        if flops < TEAM_MIN_FLOPS or not _usable() or not _leads():
            self._serial(*args)
            return
        try:
            if not getattr(_local, "ready", False):
                _prepare_thread()  # starts numba's threads: raises where no thread-safe layer loads
            TEAMS[0] += 1
            compiled = len(self._parallel.overloads)  # type: ignore[attr-defined]
            started, cpu = time.perf_counter(), thread_clock()
            self._parallel(*args)
            wall = time.perf_counter() - started
            if len(self._parallel.overloads) == compiled:  # type: ignore[attr-defined]
                _judge(wall, wall - (thread_clock() - cpu))  # not a compile or a cache load: timed
        except ValueError as error:
            if "threading layer" not in str(error):
                raise
            _state["usable"] = False  # serial from now on
            self._serial(*args)


def team_loop(function: Callable[..., None]) -> TeamLoop:
    """Decorator: `function` (numba code with prange loops) as a TeamLoop."""
    return TeamLoop(function)
