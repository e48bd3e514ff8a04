"""A host thread that waits for real results runs them itself: the results and the modelled
times do not depend on which thread ran the work."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import cannrt
from cannrt.runtime.core import Runtime


def _run(make_runtime: Callable[..., Runtime], stop_worker: bool) -> tuple[list[float], list[tuple[int, int]]]:
    rt = make_runtime()
    device = cannrt.Device(0)
    if stop_worker:  # only the waiting host thread can run anything now
        rt.driver._devices[0].executor.stop()
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
