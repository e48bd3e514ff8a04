"""Streams: create with priority (clamped), destroy waits vs destroy(force) discards, synchronize
with a modelled timeout (507046), query, synchronize_device."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cannrt import CannError, CannTimeout, ErrorCode
from cannrt.abi import SqeType
from cannrt.config import DeviceCosts, HostCosts
from cannrt.runtime import memory_ops

if TYPE_CHECKING:
    from conftest import Npu

MS = 1_000_000
US = 1_000


@pytest.mark.parametrize(("asked", "effective"), [(-5, 0), (0, 0), (3, 3), (7, 7), (99, 7)])
def test_priorities_outside_0_to_7_clamp(npu: Npu, asked: int, effective: int) -> None:
    assert npu.ctx().create_stream(priority=asked).priority == effective


def test_a_clamped_priority_schedules_like_the_bound_it_was_clamped_to(npu: Npu) -> None:
    ctx = npu.ctx()
    hog = ctx.create_stream(priority=3)
    middling = ctx.create_stream(priority=1)
    urgent = ctx.create_stream(priority=-40)  # clamps to 0: more urgent than 1 despite its later id
    npu.trace()
    npu.spin(hog, 1 * MS, block_dim=24)
    npu.spin(middling, 10 * US, block_dim=24)
    npu.spin(urgent, 10 * US, block_dim=24)
    npu.rt.synchronize_device(0)
    starts = {r.stream_id: r.start_ns for r in npu.records() if r.sqe_type == SqeType.KERNEL}
    assert starts[urgent.stream_id] < starts[middling.stream_id]


def test_every_stream_gets_its_own_id_and_the_context_has_one_default_stream(npu: Npu) -> None:
    ctx = npu.ctx()
    streams = [ctx.create_stream() for _ in range(5)]
    ids = {s.stream_id for s in streams} | {ctx.default_stream.stream_id}
    assert len(ids) == 6
    assert ctx.default_stream.is_default and not any(s.is_default for s in streams)
    assert npu.ctx() is ctx and ctx.default_stream is npu.rt.set_device(0).default_stream


def test_the_default_stream_cannot_be_destroyed(npu: Npu) -> None:
    with pytest.raises(CannError) as info:
        npu.ctx().default_stream.destroy()
    assert info.value.code == ErrorCode.RT_PARAM_INVALID


def test_query_is_false_until_the_work_completes_on_the_modelled_clock(npu: Npu) -> None:
    stream = npu.stream()
    npu.spin(stream, 1 * MS)
    assert stream.query() is False
    stream.synchronize()
    assert stream.query() is True


def test_polling_query_reaches_completion_in_a_bounded_number_of_calls(npu: Npu) -> None:
    stream = npu.stream()
    npu.spin(stream, 50 * MS)
    polls = 0
    while not stream.query():
        polls += 1
        assert polls < 200
    assert npu.now_ns >= 50 * MS


def test_synchronize_with_a_timeout_raises_507046_at_the_modelled_deadline(npu: Npu) -> None:
    stream = npu.stream()
    npu.spin(stream, 10 * MS)
    npu.spin(stream, 10 * MS)
    start = npu.now_ns
    with pytest.raises(CannTimeout) as info:
        stream.synchronize(timeout_ms=1)
    assert info.value.code == 507046 == ErrorCode.RT_STREAM_SYNC_TIMEOUT
    assert info.value.pending == 2
    assert npu.now_ns == start + HostCosts().sync_ns + 1 * MS  # the host clock sits at the deadline
    stream.synchronize(timeout_ms=100)  # long enough now
    assert stream.query()


def test_synchronize_without_a_timeout_moves_the_host_clock_to_the_completion(npu: Npu) -> None:
    stream = npu.stream()
    npu.trace()
    npu.spin(stream, 3 * MS)
    stream.synchronize()
    (record,) = [r for r in npu.records() if r.sqe_type == SqeType.KERNEL]
    assert npu.now_ns == record.end_ns
    assert record.end_ns - record.start_ns == 3 * MS + DeviceCosts().dispatch_ns


def test_destroy_waits_for_the_streams_pending_tasks(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    buf = npu.malloc(64)
    npu.spin(stream, 5 * MS)
    memory_ops.memset(ctx, buf, 64, 7, 64, stream)
    stream.destroy()
    assert npu.now_ns >= 5 * MS  # the host waited for the modelled work
    assert npu.read(buf, 64) == bytes([7]) * 64


def test_destroy_force_discards_tasks_that_have_not_run(npu: Npu) -> None:
    ctx = npu.ctx()
    stream, other = ctx.create_stream(), ctx.create_stream()
    gate = ctx.create_event(0, legacy=True)
    buf = npu.malloc(64)
    gate.wait_on(stream)  # nothing can pass this until the gate is recorded
    memory_ops.memset(ctx, buf, 64, 7, 64, stream)
    stream.destroy(force=True)
    gate.record(other)
    npu.rt.synchronize_device(0, timeout_ms=100)
    assert npu.read(buf, 64) == bytes(64)  # the memset behind the wait was dropped


def test_a_destroyed_stream_refuses_every_call_with_107017(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    stream.destroy()
    event = ctx.create_event()
    buf = npu.malloc(64)
    calls = [
        lambda: npu.spin(stream, 1),
        lambda: stream.synchronize(),
        lambda: stream.query(),
        lambda: stream.destroy(),
        lambda: event.record(stream),
        lambda: memory_ops.memset(ctx, buf, 64, 0, 64, stream),
    ]
    for call in calls:
        with pytest.raises(CannError) as info:
            call()
        assert info.value.code == ErrorCode.RT_INVALID_HANDLE == 107017


def test_synchronize_device_waits_for_every_stream(npu: Npu) -> None:
    ctx = npu.ctx()
    streams = [ctx.create_stream() for _ in range(4)]
    for index, stream in enumerate(streams):
        npu.spin(stream, (index + 1) * MS)
    npu.rt.synchronize_device(0)
    assert all(s.query() for s in streams)
    assert npu.now_ns >= 4 * MS


def test_synchronize_device_with_a_timeout_raises_507046(npu: Npu) -> None:
    npu.spin(npu.stream(), 10 * MS)
    with pytest.raises(CannError) as info:
        npu.rt.synchronize_device(0, timeout_ms=2)
    assert info.value.code == 507046


def test_the_default_stream_does_not_wait_for_created_streams(npu: Npu) -> None:
    ctx = npu.ctx()
    busy = ctx.create_stream()
    gate = ctx.create_event(0, legacy=True)
    gate.wait_on(busy)  # blocked until the end of the test
    buf = npu.malloc(64)
    memory_ops.memset(ctx, buf, 64, 3, 64, ctx.default_stream)
    ctx.default_stream.synchronize(timeout_ms=10)  # non-blocking streams: no implicit sync
    assert npu.read(buf, 64) == bytes([3]) * 64
    gate.record(ctx.default_stream)
    busy.synchronize(timeout_ms=10)
