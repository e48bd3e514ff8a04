"""Conformance: streams (create, config, destroy, sync, timeouts, query, failure mode) and
events (legacy and ex, flags, record/wait/reset, queries, sync, elapsed time, timestamps)."""

from __future__ import annotations

import numpy as np
from _check import done, expect, ok, value

import acl

ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_STREAM_CONTEXT = 107003
ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID = 107006
ACL_ERROR_RT_INVALID_HANDLE = 107017
ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006
ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507046
ACL_ERROR_RT_EVENT_SYNC_TIMEOUT = 507047
ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE = 0x1, 0x8
COMPLETE, NOT_READY = 0, 1  # query_event, stream_query, query_event_wait_status
RECORDED_NOT_READY, RECORDED_COMPLETE = 0, 1  # query_event_status
D2D = 3
MIB = 1 << 20


def streams() -> None:
    stream = value(acl.rt.create_stream(), "create_stream")
    expect(stream != 0, True, "a created stream is not the default (0)")
    ok(acl.rt.synchronize_stream(stream), "sync an empty stream")
    ok(acl.rt.synchronize_stream(0), "sync the default stream")
    ok(acl.rt.synchronize_stream(None), "None is the default stream")
    expect(acl.rt.stream_query(stream), (COMPLETE, 0), "empty stream is complete")
    ok(acl.rt.synchronize_stream_with_timeout(stream, 50), "sync with timeout")
    expect(acl.rt.synchronize_stream_with_timeout(stream, -3), ACL_ERROR_RT_PARAM_INVALID, "bad timeout")
    ok(acl.rt.set_stream_failure_mode(stream, 1), "stop on failure")
    expect(acl.rt.set_stream_failure_mode(stream, 5), ACL_ERROR_RT_PARAM_INVALID, "unknown failure mode")
    for priority, flag in ((0, 0), (7, 1), (100, 2), (-4, 3)):
        other = value(acl.rt.create_stream_with_config(priority, flag), f"with_config {priority}/{flag}")
        ok(acl.rt.destroy_stream(other), "destroy configured stream")
    expect(acl.rt.create_stream_with_config(0, 0x40), (0, ACL_ERROR_RT_PARAM_INVALID), "unknown stream flag")
    expect(acl.rt.destroy_stream(0), ACL_ERROR_RT_PARAM_INVALID, "the default stream cannot be destroyed")
    ok(acl.rt.destroy_stream(stream), "destroy_stream")
    expect(acl.rt.destroy_stream(stream), ACL_ERROR_RT_INVALID_HANDLE, "destroy twice")
    expect(acl.rt.synchronize_stream(stream), ACL_ERROR_RT_INVALID_HANDLE, "sync destroyed")
    expect(acl.rt.stream_query(12345), (0, ACL_ERROR_RT_INVALID_HANDLE), "query unknown")
    forced = value(acl.rt.create_stream(), "create_stream")
    ok(acl.rt.destroy_stream_force(forced), "destroy_stream_force")
    expect(acl.rt.destroy_stream_force(forced), ACL_ERROR_RT_INVALID_HANDLE, "force twice")
    expect(acl.rt.destroy_stream_force(0), ACL_ERROR_RT_PARAM_INVALID, "force the default stream")
    expect(acl.rt.set_stream_failure_mode(forced, 0), ACL_ERROR_RT_INVALID_HANDLE, "failure mode of destroyed")
    expect(acl.rt.synchronize_stream_with_timeout(forced, 5), ACL_ERROR_RT_INVALID_HANDLE, "timeout sync destroyed")
    event = value(acl.rt.create_event(), "event")
    expect(acl.rt.stream_wait_event(forced, event), ACL_ERROR_RT_INVALID_HANDLE, "wait on a destroyed stream")
    expect(acl.rt.stream_wait_event(0, 0), ACL_ERROR_RT_PARAM_INVALID, "wait on a null event")
    expect(acl.rt.stream_wait_event(0, 0x777), ACL_ERROR_RT_INVALID_HANDLE, "wait on an unknown event")
    ok(acl.rt.destroy_event(event), "destroy_event")


