"""Determinism: the same single-threaded program gives the same device timestamps on every run,
whatever the wall-clock speed of the host (the modelled clock decides, not the machine)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import cannrt
from cannrt.abi import CopyKind
from cannrt.config import Settings
from cannrt.runtime import memory_ops
from cannrt.runtime.core import Runtime, tensor_arg

F16 = 1  # ACL dtype codes
F32 = 0


def _pipeline(rt: Runtime, pause: Callable[[], None]) -> dict[str, Any]:
    """Copies in, matmul + gelu + softmax on two compute streams, copies out, a peer copy and a
    host function; chained by events over three micro-batches. Returns everything timed."""
    ctx = rt.set_device(0)
    rt.set_device(1)
    rt.set_context(ctx)
    for dev in (0, 1):
        rt.driver.trace_start(dev)
    copy_in, copy_out = ctx.create_stream(priority=1), ctx.create_stream(priority=1)
    compute = [ctx.create_stream(priority=0), ctx.create_stream(priority=4)]
    rng = np.random.default_rng(7)
    n = 128
    weights = (0.1 * rng.standard_normal((n, n))).astype(np.float16)
    w = memory_ops.malloc(ctx, weights.nbytes)
    memory_ops.memcpy(ctx, w, weights.nbytes, weights.ctypes.data, weights.nbytes, CopyKind.HOST_TO_DEVICE)
    events: list[Any] = []
    hosts: list[np.ndarray] = []
    for batch in range(3):
        pause()
        x_host = (0.1 * rng.standard_normal((n, n))).astype(np.float16)
        out_host = np.empty((n, n), dtype=np.float32)
        hosts += [x_host, out_host]
        x, y, z = (memory_ops.malloc(ctx, n * n * 4) for _ in range(3))
        memory_ops.memcpy_async(
            ctx, x, x_host.nbytes, x_host.ctypes.data, x_host.nbytes, CopyKind.HOST_TO_DEVICE, copy_in
        )
        loaded = ctx.create_event()
        loaded.record(copy_in)
        stream = compute[batch % 2]
        loaded.wait_on(stream)
        pause()
        matmul_args = [tensor_arg(x, F16, (n, n)), tensor_arg(w, F16, (n, n)), tensor_arg(y, F32, (n, n))]
        rt.launch(stream, "matmul", 8, matmul_args)
        rt.launch(stream, "gelu", 4, [tensor_arg(y, F32, (n, n)), tensor_arg(y, F32, (n, n))])
        rt.launch(stream, "softmax", 4, [tensor_arg(y, F32, (n, n)), tensor_arg(z, F32, (n, n)), -1])
        computed = ctx.create_event()
        computed.record(stream)
        computed.wait_on(copy_out)
        memory_ops.memcpy_async(
            ctx, out_host.ctypes.data, out_host.nbytes, z, out_host.nbytes, CopyKind.DEVICE_TO_HOST, copy_out
        )
        done = ctx.create_event()
        done.record(copy_out)
        events += [loaded, computed, done]
    peer = memory_ops.malloc(rt.devices[1].default_context, n * n * 4)
    memory_ops.memcpy_async(ctx, peer, n * n * 4, w, weights.nbytes, CopyKind.DEVICE_TO_DEVICE, copy_out)
    rt.callbacks.launch_host_func(copy_out, lambda _: pause(), None)
    pause()
    rt.synchronize_device(0, timeout_ms=1000)
    records = [rt.driver.trace_stop(dev, rt.host_time_ns) for dev in (0, 1)]
    return {
        "records": [
            [(r.stream_id, r.task_id, r.name, r.start_ns, r.end_ns, r.cores, r.status) for r in rs] for rs in records
        ],
        "event timestamps": [e.timestamp_ns() for e in events],
        "elapsed": [events[0].elapsed_ms(e) for e in events],
        "host clock": rt.host_time_ns,
        "results": [h.tobytes() for h in hosts],
    }


def _run(pause: Callable[[], None]) -> dict[str, Any]:
    rt = cannrt.reset_runtime(Settings(device_count=2, watchdog_s=10.0))
    try:
        return _pipeline(rt, pause)
    finally:
        rt.close()


def test_two_runs_of_the_same_program_give_identical_device_timestamps() -> None:
    first = _run(lambda: None)
    stop = threading.Event()

    def burn() -> None:  # another thread competing for the interpreter in the second run
        while not stop.is_set():
            sum(range(1000))

    burner = threading.Thread(target=burn, daemon=True)
    burner.start()
    try:
        second = _run(lambda: time.sleep(0.003))  # and a slower host between calls
    finally:
        stop.set()
        burner.join(5)
    assert len(first["records"][0]) > 30 and first["records"][1] == []  # device 1 ran nothing
    assert first["records"] == second["records"]
    assert first["event timestamps"] == second["event timestamps"]
    assert first["elapsed"] == second["elapsed"]
    assert first["host clock"] == second["host clock"]
    assert first["results"] == second["results"]
