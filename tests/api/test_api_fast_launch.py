"""Repeated parameterless launches take a prepared path (SQE packed in advance); whatever could
change what the launch sends sends it back through the full, checked path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import cannrt
from cannrt import CannError, Device, ErrorCode, Kernel, Work, register_kernel
from cannrt.abi import SqeType
from cannrt.kernels.registry import ArgSpecs
from cannrt.runtime.core import Runtime

LOG: list[str] = []


def _no_args(specs: ArgSpecs) -> None:
    if specs:
        raise cannrt.KernelArgumentError("test_tick takes no arguments")


def _work(specs: ArgSpecs) -> Work:
    return Work(fixed_ns=1_000)


def _tick_kernel(label: str) -> Kernel:
    return Kernel("test_tick", lambda: LOG.append(label), _work, _no_args, outputs=())


@pytest.fixture(autouse=True)
def _tick() -> None:
    LOG.clear()
    register_kernel(_tick_kernel("a"), replace=True)


def test_launches_of_a_replaced_kernel_run_the_new_body(rt: Runtime) -> None:
    stream = Device(0).stream()
    stream.launch("test_tick")
    stream.launch("test_tick")
    register_kernel(_tick_kernel("b"), replace=True)
    stream.launch("test_tick")
    stream.synchronize()
    assert LOG == ["a", "a", "b"]


def test_task_ids_and_block_dims_of_prepared_launches_are_exact(rt: Runtime) -> None:
    device = Device(0)
    stream = device.stream()
    with cannrt.profile() as prof:
        for block_dim in (1, 1, 1, 4, 4, 1):
            stream.launch("test_tick", block_dim=block_dim)
        stream.synchronize()
    kernels = [r for r in prof.records if r.sqe_type == SqeType.KERNEL]
    assert [r.block_dim for r in kernels] == [1, 1, 1, 4, 4, 1]
    assert [r.task_id for r in kernels] == list(range(kernels[0].task_id, kernels[0].task_id + 6))
    assert LOG == ["a"] * 6


def test_a_dump_started_after_prepared_launches_still_sees_them(rt: Runtime, tmp_path: Path) -> None:
    device = Device(0)
    stream = device.stream()
    x = device.array(np.ones(8, np.float32))
    y = device.empty(8, np.float32)
    stream.launch("test_tick")
    stream.launch("test_tick")
    with cannrt.dump(tmp_path) as result:
        stream.launch("test_tick")
        stream.launch("relu", x, y)
        stream.launch("test_tick", name="second")
        stream.launch("test_tick", name="third")
        stream.synchronize()
    names = sorted((f.name.split(".")[1], int(f.name.split(".")[3])) for f in result.files)
    assert [n for n, _ in names] == ["relu", "second", "test_tick", "third"]
    assert sorted(task for _, task in names) == [2, 3, 4, 5]  # each dump names its own task


def test_a_destroyed_stream_refuses_a_prepared_launch(rt: Runtime) -> None:
    stream = Device(0).stream()
    stream.launch("test_tick")
    stream.launch("test_tick")
    stream.destroy()
    with pytest.raises(CannError) as info:
        stream.launch("test_tick")
    assert info.value.code == ErrorCode.RT_INVALID_HANDLE
    assert LOG == ["a", "a"]


def _kernel_timings(make_runtime: Callable[..., Runtime], prepared: bool) -> list[tuple[int, ...]]:
    runtime = make_runtime()
    device = Device(0)
    stream = device.stream()
    with cannrt.profile() as prof:
        for block_dim in (1, 1, 2, 2, 1, 1, 1):
            if prepared:
                stream.launch("test_tick", block_dim=block_dim)
            else:  # the checked path every time
                runtime.launch(stream._rt, "test_tick", block_dim, ())
                stream._rt.launcher.clear()
        stream.synchronize()
    return [(r.task_id, r.block_dim, r.arrival_ns, r.start_ns, r.end_ns, *r.cores) for r in prof.records]


def test_prepared_launches_are_timed_exactly_like_checked_ones(make_runtime: Callable[..., Runtime]) -> None:
    timings = _kernel_timings(make_runtime, True)
    assert len(timings) == 7
    assert timings == _kernel_timings(make_runtime, False)