def blocked_stream() -> None:
    """A stream waiting on a legacy event that nobody recorded: timeouts, then release it."""
    stream, helper = value(acl.rt.create_stream(), "s"), value(acl.rt.create_stream(), "helper")
    gate, after = value(acl.rt.create_event(), "gate"), value(acl.rt.create_event(), "after")
    ok(acl.rt.stream_wait_event(stream, gate), "wait on an unrecorded legacy event")
    ok(acl.rt.record_event(after, stream), "record behind the wait")
    expect(acl.rt.synchronize_stream_with_timeout(stream, 5), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "stream timeout")
    expect(acl.rt.synchronize_event_with_timeout(after, 5), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, "event timeout")
    expect(acl.rt.stream_query(stream), (NOT_READY, 0), "stream not ready")
    expect(acl.rt.query_event(after), (NOT_READY, 0), "event not ready")
    expect(acl.rt.query_event_status(after), (RECORDED_NOT_READY, 0), "recorded status not ready")
    expect(acl.rt.query_event_wait_status(gate), (NOT_READY, 0), "nobody got past the wait")
    expect(acl.rt.event_elapsed_time(gate, after)[1], ACL_ERROR_RT_INVALID_HANDLE, "elapsed: gate never recorded")
    expect(acl.rt.synchronize_device_with_timeout(5), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "device timeout")
    expect(acl.rt.event_get_timestamp(after)[1], ACL_ERROR_RT_EVENT_NOT_COMPLETE, "timestamp not complete")
    ok(acl.rt.record_event(gate, helper), "release the gate")
    ok(acl.rt.synchronize_stream(stream), "stream drains")
    expect(acl.rt.query_event_wait_status(gate), (COMPLETE, 0), "the waiter got past")
    expect(acl.rt.query_event(after), (COMPLETE, 0), "event complete")
    ok(acl.rt.reset_event(gate, stream), "reset_event")
    for event in (gate, after):
        ok(acl.rt.destroy_event(event), "destroy_event")
    for s in (stream, helper):
        ok(acl.rt.destroy_stream(s), "destroy_stream")


def elapsed(stream: int) -> None:
    dev = value(acl.rt.malloc(8 * MIB, 0), "malloc")
    dev2 = value(acl.rt.malloc(8 * MIB, 0), "malloc")
    start, end = value(acl.rt.create_event(), "start"), value(acl.rt.create_event(), "end")
    ok(acl.rt.record_event(start, stream), "record start")
    ok(acl.rt.memcpy_async(dev2, 8 * MIB, dev, 8 * MIB, D2D, stream), "8 MiB copy")
    ok(acl.rt.record_event(end, stream), "record end")
    expect(acl.rt.event_elapsed_time(start, end)[1], ACL_ERROR_RT_EVENT_NOT_COMPLETE, "elapsed before completion")
    ok(acl.rt.synchronize_event(end), "synchronize_event")
    ms = value(acl.rt.event_elapsed_time(start, end), "event_elapsed_time")
    expect(isinstance(ms, float) and ms > 0, True, f"elapsed time positive ({ms} ms)")
    t_start = value(acl.rt.event_get_timestamp(start), "timestamp start")
    t_end = value(acl.rt.event_get_timestamp(end), "timestamp end")
    expect(t_end >= t_start, True, "timestamps ordered (us)")
    ok(acl.rt.synchronize_event_with_timeout(end, -1), "sync event forever")
    expect(acl.rt.synchronize_event_with_timeout(end, -9), ACL_ERROR_RT_PARAM_INVALID, "bad timeout")
    untimed = value(acl.rt.create_event_with_flag(ACL_EVENT_SYNC), "event without TIME_LINE")
    ok(acl.rt.record_event(untimed, stream), "record untimed")
    ok(acl.rt.synchronize_stream(stream), "sync")
    expect(acl.rt.event_elapsed_time(start, untimed)[1], ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, "no timing")
    expect(acl.rt.event_get_timestamp(untimed)[1], ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, "no timestamp")
    for event in (start, end, untimed):
        ok(acl.rt.destroy_event(event), "destroy_event")
    for ptr in (dev, dev2):
        ok(acl.rt.free(ptr), "free")


