"""Hostile values where they enter (issue 13, items 5, 6, 7, 10): a CannError with the numbers, or a
TypeError for a wrong Python type; nothing overflows below, and the device keeps working."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import cannrt.acl as acl
from cannrt import CannError, Device, Kernel, Work, register_kernel
from cannrt.runtime.core import Runtime


def code_of(call: Callable[[], Any]) -> int:
    with pytest.raises(CannError) as info:
        call()
    return info.value.code


@pytest.mark.parametrize("shape", [(2**62 + 4, 4), (2**70,), (2**31, 2**31, 2**2), (-1, 4), (4, -2)])
def test_shapes_past_int64_or_negative_are_107000(rt: Runtime, shape: tuple[int, ...]) -> None:
    dev = Device(0)
    assert code_of(lambda: dev.empty(shape)) == 107000
    assert code_of(lambda: dev.empty(shape, np.int8)) == 107000


@pytest.mark.parametrize("shape", ["abc", (1.5, 2), (True, 2), None, [[2]]])
def test_shapes_that_are_not_integers_are_type_errors(rt: Runtime, shape: Any) -> None:
    with pytest.raises(TypeError):
        Device(0).empty(shape)


def test_the_largest_shape_that_fits_int64_reaches_the_allocator(rt: Runtime) -> None:
    """2**60 fp32 elements is 2**62 bytes: a valid size, so the answer is out of memory."""
    assert code_of(lambda: Device(0).empty((2**60,))) == 207001


def test_tensor_descriptions_past_int64_are_refused(rt: Runtime) -> None:
    acl.init()
    try:
        assert acl.create_tensor_desc(0, [2**62 + 4, 4], 2) == 0
        assert acl.create_tensor_desc(0, [2**70], 2) == 0
        desc = acl.create_tensor_desc(0, [2**30, 4], 2)
        assert acl.get_tensor_desc_size(desc) == 2**34
        acl.destroy_tensor_desc(desc)
    finally:
        acl.finalize()


def test_scalars_past_int64_are_107000_and_nothing_is_queued(rt: Runtime) -> None:
    stream = Device(0).stream()
    for value in (2**63, -(2**63) - 1, 2**70):
        assert code_of(lambda v=value: stream.launch("spin", v)) == 107000
    assert stream._rt.tail == 0
    stream.launch("spin", 2**63 - 1 - 2**62)  # fits the block; too long for the clock: fails on the device
    assert code_of(stream.synchronize) == 507014


def test_modelled_time_that_would_leave_the_clocks_range_fails_and_a_reset_recovers(rt: Runtime) -> None:
    """Five spins of 10**18 ns each fail on the device (507014) instead of wedging the clock."""
    dev = Device(0)
    stream = dev.stream()
    for _ in range(5):
        stream.launch("spin", 10**18)
    assert code_of(stream.synchronize) == 507014
    assert rt.host_time_ns < 2**61
    dev.reset()
    dev = Device(0)
    stream = dev.stream()
    data = dev.array(np.ones(8, np.float32))
    stream.launch("add", data, data, data)
    assert (data.to_numpy(stream) == 2).all()
    other = Device(1).stream()
    other.launch("spin", 1000)
    other.synchronize()


@pytest.mark.parametrize("timeout", [math.nan, 2**31, 1e300])
def test_timeouts_that_are_nan_or_past_int32_ms_are_107000(rt: Runtime, timeout: float) -> None:
    dev = Device(0)
    stream = dev.stream()
    event = stream.record()
    for call in (stream.synchronize, event.synchronize, dev.synchronize):
        assert code_of(lambda c=call: c(timeout)) == 107000


@pytest.mark.parametrize("timeout", ["1", True, [1]])
def test_timeouts_that_are_not_numbers_are_type_errors(rt: Runtime, timeout: Any) -> None:
    with pytest.raises(TypeError):
        Device(0).stream().synchronize(timeout)


def test_an_infinite_timeout_waits_without_a_bound(rt: Runtime) -> None:
    stream = Device(0).stream()
    stream.launch("spin", 10**9)
    stream.synchronize(math.inf)
    stream.synchronize(-1)


@pytest.mark.parametrize("flags", [-5, 2**40, 4])
def test_unknown_stream_flags_are_107000(rt: Runtime, flags: int) -> None:
    assert code_of(lambda: Device(0).stream(0, flags)) == 107000


@pytest.mark.parametrize("bad", ["x", 1.0, None])
def test_stream_flags_and_priorities_that_are_not_integers_are_type_errors(rt: Runtime, bad: Any) -> None:
    with pytest.raises(TypeError):
        Device(0).stream(0, bad)
    with pytest.raises(TypeError):
        Device(0).stream(bad)


def test_wrong_python_types_for_events_and_host_arrays_are_type_errors(rt: Runtime) -> None:
    dev = Device(0)
    stream = dev.stream()
    array = dev.empty(4)
    for call in (
        lambda: stream.wait(None),  # type: ignore[arg-type]
        lambda: stream.record("x"),  # type: ignore[arg-type]
        lambda: array.copy_to([0] * 4, stream),  # type: ignore[arg-type]
        lambda: stream.launch_host_func(5),
    ):
        with pytest.raises(TypeError):
            call()
    assert code_of(lambda: array.copy_from("abc")) == 107000  # type: ignore[arg-type]
    assert code_of(lambda: array.copy_to(np.empty(4, np.float32)[::-1], stream)) == 107000
    stream.synchronize()


def test_a_user_kernel_whose_work_model_or_check_raises_fails_as_a_kernel(rt: Runtime) -> None:
    def broken_work(specs: Any) -> Work:
        raise RuntimeError("work model bug")

    def broken_check(specs: Any) -> None:
        raise RuntimeError("check bug")

    register_kernel(Kernel("test_bad_work", lambda out: None, broken_work, lambda s: None, (0,)), replace=True)
    register_kernel(Kernel("test_bad_check", lambda out: None, lambda s: Work(), broken_check, (0,)), replace=True)
    dev = Device(0)
    stream = dev.stream()
    out = dev.empty(4)
    assert code_of(lambda: stream.launch("test_bad_check", out)) == 107000
    stream.launch("test_bad_work", out)
    assert code_of(stream.synchronize) == 507015
    dev.reset()
    stream = Device(0).stream()
    stream.launch("nop")
    stream.synchronize()


def test_a_reset_while_a_host_function_runs_leaves_the_host_function_thread_serving(rt: Runtime) -> None:
    dev = Device(0)
    stream = dev.stream()
    entered, release = threading.Event(), threading.Event()

    def slow(_: object) -> None:
        entered.set()
        release.wait(5)

    stream.launch_host_func(slow)
    assert entered.wait(5)
    dev.reset()
    release.set()
    stream = Device(0).stream()
    ran: list[int] = []
    stream.launch_host_func(ran.append, 1)
    stream.synchronize()
    assert ran == [1]
    assert rt.callbacks.errors == []


def test_after_a_device_fault_the_pool_refuses_too_until_a_reset(rt: Runtime) -> None:
    """Device.empty served from the pool's cache answers the sticky error like every other call."""
    dev = Device(0)
    stream = dev.stream()
    cached = dev.empty(16)
    cached.free()  # its block stays in the pool's cache
    small, out = dev.empty(16), dev.empty(1024)
    overrun = type(small)(dev, small.address, (1024,), np.dtype(np.float32), owned=False)
    stream.launch("relu", overrun, out)
    with pytest.raises(CannError) as fault:
        stream.synchronize()
    assert code_of(lambda: dev.empty(16)) == fault.value.code
    dev.reset()
    Device(0).empty(16)
