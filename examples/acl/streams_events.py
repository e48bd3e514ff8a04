"""Streams and events, pyACL style: two streams, one waiting for the other through an event,
and the device time between two events (acl.rt.event_elapsed_time).

Run it on the simulated NPU with:  cannrt exec examples/acl/streams_events.py
"""

from __future__ import annotations

import numpy as np

import acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
DEVICE_ID = 0
MIB = 1 << 20


def check_ret(message: str, ret: int) -> None:
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def timed_copy(stream: int, dst: int, src: int, size: int) -> float:
    """Milliseconds of device time one D2D copy takes, measured with two events."""
    start, ret = acl.rt.create_event()
    check_ret("acl.rt.create_event", ret)
    end, ret = acl.rt.create_event()
    check_ret("acl.rt.create_event", ret)
    check_ret("record start", acl.rt.record_event(start, stream))
    check_ret("memcpy_async", acl.rt.memcpy_async(dst, size, src, size, ACL_MEMCPY_DEVICE_TO_DEVICE, stream))
    check_ret("record end", acl.rt.record_event(end, stream))
    check_ret("synchronize_event", acl.rt.synchronize_event(end))
    elapsed_ms, ret = acl.rt.event_elapsed_time(start, end)
    check_ret("acl.rt.event_elapsed_time", ret)
    for event in (start, end):
        check_ret("acl.rt.destroy_event", acl.rt.destroy_event(event))
    return float(elapsed_ms)


def main() -> None:
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    producer, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    consumer, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)

    data = np.random.default_rng(0).standard_normal(4 * MIB // 4).astype(np.float32)
    size = data.nbytes
    staging, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    final, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)

    # the producer uploads; the consumer waits for that upload through an event, then copies on
    ready, ret = acl.rt.create_event()
    check_ret("acl.rt.create_event", ret)
    host_ptr = acl.util.numpy_to_ptr(data)
    check_ret("upload", acl.rt.memcpy_async(staging, size, host_ptr, size, ACL_MEMCPY_HOST_TO_DEVICE, producer))
    check_ret("record ready", acl.rt.record_event(ready, producer))
    check_ret("consumer waits", acl.rt.stream_wait_event(consumer, ready))
    check_ret("copy", acl.rt.memcpy_async(final, size, staging, size, ACL_MEMCPY_DEVICE_TO_DEVICE, consumer))
    check_ret("synchronize consumer", acl.rt.synchronize_stream(consumer))
    status, ret = acl.rt.query_event_status(ready)
    check_ret("acl.rt.query_event_status", ret)
    print(f"event 'ready' complete: {status == ACL_EVENT_RECORDED_STATUS_COMPLETE}")
    check_ret("reset ready", acl.rt.reset_event(ready, producer))

    result = np.empty_like(data)
    check_ret("download", acl.rt.memcpy(acl.util.numpy_to_ptr(result), size, final, size, ACL_MEMCPY_DEVICE_TO_HOST))
    print(f"consumer saw the producer's data: {bool(np.array_equal(result, data))}")

    for megabytes in (1, 4):
        ms = timed_copy(producer, final, staging, megabytes * MIB)
        print(f"device-to-device copy of {megabytes} MiB: {ms * 1000:.1f} us of device time")

    check_ret("acl.rt.destroy_event", acl.rt.destroy_event(ready))
    for ptr in (staging, final):
        check_ret("acl.rt.free", acl.rt.free(ptr))
    for stream in (producer, consumer):
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print("done")


if __name__ == "__main__":
    main()
