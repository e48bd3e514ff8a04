"""Host callbacks: launch_callback needs subscribe_report; process_report runs fn(args) on the
subscribed thread; BLOCK holds later tasks of the stream until fn returns, NO_BLOCK does not;
launch_host_func runs on the runtime's own thread and blocks its stream."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from cannrt import CannError, ErrorCode
from cannrt.abi import CopyKind, SqeType
from cannrt.config import HostCosts
from cannrt.runtime import memory_ops
from cannrt.runtime.core import Runtime

if TYPE_CHECKING:
    from conftest import Npu, ReportThread

BOUND_S = 5.0  # wall-clock bound on every wait for a host thread


class Gate:
    """A callback body that records where it ran and blocks until released (bounded)."""

    def __init__(self, npu: Npu, watch: int) -> None:
        self.npu = npu
        self.watch = watch  # device buffer whose first byte the callback looks at
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls: list[tuple[Any, int, bytes]] = []

    def __call__(self, args: Any) -> None:
        self.calls.append((args, threading.get_ident(), self.npu.read(self.watch, 1)))
        self.entered.set()
        assert self.release.wait(BOUND_S)


def test_launch_callback_needs_a_subscribed_report_thread(npu: Npu) -> None:
    stream = npu.stream()
    with pytest.raises(CannError) as info:
        npu.rt.callbacks.launch(stream, print, None, True)
    assert info.value.code == 107015 == ErrorCode.RT_STREAM_NO_CB_REG
    assert stream.tail == 0


def test_a_stream_can_be_subscribed_by_one_thread_only(npu: Npu) -> None:
    stream = npu.stream()
    npu.rt.callbacks.subscribe(threading.get_ident(), stream)
    with pytest.raises(CannError) as info:
        npu.rt.callbacks.subscribe(threading.get_ident() + 1, stream)
    assert info.value.code == 107011 == ErrorCode.RT_STREAM_SUBSCRIBE


def test_process_report_needs_a_subscription_and_times_out_without_reports(npu: Npu) -> None:
    with pytest.raises(CannError) as info:
        npu.rt.callbacks.process(1)
    assert info.value.code == 107012 == ErrorCode.RT_THREAD_SUBSCRIBE
    npu.rt.callbacks.subscribe(threading.get_ident(), npu.stream())
    with pytest.raises(CannError) as info:
        npu.rt.callbacks.process(1)
    assert info.value.code == 100036 == ErrorCode.WAIT_CALLBACK_TIMEOUT


def test_unsubscribe_ends_the_binding(npu: Npu) -> None:
    stream = npu.stream()
    me = threading.get_ident()
    with pytest.raises(CannError) as info:
        npu.rt.callbacks.unsubscribe(me, stream)
    assert info.value.code == 107015
    npu.rt.callbacks.subscribe(me, stream)
    npu.rt.callbacks.unsubscribe(me, stream)
    with pytest.raises(CannError) as info:
        npu.rt.callbacks.launch(stream, print, None, False)
    assert info.value.code == 107015


def test_process_report_runs_fn_with_its_args_on_the_subscribed_thread(npu: Npu, report_thread: ReportThread) -> None:
    stream = npu.stream()
    payload = {"answer": 42}
    ran: list[tuple[Any, int]] = []
    done = threading.Event()
    npu.rt.callbacks.subscribe(report_thread.ident, stream)
    npu.rt.callbacks.launch(stream, lambda args: (ran.append((args, threading.get_ident())), done.set()), payload, True)
    stream.synchronize(timeout_ms=100)
    assert done.wait(BOUND_S)
    assert ran == [(payload, report_thread.ident)]
    assert ran[0][0] is payload
    assert report_thread.errors == []


def test_one_thread_serves_callbacks_of_many_streams(npu: Npu, report_thread: ReportThread) -> None:
    streams = [npu.stream() for _ in range(3)]
    seen: list[tuple[int, int]] = []
    for stream in streams:
        npu.rt.callbacks.subscribe(report_thread.ident, stream)
    for index, stream in enumerate(streams):
        for n in range(2):
            npu.rt.callbacks.launch(stream, lambda a: seen.append((a, threading.get_ident())), index * 10 + n, True)
    npu.rt.synchronize_device(0, timeout_ms=100)
    assert sorted(seen) == [(v, report_thread.ident) for v in (0, 1, 10, 11, 20, 21)]
    for index in range(3):  # each stream's callbacks ran in its order
        mine = [v for v, _ in seen if v // 10 == index]
        assert mine == [index * 10, index * 10 + 1]


def test_a_blocking_callback_holds_later_tasks_of_its_stream_until_fn_returns(
    npu: Npu, report_thread: ReportThread
) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    buf = npu.malloc(64)
    gate = Gate(npu, buf)
    npu.rt.callbacks.subscribe(report_thread.ident, stream)
    npu.trace()
    npu.rt.callbacks.launch(stream, gate, "blocking", True)
    memory_ops.memset(ctx, buf, 64, 7, 64, stream)
    try:
        assert gate.entered.wait(BOUND_S)
        assert npu.read(buf, 1) == b"\x00"  # fn is running: the memset behind it waits
    finally:
        gate.release.set()
    stream.synchronize(timeout_ms=100)
    assert npu.read(buf, 64) == bytes([7]) * 64
    assert gate.calls == [("blocking", report_thread.ident, b"\x00")]
    records = npu.records()
    (callback,) = [r for r in records if r.sqe_type == SqeType.PLACE_HOLDER]
    (memset,) = [r for r in records if r.sqe_type == SqeType.SDMA]
    assert memset.start_ns >= callback.end_ns


def test_a_non_blocking_callback_does_not_hold_later_tasks(npu: Npu, report_thread: ReportThread) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    buf = npu.malloc(64)
    gate = Gate(npu, buf)
    npu.rt.callbacks.subscribe(report_thread.ident, stream)
    npu.rt.callbacks.launch(stream, gate, "free", False)
    memory_ops.memset(ctx, buf, 64, 7, 64, stream)
    try:
        assert gate.entered.wait(BOUND_S)
        stream.synchronize(timeout_ms=100)  # completes while fn is still blocked
        assert npu.read(buf, 64) == bytes([7]) * 64
        assert not gate.release.is_set()
    finally:
        gate.release.set()


def test_an_exception_in_a_callback_is_kept_and_the_stream_continues(npu: Npu, report_thread: ReportThread) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    buf = npu.malloc(64)
    npu.rt.callbacks.subscribe(report_thread.ident, stream)

    def broken(args: Any) -> None:
        raise RuntimeError("callback bug")

    npu.rt.callbacks.launch(stream, broken, None, True)
    memory_ops.memset(ctx, buf, 64, 3, 64, stream)
    stream.synchronize(timeout_ms=100)
    assert npu.read(buf, 1) == b"\x03"
    assert [str(e) for e in npu.rt.callbacks.errors] == ["callback bug"]


def test_launch_host_func_runs_on_a_runtime_thread_before_later_tasks_of_the_stream(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    host = npu.rt.host.allocate(64)
    buf = npu.malloc(64)
    threads: list[int] = []

    def fill(value: int) -> None:
        ctypes.memset(host, value, 64)
        threads.append(threading.get_ident())

    npu.rt.callbacks.launch_host_func(stream, fill, 42)
    memory_ops.memcpy_async(ctx, buf, 64, host, 64, CopyKind.HOST_TO_DEVICE, stream)  # reads what fill wrote
    stream.synchronize(timeout_ms=100)
    assert npu.read(buf, 64) == bytes([42]) * 64
    assert len(threads) == 1 and threads[0] != threading.get_ident()


def test_host_funcs_of_one_stream_run_in_order(npu: Npu) -> None:
    stream = npu.stream()
    order: list[int] = []
    for index in range(5):
        npu.rt.callbacks.launch_host_func(stream, order.append, index)
    stream.synchronize(timeout_ms=100)
    assert order == [0, 1, 2, 3, 4]


def test_an_unprocessed_blocking_callback_does_not_hold_other_streams(make_runtime: Callable[..., Runtime]) -> None:
    rt = make_runtime(watchdog_s=2.0)
    ctx = rt.set_device(0)
    with_callback, independent = ctx.create_stream(), ctx.create_stream()
    ran: list[str] = []
    rt.callbacks.subscribe(threading.get_ident(), with_callback)  # this thread processes reports later
    rt.callbacks.launch(with_callback, ran.append, "cb", True)
    rt.launch(independent, "spin", 1, [1_000_000])
    try:
        independent.synchronize(timeout_ms=100)  # no dependency on the callback
    finally:
        rt.callbacks.process(1000)
    with_callback.synchronize(timeout_ms=100)
    assert ran == ["cb"]


def test_a_timed_out_synchronize_leaves_a_blocking_callback_stream_usable(
    make_runtime: Callable[..., Runtime],
) -> None:
    rt = make_runtime(watchdog_s=2.0)
    ctx = rt.set_device(0)
    stream = ctx.create_stream()
    buf = memory_ops.malloc(ctx, 64)
    ran: list[str] = []
    rt.callbacks.subscribe(threading.get_ident(), stream)
    rt.callbacks.launch(stream, ran.append, "cb", True)
    memory_ops.memset(ctx, buf, 64, 7, 64, stream)
    with pytest.raises(CannError) as info:
        stream.synchronize(timeout_ms=1)  # the callback has not been processed yet
    assert info.value.code == 507046
    rt.callbacks.process(1000)
    stream.synchronize(timeout_ms=100)
    assert ran == ["cb"]
    assert rt.driver.mem_read(ctx.asid, buf, 1) == b"\x07"


def test_query_and_a_timed_out_synchronize_do_not_wait_for_an_unprocessed_callback(
    make_runtime: Callable[..., Runtime],
) -> None:
    rt = make_runtime(watchdog_s=2.0)
    ctx = rt.set_device(0)
    stream, other = ctx.create_stream(), ctx.create_stream()
    rt.callbacks.subscribe(threading.get_ident(), stream)
    rt.callbacks.launch(stream, lambda _: None, None, True)
    rt.launch(other, "spin", 1, [1_000_000])
    other.synchronize(timeout_ms=100)  # the host clock is now well past the callback's report
    assert stream.query() is False
    start = rt.host_time_ns
    with pytest.raises(CannError) as info:
        stream.synchronize(timeout_ms=1)
    assert info.value.code == 507046
    assert rt.host_time_ns == start + HostCosts().sync_ns + 1_000_000  # judged on the modelled clock
    rt.callbacks.process(1000)
    stream.synchronize(timeout_ms=100)
    assert stream.query() is True
