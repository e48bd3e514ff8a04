"""Events: CUDA-like `ex` events (record captures queued work, a wait takes the newest record at
call time, never recorded = complete, elapsed-time errors) and legacy binary events (a wait blocks
until a later record; reset is an async task on a stream)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from cannrt import CannError, CannTimeout, ErrorCode
from cannrt.abi import SqeType
from cannrt.runtime import memory_ops
from cannrt.runtime.core import Runtime
from cannrt.runtime.event import EVENT_SYNC

if TYPE_CHECKING:
    from conftest import Npu

MS = 1_000_000


# -- ex events -----------------------------------------------------------------------------------
def test_a_wait_captures_the_record_current_at_the_call_and_ignores_later_records(npu: Npu) -> None:
    ctx = npu.ctx()
    producer, consumer, unblocker = ctx.create_stream(), ctx.create_stream(), ctx.create_stream()
    event = ctx.create_event()
    gate = ctx.create_event(0, legacy=True)
    buf = npu.malloc(64)

    event.record(producer)  # record #1: nothing queued before it
    event.wait_on(consumer)  # captures record #1
    gate.wait_on(producer)  # the producer now blocks...
    event.record(producer)  # ...so record #2 cannot complete
    memory_ops.memset(ctx, buf, 64, 5, 64, consumer)

    consumer.synchronize(timeout_ms=10)  # would time out if the wait had taken record #2
    assert npu.read(buf, 64) == bytes([5]) * 64
    assert event.query() is False  # the newest record (#2) is still pending
    gate.record(unblocker)
    event.synchronize(timeout_ms=10)
    assert event.query() is True


def test_a_wait_orders_the_waiting_stream_after_the_recorded_work(npu: Npu) -> None:
    ctx = npu.ctx()
    producer, consumer = ctx.create_stream(), ctx.create_stream()
    event = ctx.create_event()
    npu.trace()
    npu.spin(producer, 2 * MS)
    event.record(producer)
    event.wait_on(consumer)
    npu.spin(producer, 5 * MS)  # queued after the record: not waited for
    npu.spin(consumer, 1 * MS)
    npu.rt.synchronize_device(0)
    records = npu.records()
    first, second = [r for r in records if r.stream_id == producer.stream_id and r.sqe_type == SqeType.KERNEL]
    (waiter,) = [r for r in records if r.stream_id == consumer.stream_id and r.sqe_type == SqeType.KERNEL]
    (record,) = [r for r in records if r.sqe_type == SqeType.EVENT_RECORD]
    assert waiter.start_ns >= record.end_ns >= first.end_ns
    assert waiter.start_ns < second.end_ns  # it did not wait for work queued after the record


def test_a_never_recorded_event_is_complete(npu: Npu) -> None:
    ctx = npu.ctx()
    event = ctx.create_event()
    assert event.query() is True
    before = npu.now_ns
    event.synchronize(timeout_ms=1)
    event.synchronize()
    assert npu.now_ns == before  # returns at once
    stream = ctx.create_stream()
    event.wait_on(stream)  # nothing to wait for: the stream is not blocked
    buf = npu.malloc(64)
    memory_ops.memset(ctx, buf, 64, 1, 64, stream)
    stream.synchronize(timeout_ms=10)
    assert npu.read(buf, 1) == b"\x01"


def test_re_recording_moves_the_event_to_the_newest_record(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    event = ctx.create_event()
    event.record(stream)
    stream.synchronize()
    first = event.timestamp_ns()
    npu.spin(stream, 3 * MS)
    event.record(stream)
    assert event.query() is False
    with pytest.raises(CannError) as info:
        event.timestamp_ns()
    assert info.value.code == ErrorCode.RT_EVENT_NOT_COMPLETE
    event.synchronize()
    assert event.timestamp_ns() - first >= 3 * MS


def test_synchronize_with_a_timeout_raises_507047(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    event = ctx.create_event()
    npu.spin(stream, 10 * MS)
    event.record(stream)
    start = npu.now_ns
    with pytest.raises(CannTimeout) as info:
        event.synchronize(timeout_ms=2)
    assert info.value.code == 507047 == ErrorCode.RT_EVENT_SYNC_TIMEOUT
    assert npu.now_ns == start + 2 * MS
    event.synchronize(timeout_ms=20)


def test_elapsed_time_is_the_difference_of_the_records_device_timestamps(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    start, end = ctx.create_event(), ctx.create_event()
    npu.trace()
    start.record(stream)
    npu.spin(stream, 4 * MS)
    end.record(stream)
    stream.synchronize()
    first, second = [r for r in npu.records() if r.sqe_type == SqeType.EVENT_RECORD]
    assert (start.timestamp_ns(), end.timestamp_ns()) == (first.end_ns, second.end_ns)
    assert start.elapsed_ms(end) == (second.end_ns - first.end_ns) / 1e6
    assert 4.0 < start.elapsed_ms(end) < 4.1
    assert end.elapsed_ms(start) == -start.elapsed_ms(end)


def test_elapsed_time_of_a_never_recorded_event_is_107017(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    recorded, never = ctx.create_event(), ctx.create_event()
    recorded.record(stream)
    stream.synchronize()
    for first, second in ((recorded, never), (never, recorded)):
        with pytest.raises(CannError) as info:
            first.elapsed_ms(second)
        assert info.value.code == 107017 == ErrorCode.RT_INVALID_HANDLE


def test_elapsed_time_with_an_incomplete_record_is_507006(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    start, end = ctx.create_event(), ctx.create_event()
    start.record(stream)
    npu.spin(stream, 10 * MS)
    end.record(stream)
    with pytest.raises(CannError) as info:
        start.elapsed_ms(end)
    assert info.value.code == 507006 == ErrorCode.RT_EVENT_NOT_COMPLETE
    stream.synchronize()
    assert start.elapsed_ms(end) > 10.0


def test_elapsed_time_of_an_event_created_without_timing_is_107006(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    timed, untimed = ctx.create_event(), ctx.create_event(EVENT_SYNC)
    timed.record(stream)
    untimed.record(stream)
    stream.synchronize()
    for first, second in ((timed, untimed), (untimed, timed)):
        with pytest.raises(CannError) as info:
            first.elapsed_ms(second)
        assert info.value.code == 107006 == ErrorCode.RT_EVENT_TIMESTAMP_INVALID


def test_a_destroyed_event_refuses_every_call_with_107017(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    event = ctx.create_event()
    event.destroy()
    for call in (
        lambda: event.record(stream),
        lambda: event.wait_on(stream),
        event.query,
        event.synchronize,
        event.destroy,
        lambda: event.reset(stream),
    ):
        with pytest.raises(CannError) as info:
            call()
        assert info.value.code == 107017
    assert stream.tail == 0  # nothing was enqueued


def test_an_event_cannot_be_used_with_a_stream_of_another_device(npu: Npu) -> None:
    event = npu.ctx(0).create_event()
    foreign = npu.ctx(1).create_stream()
    for call in (lambda: event.record(foreign), lambda: event.wait_on(foreign), lambda: event.reset(foreign)):
        with pytest.raises(CannError) as info:
            call()
        assert info.value.code == 107003 == ErrorCode.RT_STREAM_CONTEXT
    assert foreign.tail == 0


# -- legacy events -------------------------------------------------------------------------------
def test_a_legacy_wait_blocks_the_stream_until_a_later_record(npu: Npu) -> None:
    ctx = npu.ctx()
    waiter, recorder = ctx.create_stream(), ctx.create_stream()
    event = ctx.create_event(0, legacy=True)
    buf = npu.malloc(64)
    event.wait_on(waiter)  # never recorded: this is a real wait, unlike an ex event
    memory_ops.memset(ctx, buf, 64, 9, 64, waiter)
    with pytest.raises(CannTimeout) as info:
        waiter.synchronize(timeout_ms=5)
    assert info.value.code == 507046
    assert waiter.query() is False
    assert npu.read(buf, 64) == bytes(64)  # held for real as well
    npu.trace()
    npu.spin(recorder, 1 * MS)
    event.record(recorder)
    waiter.synchronize(timeout_ms=10)
    assert npu.read(buf, 64) == bytes([9]) * 64
    records = npu.records()
    (record,) = [r for r in records if r.sqe_type == SqeType.EVENT_RECORD]
    (wait,) = [r for r in records if r.sqe_type == SqeType.EVENT_WAIT]
    assert wait.end_ns > record.end_ns  # the wait finished only after the record


def test_a_recorded_legacy_event_stays_set_until_reset(npu: Npu) -> None:
    ctx = npu.ctx()
    first, second, recorder = ctx.create_stream(), ctx.create_stream(), ctx.create_stream()
    event = ctx.create_event(0, legacy=True)
    event.record(recorder)
    recorder.synchronize()
    event.wait_on(first)
    event.wait_on(second)  # a binary semaphore: both waits pass, the record is not consumed
    first.synchronize(timeout_ms=5)
    second.synchronize(timeout_ms=5)
    event.reset(recorder)
    event.wait_on(first)  # after the reset a wait blocks again
    with pytest.raises(CannTimeout):
        first.synchronize(timeout_ms=5)
    event.record(recorder)
    first.synchronize(timeout_ms=5)


def test_a_legacy_reset_is_a_task_that_runs_in_its_streams_order(npu: Npu) -> None:
    ctx = npu.ctx()
    resetter, waiter, other = ctx.create_stream(), ctx.create_stream(), ctx.create_stream()
    event = ctx.create_event(0, legacy=True)
    hold = ctx.create_event(0, legacy=True)
    event.record(resetter)
    hold.wait_on(resetter)
    event.reset(resetter)  # queued behind the held wait: it has not run yet
    assert resetter.tail == 3  # record, wait, reset: three tasks
    event.wait_on(waiter)
    waiter.synchronize(timeout_ms=5)  # the event is still set
    hold.record(other)
    resetter.synchronize(timeout_ms=5)  # now the reset ran
    event.wait_on(waiter)
    with pytest.raises(CannTimeout):
        waiter.synchronize(timeout_ms=5)
    event.record(other)
    waiter.synchronize(timeout_ms=5)


def test_a_legacy_reset_behind_a_kernel_does_not_overtake_an_earlier_wait(
    make_runtime: Callable[..., Runtime],
) -> None:
    rt = make_runtime(watchdog_s=2.0)
    ctx = rt.set_device(0)
    resetter, waiter = ctx.create_stream(), ctx.create_stream()
    event = ctx.create_event(0, legacy=True)
    buf = memory_ops.malloc(ctx, 64)
    event.record(resetter)
    rt.launch(resetter, "spin", 1, [1 * MS])
    event.reset(resetter)  # on the device this runs 1 ms later, after the wait below
    event.wait_on(waiter)
    memory_ops.memset(ctx, buf, 64, 7, 64, waiter)
    waiter.synchronize(timeout_ms=10)
    assert rt.driver.mem_read(ctx.asid, buf, 1) == b"\x07"


def test_legacy_events_have_timestamps_and_elapsed_time(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    start, end = ctx.create_event(0, legacy=True), ctx.create_event(0, legacy=True)
    start.record(stream)
    npu.spin(stream, 2 * MS)
    end.record(stream)
    stream.synchronize()
    assert 2.0 < start.elapsed_ms(end) < 2.1
