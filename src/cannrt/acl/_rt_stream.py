"""acl.rt stream calls (aclrtCreateStream, aclrtSynchronizeStream, aclrtStreamWaitEvent...).

Stream handles are ints; 0 (or None) is the current context's default stream, which cannot
be destroyed.
"""

from __future__ import annotations

from cannrt.acl import constants as c
from cannrt.acl._state import (
    STATE,
    api,
    as_handle,
    as_int,
    as_timeout,
    current_context,
    event_of,
    fail,
    stream_of,
)
from cannrt.errors import ErrorCode

STREAM_FLAGS = c.ACL_STREAM_FAST_LAUNCH | c.ACL_STREAM_FAST_SYNC


@api(0)
def create_stream() -> int:
    """(stream, ret): a new stream in the current context (aclrtCreateStream)."""
    return STATE.streams.add(current_context().create_stream())


@api(0)
def create_stream_with_config(priority: int, flag: int) -> int:
    """(stream, ret) with a priority (0 highest, out of range clamps) and flags (aclrtCreateStreamWithConfig)."""
    prio, flags = as_int("priority", priority), as_int("flag", flag)
    if flags & ~STREAM_FLAGS or flags < 0:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"unknown stream flags 0x{flags:x} (known: FAST_LAUNCH, FAST_SYNC)")
    return STATE.streams.add(current_context().create_stream(prio, flags))


def _destroy(stream: int, force: bool) -> None:
    handle = as_handle("stream", stream)
    target = stream_of(handle)
    target.destroy(force)
    STATE.streams.remove(handle)


@api()
def destroy_stream(stream: int) -> None:
    """Destroy a stream after its pending tasks finish (aclrtDestroyStream)."""
    _destroy(stream, force=False)


@api()
def destroy_stream_force(stream: int) -> None:
    """Destroy a stream, discarding tasks not yet run (aclrtDestroyStreamForce)."""
    _destroy(stream, force=True)


@api()
def synchronize_stream(stream: int) -> None:
    """Block until the stream's tasks finish; returns a device error seen on it (aclrtSynchronizeStream)."""
    stream_of(as_handle("stream", stream)).synchronize()


@api()
def synchronize_stream_with_timeout(stream: int, timeout: int) -> None:
    """As synchronize_stream, giving up after timeout ms (-1: forever) (aclrtSynchronizeStreamWithTimeout)."""
    target = stream_of(as_handle("stream", stream))
    target.synchronize(as_timeout(as_int("timeout", timeout)))


@api(c.ACL_STREAM_STATUS_COMPLETE)
def stream_query(stream: int) -> int:
    """(status, ret): ACL_STREAM_STATUS_COMPLETE (0) or NOT_READY (1) (aclrtStreamQuery)."""
    done = stream_of(as_handle("stream", stream)).query()
    return c.ACL_STREAM_STATUS_COMPLETE if done else c.ACL_STREAM_STATUS_NOT_READY


@api()
def set_stream_failure_mode(stream: int, mode: int) -> None:
    """ACL_CONTINUE_ON_FAILURE (default) or ACL_STOP_ON_FAILURE (aclrtSetStreamFailureMode)."""
    value = as_int("mode", mode)
    if value not in (c.ACL_CONTINUE_ON_FAILURE, c.ACL_STOP_ON_FAILURE):
        raise fail(ErrorCode.RT_PARAM_INVALID, f"unknown failure mode {value}")
    stream_of(as_handle("stream", stream)).set_failure_mode(value == c.ACL_STOP_ON_FAILURE)


@api()
def stream_wait_event(stream: int, event: int) -> None:
    """Later tasks of stream wait for the event's newest record as of now (aclrtStreamWaitEvent)."""
    target = stream_of(as_handle("stream", stream))
    entry = event_of(as_handle("event", event))
    before = target.tail
    entry.event.wait_on(target)
    if target.tail != before:
        entry.waits.append((target, target.tail))
        del entry.waits[:-64]
