"""The modelled task scheduler: stream order, core mapping, disabled cores, SDMA engines, priorities.

Everything here compares modelled device times from the task records (deterministic), never wall time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from cannrt.abi import CopyKind, SqeType, TaskRecord, TensorArg
from cannrt.config import ChipSpec, DeviceCosts, chip_preset
from cannrt.runtime import memory_ops
from cannrt.runtime.core import Runtime, tensor_arg

if TYPE_CHECKING:
    from conftest import Npu

COSTS = DeviceCosts()
US = 1000


def _by_stream(records: list[TaskRecord], stream_id: int, kind: SqeType | None = None) -> list[TaskRecord]:
    return [r for r in records if r.stream_id == stream_id and (kind is None or r.sqe_type == kind)]


def test_tasks_of_one_stream_run_one_after_another_in_submission_order(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    other = ctx.create_stream()
    buf = npu.malloc(1 << 20)
    event = ctx.create_event()
    npu.trace()
    for index in range(12):
        npu.spin(stream, (12 - index) * US, block_dim=1 + index % 5)  # later tasks are shorter
        if index % 4 == 0:
            memory_ops.memset(ctx, buf, 1 << 20, index, 1 << 20, stream)
            event.record(stream)
        npu.spin(other, 500)
    stream.synchronize()
    other.synchronize()
    records = _by_stream(npu.records(), stream.stream_id)
    assert [r.task_id for r in records] == list(range(len(records)))  # completed in submission order
    assert len(records) == stream.tail == 12 + 3 * 2
    for earlier, later in itertools.pairwise(records):
        assert later.start_ns >= earlier.end_ns


def test_kernels_of_different_streams_overlap_when_cores_are_free(npu: Npu) -> None:
    first, second = npu.stream(), npu.stream()
    npu.trace()
    npu.spin(first, 100 * US, block_dim=4)
    npu.spin(second, 100 * US, block_dim=4)
    npu.rt.synchronize_device(0)
    records = npu.records()
    (a,) = _by_stream(records, first.stream_id)
    (b,) = _by_stream(records, second.stream_id)
    assert b.start_ns < a.end_ns and a.start_ns < b.end_ns
    assert not set(a.cores) & set(b.cores)


def test_least_loaded_cores_first_then_the_lowest_id(npu: Npu) -> None:
    first, second, third = npu.stream(), npu.stream(), npu.stream()
    npu.trace()
    npu.spin(first, 10 * US, block_dim=4)
    npu.spin(second, 10 * US, block_dim=4)  # arrives while the first still runs
    first.synchronize()
    second.synchronize()
    npu.spin(third, 10 * US, block_dim=4)  # every core is idle again
    third.synchronize()
    a, b, c = [r for r in npu.records() if r.sqe_type == SqeType.KERNEL]
    assert a.cores == (0, 1, 2, 3)
    assert b.cores == (4, 5, 6, 7)  # the busy cores are skipped
    assert b.start_ns < a.end_ns  # they really overlapped
    assert c.cores == (8, 9, 10, 11)  # never-used cores are the least loaded


def test_more_blocks_than_cores_run_in_waves_on_every_core(npu: Npu) -> None:
    stream = npu.stream()
    npu.trace()
    npu.spin(stream, 10 * US, block_dim=48)
    stream.synchronize()
    (kernel,) = [r for r in npu.records() if r.sqe_type == SqeType.KERNEL]
    assert sorted(kernel.cores) == list(range(24))
    assert kernel.block_dim == 48
    # two waves: dispatch, first wave, second wave plus its block launch
    assert kernel.end_ns - kernel.start_ns == COSTS.dispatch_ns + 2 * 10 * US + COSTS.block_launch_ns


def test_a_kernel_waits_for_cores_held_by_another_stream(npu: Npu) -> None:
    busy, late = npu.stream(), npu.stream()
    npu.trace()
    npu.spin(busy, 100 * US, block_dim=24)
    npu.spin(late, 1 * US, block_dim=1)
    npu.rt.synchronize_device(0)
    records = npu.records()
    (whole,) = _by_stream(records, busy.stream_id)
    (small,) = _by_stream(records, late.stream_id)
    assert small.start_ns == whole.end_ns  # no preemption; it starts the instant cores free up


def test_disabled_cores_are_never_used_by_cube_or_vector_kernels(make_runtime: Callable[..., Runtime]) -> None:
    disabled = (0, 5, 23)
    rt = make_runtime(chip=ChipSpec(disabled_cores=disabled))
    ctx = rt.set_device(0)
    stream = ctx.create_stream()
    data = np.ones(1 << 20, dtype=np.float32)
    va = memory_ops.malloc(ctx, data.nbytes)
    memory_ops.memcpy(ctx, va, data.nbytes, data.ctypes.data, data.nbytes, 1)
    tensor = _tensor(va, data.shape)
    rt.driver.trace_start(0)
    for _ in range(3):
        rt.launch(stream, "spin", 30, [10 * US])  # cube cores, more blocks than enabled cores
        rt.launch(stream, "add", 48, [tensor, tensor, tensor])  # vector cores
    stream.synchronize()
    kernels = [r for r in rt.driver.trace_stop(0, rt.host_time_ns) if r.sqe_type == SqeType.KERNEL]
    cube = set().union(*(r.cores for r in kernels if r.name == "spin"))
    vector = set().union(*(r.cores for r in kernels if r.name == "add"))
    assert cube == set(range(24)) - set(disabled)
    per_core = 48 // 24  # two vector cores beside each cube core
    assert vector == {c * per_core + v for c in range(24) if c not in disabled for v in range(per_core)}


def test_copies_take_the_free_sdma_engines_and_queue_when_all_are_busy(npu: Npu) -> None:
    ctx = npu.ctx()
    size = 64 << 20
    pairs = [(npu.malloc(size), npu.malloc(size)) for _ in range(5)]
    streams = [ctx.create_stream() for _ in range(5)]
    npu.trace()
    for stream, (dst, src) in zip(streams, pairs, strict=True):
        memory_ops.memcpy_async(ctx, dst, size, src, size, CopyKind.DEVICE_TO_DEVICE, stream)
    npu.rt.synchronize_device(0)
    copies = sorted((r for r in npu.records() if r.sqe_type == SqeType.SDMA), key=lambda r: r.stream_id)
    assert [r.cores for r in copies[:4]] == [(0,), (1,), (2,), (3,)]
    assert copies[4].cores == (0,)
    assert copies[4].start_ns == copies[0].end_ns  # the fifth waits for the first engine
    assert all(r.start_ns < copies[0].end_ns for r in copies[:4])


def test_the_more_urgent_stream_is_dispatched_first_among_ready_tasks(npu: Npu) -> None:
    ctx = npu.ctx()
    hog = ctx.create_stream(priority=3)
    low = ctx.create_stream(priority=7)
    high = ctx.create_stream(priority=0)  # created last: a higher stream id than `low`
    npu.trace()
    npu.spin(hog, 1000 * US, block_dim=24)  # every core busy
    npu.spin(low, 10 * US, block_dim=24)  # submitted first...
    npu.spin(high, 10 * US, block_dim=24)  # ...but more urgent
    npu.rt.synchronize_device(0)
    records = npu.records()
    (held,) = _by_stream(records, hog.stream_id)
    (urgent,) = _by_stream(records, high.stream_id)
    (patient,) = _by_stream(records, low.stream_id)
    assert urgent.start_ns == held.end_ns  # both became ready at this instant
    assert patient.start_ns == urgent.end_ns


def test_equal_priorities_are_served_in_stream_order(npu: Npu) -> None:
    ctx = npu.ctx()
    hog, first, second = (ctx.create_stream(priority=2) for _ in range(3))
    npu.trace()
    npu.spin(hog, 1000 * US, block_dim=24)
    npu.spin(second, 10 * US, block_dim=24)
    npu.spin(first, 10 * US, block_dim=24)
    npu.rt.synchronize_device(0)
    records = npu.records()
    (a,) = _by_stream(records, first.stream_id)
    (b,) = _by_stream(records, second.stream_id)
    assert a.start_ns < b.start_ns


def _tensor(va: int, shape: tuple[int, ...]) -> TensorArg:
    return tensor_arg(va, 0, shape)


def test_a_submission_never_lands_in_the_modelled_past(npu: Npu) -> None:
    first, second = npu.stream(), npu.stream()
    npu.trace()
    npu.spin(first, 10_000 * US)
    first.synchronize()  # the host clock moves to the end of the spin
    waited_until = npu.now_ns
    npu.spin(second, 1 * US)  # an idle device: it could have run at time 0, but the host only sends it now
    submitted_at = npu.now_ns
    second.synchronize()
    (late,) = _by_stream(npu.records(), second.stream_id)
    assert waited_until < submitted_at == late.start_ns


def test_the_910b4_preset_maps_blocks_onto_its_20_cores(make_runtime: Callable[..., Runtime]) -> None:
    rt = make_runtime(chip=chip_preset("Ascend910B4"))
    ctx = rt.set_device(0)
    stream = ctx.create_stream()
    rt.driver.trace_start(0)
    rt.launch(stream, "spin", 24, [10 * US])
    stream.synchronize()
    (kernel,) = [r for r in rt.driver.trace_stop(0, rt.host_time_ns) if r.sqe_type == SqeType.KERNEL]
    assert sorted(kernel.cores) == list(range(20))
    assert kernel.end_ns - kernel.start_ns == COSTS.dispatch_ns + 2 * 10 * US + COSTS.block_launch_ns
