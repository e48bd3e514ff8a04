"""A host thread that waits for real results runs them itself: the results and the modelled
times do not depend on which thread ran the work, and the device's worker, which runs work while
the host is busy, steps aside once a host thread waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

import cannrt
from cannrt import Kernel, Work, register_kernel
from cannrt.runtime.core import Runtime

GATE_S = 5.0


def _run(make_runtime: Callable[..., Runtime], stop_worker: bool) -> tuple[list[float], list[tuple[int, int]]]:
    rt = make_runtime()
    device = cannrt.Device(0)
    if stop_worker:  # only the waiting host thread can run anything now
        rt.driver._npu(0).executor.stop()
    stream = device.stream()
    x = device.array(np.arange(16, dtype=np.float32))
    y = device.empty(16, np.float32)
    with cannrt.profile() as prof:
        for _ in range(3):
            stream.launch("add", x, x, y)
            stream.launch("relu", y, x)
        result = x.to_numpy(stream)
    return result.tolist(), [(r.start_ns, r.end_ns) for r in prof.records]


def test_a_synchronize_completes_with_the_device_worker_stopped(make_runtime: Callable[..., Runtime]) -> None:
    values, _ = _run(make_runtime, stop_worker=True)
    assert values == (np.arange(16, dtype=np.float32) * 8).tolist()


def test_the_modelled_times_are_the_same_whichever_thread_ran_the_work(make_runtime: Callable[..., Runtime]) -> None:
    assert _run(make_runtime, stop_worker=True) == _run(make_runtime, stop_worker=False)


def test_the_worker_steps_aside_for_a_host_thread_that_waits(make_runtime: Callable[..., Runtime]) -> None:
    """The host stops submitting: the worker starts the work. Once the host waits for a result,
    the worker finishes the kernel it runs and leaves the rest to the waiting thread (it runs
    them without a hand-off per kernel, and the worker's kernels start no thread team)."""
    runtime = make_runtime(watchdog_s=10.0)
    ran_on: list[str] = []
    entered, opened = threading.Event(), threading.Event()

    def compute(out: np.ndarray) -> None:
        ran_on.append(threading.current_thread().name)
        if len(ran_on) == 1:  # the first holds the worker until the host waits
            entered.set()
            assert opened.wait(GATE_S), "never opened"
        out[...] += 1

    register_kernel(Kernel("test_where", compute, lambda s: Work(), lambda s: None, outputs=(0,)), replace=True)
    device = cannrt.Device(0)
    stream = device.stream()
    sync = runtime.driver._npu(0).sync
    out = device.array(np.zeros(16, np.float32))
    for _ in range(4):
        stream.launch("test_where", out)
    assert entered.wait(GATE_S)  # the host submits nothing more: the worker took the first

    def open_once_the_host_waits() -> None:
        limit = time.monotonic() + GATE_S
        while sync.awaited is None and time.monotonic() < limit:
            time.sleep(0.001)
        opened.set()

    opener = threading.Thread(target=open_once_the_host_waits, daemon=True)
    opener.start()
    stream.synchronize()
    opener.join(GATE_S)
    assert ran_on == ["npu0-worker", "MainThread", "MainThread", "MainThread"]
    assert (out.to_numpy(stream) == 4).all()