def ex_events(stream: int) -> None:
    other = value(acl.rt.create_stream(), "other")
    event = value(acl.rt.create_event_ex_with_flag(ACL_EVENT_TIME_LINE), "create_event_ex_with_flag")
    expect(acl.rt.query_event(event), (COMPLETE, 0), "never recorded counts as complete")
    ok(acl.rt.synchronize_event(event), "sync of an unrecorded ex event returns at once")
    ok(acl.rt.stream_wait_event(other, event), "waiting on an unrecorded ex event is a no-op")
    ok(acl.rt.synchronize_stream(other), "not blocked")
    data = np.ones(1024, np.float32)
    dev = value(acl.rt.malloc(data.nbytes, 0), "malloc")
    ok(acl.rt.memcpy_async(dev, data.nbytes, acl.util.numpy_to_ptr(data), data.nbytes, 1, stream), "copy")
    ok(acl.rt.record_event(event, stream), "record")
    ok(acl.rt.stream_wait_event(other, event), "other waits for the copy")
    ok(acl.rt.record_event(event, other), "re-record overwrites")
    ok(acl.rt.synchronize_event(event), "sync newest record")
    expect(acl.rt.query_event_status(event), (RECORDED_COMPLETE, 0), "recorded status complete")
    expect(acl.rt.create_event_ex_with_flag(0x100), (0, ACL_ERROR_RT_PARAM_INVALID), "unknown event flag")
    expect(acl.rt.create_event_with_flag(-1), (0, ACL_ERROR_RT_PARAM_INVALID), "negative event flag")
    ok(acl.rt.destroy_event(event), "destroy_event")
    expect(acl.rt.destroy_event(event), ACL_ERROR_RT_INVALID_HANDLE, "destroy twice")
    expect(acl.rt.record_event(event, stream), ACL_ERROR_RT_INVALID_HANDLE, "record destroyed")
    expect(acl.rt.record_event(0, stream), ACL_ERROR_RT_PARAM_INVALID, "record null event")
    expect(acl.rt.record_event(stream, stream), ACL_ERROR_RT_INVALID_HANDLE, "a stream handle is not an event")
    expect(acl.rt.query_event(0x999), (0, ACL_ERROR_RT_INVALID_HANDLE), "query unknown")
    expect(acl.rt.query_event(0), (0, ACL_ERROR_RT_PARAM_INVALID), "query null")
    expect(acl.rt.query_event_status(event), (0, ACL_ERROR_RT_INVALID_HANDLE), "status of destroyed")
    expect(acl.rt.query_event_wait_status(event), (0, ACL_ERROR_RT_INVALID_HANDLE), "wait status of destroyed")
    expect(acl.rt.reset_event(event, stream), ACL_ERROR_RT_INVALID_HANDLE, "reset destroyed")
    expect(acl.rt.synchronize_event(event), ACL_ERROR_RT_INVALID_HANDLE, "sync destroyed")
    expect(acl.rt.synchronize_event_with_timeout(event, 5), ACL_ERROR_RT_INVALID_HANDLE, "timeout sync destroyed")
    expect(acl.rt.event_get_timestamp(event), (0, ACL_ERROR_RT_INVALID_HANDLE), "timestamp of destroyed")
    expect(acl.rt.destroy_event(0), ACL_ERROR_RT_PARAM_INVALID, "destroy null")
    never = value(acl.rt.create_event(), "never recorded")
    expect(acl.rt.event_get_timestamp(never), (0, ACL_ERROR_RT_INVALID_HANDLE), "timestamp never recorded")
    ok(acl.rt.destroy_event(never), "destroy_event")
    cross_device(stream)
    ok(acl.rt.free(dev), "free")
    ok(acl.rt.destroy_stream(other), "destroy")


def cross_device(stream: int) -> None:
    """An event of device 1 cannot be recorded on or waited by a stream of device 0."""
    home = value(acl.rt.get_context(), "context")
    ctx = value(acl.rt.create_context(1), "context on device 1")
    far = value(acl.rt.create_event(), "event on device 1")
    ok(acl.rt.set_context(home), "back to device 0")
    expect(acl.rt.record_event(far, stream), ACL_ERROR_RT_STREAM_CONTEXT, "record across devices")
    expect(acl.rt.stream_wait_event(stream, far), ACL_ERROR_RT_STREAM_CONTEXT, "wait across devices")
    expect(acl.rt.reset_event(far, stream), ACL_ERROR_RT_STREAM_CONTEXT, "reset across devices")
    ok(acl.rt.destroy_event(far), "destroy_event")
    ok(acl.rt.destroy_context(ctx), "destroy_context")
    ok(acl.rt.set_context(home), "set_context")


def main() -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    streams()
    blocked_stream()
    stream = value(acl.rt.create_stream(), "create_stream")
    elapsed(stream)
    ex_events(stream)
    ok(acl.rt.destroy_stream(stream), "destroy_stream")
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")
    done("streams")


if __name__ == "__main__":
    main()
