"""The Pythonic API: DeviceArray to and from numpy, Stream as a context manager, events."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import cannrt
from cannrt import CannError, CannTimeout, Device, DeviceArray, ErrorCode, current_stream
from cannrt.dtypes import ACL_TO_NUMPY
from cannrt.runtime.core import Runtime

DTYPES = [ACL_TO_NUMPY[code] for code in sorted(ACL_TO_NUMPY)]


def _sample(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(3)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    return (rng.standard_normal(shape) * 50).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_an_array_goes_to_the_device_and_back_unchanged(rt: Runtime, dtype: np.dtype) -> None:
    device = Device(0)
    host = _sample(dtype, (3, 5, 7))
    array = device.array(host)
    assert (array.shape, array.dtype, array.size, array.nbytes) == ((3, 5, 7), dtype, 105, host.nbytes)
    back = array.to_numpy()
    assert back.dtype == dtype and back.shape == host.shape
    assert back.tobytes() == host.tobytes()
    stream = device.stream()
    assert array.to_numpy(stream).tobytes() == host.tobytes()  # through a stream, then synchronised


def test_array_converts_lists_and_non_contiguous_input(rt: Runtime) -> None:
    device = Device(0)
    assert device.array([[1, 2], [3, 4]], dtype=np.int16).to_numpy().tolist() == [[1, 2], [3, 4]]
    strided = np.arange(20, dtype=np.float32).reshape(4, 5)[:, ::2]
    assert np.array_equal(device.array(strided).to_numpy(), strided)


def test_an_async_upload_is_ordered_on_its_stream(rt: Runtime) -> None:
    device = Device(0)
    stream = device.stream()
    host = np.arange(1000, dtype=np.float64)
    array = device.array(host, stream=stream)
    del host  # the runtime keeps the source alive until the copy ran
    out = np.empty(1000, dtype=np.float64)
    array.copy_to(out, stream)
    stream.synchronize()
    assert np.array_equal(out, np.arange(1000, dtype=np.float64))


def test_empty_arrays_read_as_zero_and_zero_sized_arrays_work(rt: Runtime) -> None:
    device = Device(0)
    assert np.array_equal(device.empty((2, 3), np.int32).to_numpy(), np.zeros((2, 3), np.int32))
    assert device.empty(0).to_numpy().shape == (0,)
    assert device.array(np.zeros((0, 3))).to_numpy().shape == (0, 3)


def test_a_zero_dimensional_array_keeps_its_shape(rt: Runtime) -> None:
    back = Device(0).array(np.float32(3.5)).to_numpy()
    assert back.shape == () and back == np.float32(3.5)


def test_copies_between_arrays_and_numpy_check_sizes(rt: Runtime) -> None:
    device = Device(0)
    array = device.empty((4,), np.float32)
    stream = device.stream()
    with pytest.raises(CannError) as info:
        array.copy_from(np.zeros(5, np.float32))
    assert info.value.code == ErrorCode.RT_PARAM_INVALID
    for bad in (np.zeros(5, np.float32), np.zeros(8, np.float32)[::2]):
        with pytest.raises(CannError) as info:
            array.copy_to(bad, stream)
        assert info.value.code == ErrorCode.RT_PARAM_INVALID


def test_a_freed_array_cannot_be_used(rt: Runtime) -> None:
    device = Device(0)
    array = device.array(np.ones(4, np.float32))
    free_before = device.mem_info()[0]
    array.free()
    assert device.mem_info()[0] == free_before  # cached by the pool, as PyTorch's allocator does
    assert device.memory_stats()["allocated_bytes.all.current"] == 0
    device.empty_cache()
    assert device.mem_info()[0] > free_before
    array.free()  # freeing twice is harmless
    for call in (array.to_numpy, lambda: array.copy_from(np.ones(4, np.float32))):
        with pytest.raises(CannError) as info:
            call()
        assert info.value.code == ErrorCode.RT_PARAM_INVALID


def test_device_count_and_name(rt: Runtime) -> None:
    assert cannrt.device_count() == 2
    assert Device(1).name == "Ascend910B1"
    with pytest.raises(CannError) as info:
        Device(2)
    assert info.value.code == 107001


# -- streams as context managers --------------------------------------------------------------------
def test_with_stream_makes_it_current_for_its_device_and_thread(rt: Runtime) -> None:
    dev0, dev1 = Device(0), Device(1)
    outer, inner, other_device = dev0.stream(), dev0.stream(), dev1.stream()
    assert current_stream(dev0) == dev0.default_stream
    with outer as entered:
        assert entered is outer
        assert current_stream(dev0) == outer
        with inner, other_device:
            assert current_stream(dev0) == inner
            assert current_stream(dev1) == other_device
            seen: list[Any] = []
            thread = threading.Thread(target=lambda: seen.append(current_stream(dev0)))
            thread.start()
            thread.join(5)
            assert seen == [dev0.default_stream]  # another thread has its own current stream
        assert current_stream(dev0) == outer
        assert current_stream(dev1) == dev1.default_stream
    assert current_stream(dev0) == dev0.default_stream


def test_leaving_a_with_block_by_an_exception_restores_the_current_stream(rt: Runtime) -> None:
    device = Device(0)
    stream = device.stream()
    with pytest.raises(RuntimeError), stream:
        raise RuntimeError("boom")
    assert current_stream(device) == device.default_stream


def test_array_copies_inside_a_with_block_go_to_that_stream(rt: Runtime) -> None:
    device = Device(0)
    stream = device.stream()
    rt.driver.trace_start(0)
    with stream:
        array = device.array(np.arange(8, dtype=np.float32))
        array.to_numpy()
    stream.synchronize()
    copies = [r for r in rt.driver.trace_stop(0, rt.host_time_ns) if r.stream_id == stream._rt.stream_id]
    assert len(copies) == 2


def test_stream_priority_clamps_and_stream_equality_is_identity(rt: Runtime) -> None:
    device = Device(0)
    assert device.stream(priority=100).priority == 7
    assert cannrt.Stream(device, priority=-1).priority == 0
    stream = device.stream()
    assert stream == stream and stream != device.stream()
    assert len({stream, stream, device.default_stream}) == 2


def test_stream_query_synchronize_and_timeouts(rt: Runtime) -> None:
    device = Device(0)
    stream = device.stream()
    stream.launch("spin", 5_000_000)
    assert stream.query() is False and stream.done is False
    with pytest.raises(CannTimeout) as info:
        stream.synchronize(timeout_ms=1)
    assert info.value.code == 507046
    stream.synchronize()
    assert stream.done


def test_wait_stream_orders_one_stream_after_anothers_queued_work(rt: Runtime) -> None:
    device = Device(0)
    producer, consumer = device.stream(), device.stream()
    x = device.array(np.full(1024, 2.0, np.float32))
    y = device.empty(1024)
    producer.launch("spin", 1_000_000)
    producer.launch("mul", x, x, x)  # x = 4
    consumer.wait_stream(producer)
    consumer.launch("add", x, x, y)  # y = 8 only if it ran after the mul
    assert np.array_equal(y.to_numpy(consumer), np.full(1024, 8.0, np.float32))


# -- events -------------------------------------------------------------------------------------
def test_events_time_the_work_between_them(rt: Runtime) -> None:
    device = Device(0)
    stream = device.stream()
    start = stream.record()
    stream.launch("spin", 2_000_000)
    end = stream.record()
    end.synchronize()
    assert 2.0 < start.elapsed_ms(end) < 2.1
    assert end.timestamp_ns - start.timestamp_ns == pytest.approx(start.elapsed_ms(end) * 1e6)


def test_an_event_without_timing_has_no_elapsed_time(rt: Runtime) -> None:
    device = Device(0)
    stream = device.stream()
    untimed = device.event(timing=False)
    timed = stream.record()
    untimed.record(stream)
    stream.synchronize()
    with pytest.raises(CannError) as info:
        timed.elapsed_ms(untimed)
    assert info.value.code == 107006


def test_a_legacy_event_blocks_a_waiting_stream_until_recorded(rt: Runtime) -> None:
    device = Device(0)
    waiter, recorder = device.stream(), device.stream()
    event = device.legacy_event()
    waiter.wait(event)
    with pytest.raises(CannTimeout):
        waiter.synchronize(timeout_ms=1)
    event.record(recorder)
    waiter.synchronize(timeout_ms=10)
    event.reset(recorder)
    recorder.synchronize()
    event.destroy()
    with pytest.raises(CannError) as info:
        event.query()
    assert info.value.code == 107017


def test_device_synchronize_and_reset(rt: Runtime) -> None:
    device = Device(0)
    streams = [device.stream() for _ in range(3)]
    for stream in streams:
        stream.launch("spin", 1_000_000)
    device.synchronize()
    assert all(s.done for s in streams)
    array = device.array(np.ones(3))
    device.reset()
    fresh = Device(0)
    assert fresh.mem_info()[0] == fresh.mem_info()[1]  # everything was released
    assert isinstance(array, DeviceArray)
