"""acl.rt event calls (aclrtCreateEvent*, aclrtRecordEvent, aclrtEventElapsedTime...).

create_event and create_event_with_flag make legacy events (a wait blocks until a record,
reset_event clears); create_event_ex_with_flag makes CUDA-like events (a wait uses the newest
record as of the wait call; never recorded counts as complete).
"""

from __future__ import annotations

from cannrt.acl import constants as c
from cannrt.acl._state import (
    STATE,
    EventEntry,
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

EVENT_FLAGS = c.ACL_EVENT_SYNC | c.ACL_EVENT_CAPTURE_STREAM_PROGRESS | 0x4 | c.ACL_EVENT_TIME_LINE


def _check_flags(flag: object) -> int:
    flags = as_int("flag", flag)
    if flags < 0 or flags & ~EVENT_FLAGS:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"unknown event flags 0x{flags:x}")
    return flags


def _new_event(flags: int, *, legacy: bool, timing: bool) -> int:
    event = current_context().create_event(flags, legacy=legacy)
    return STATE.events.add(EventEntry(event, timing))


@api(0)
def create_event() -> int:
    """(event, ret): a legacy event with timing (aclrtCreateEvent)."""
    return _new_event(c.ACL_EVENT_SYNC | c.ACL_EVENT_TIME_LINE, legacy=True, timing=True)


@api(0)
def create_event_with_flag(flag: int) -> int:
    """(event, ret): a legacy event; timing only with ACL_EVENT_TIME_LINE (aclrtCreateEventWithFlag)."""
    flags = _check_flags(flag)
    return _new_event(flags, legacy=True, timing=bool(flags & c.ACL_EVENT_TIME_LINE))


@api(0)
def create_event_ex_with_flag(flag: int) -> int:
    """(event, ret): a CUDA-like event; timing only with ACL_EVENT_TIME_LINE (aclrtCreateEventExWithFlag)."""
    flags = _check_flags(flag)
    return _new_event(flags, legacy=False, timing=bool(flags & c.ACL_EVENT_TIME_LINE))


@api()
def destroy_event(event: int) -> None:
    """Release an event (aclrtDestroyEvent)."""
    handle = as_handle("event", event)
    event_of(handle).event.destroy()
    STATE.events.remove(handle)


@api()
def record_event(event: int, stream: int) -> None:
    """Capture the work queued on stream now; re-recording overwrites (aclrtRecordEvent)."""
    entry = event_of(as_handle("event", event))
    entry.event.record(stream_of(as_handle("stream", stream)))


@api()
def reset_event(event: int, stream: int) -> None:
    """Clear the event as a task on stream (aclrtResetEvent)."""
    entry = event_of(as_handle("event", event))
    entry.event.reset(stream_of(as_handle("stream", stream)))


@api(c.ACL_EVENT_STATUS_COMPLETE)
def query_event(event: int) -> int:
    """(status, ret): ACL_EVENT_STATUS_COMPLETE (0) or NOT_READY (1) (aclrtQueryEvent)."""
    done = event_of(as_handle("event", event)).event.query()
    return c.ACL_EVENT_STATUS_COMPLETE if done else c.ACL_EVENT_STATUS_NOT_READY


@api(c.ACL_EVENT_RECORDED_STATUS_NOT_READY)
def query_event_status(event: int) -> int:
    """(status, ret): ACL_EVENT_RECORDED_STATUS_COMPLETE (1) or NOT_READY (0) (aclrtQueryEventStatus)."""
    done = event_of(as_handle("event", event)).event.query()
    return c.ACL_EVENT_RECORDED_STATUS_COMPLETE if done else c.ACL_EVENT_RECORDED_STATUS_NOT_READY


def _waits_passed(entry: EventEntry) -> bool:
    return all(stream.destroyed or stream.head() >= position for stream, position in entry.waits)


@api(0)  # a failed call's output is 0, as every output of a failed pyACL call
def query_event_wait_status(event: int) -> int:
    """(status, ret): ACL_EVENT_WAIT_STATUS_COMPLETE (0) once the record completed and every
    stream waiting on it got past its wait, else NOT_READY (1) (aclrtQueryEventWaitStatus)."""
    entry = event_of(as_handle("event", event))
    done = entry.event.query() and _waits_passed(entry)
    return c.ACL_EVENT_WAIT_STATUS_COMPLETE if done else c.ACL_EVENT_WAIT_STATUS_NOT_READY


@api()
def synchronize_event(event: int) -> None:
    """Block until the event's newest record completed (aclrtSynchronizeEvent)."""
    event_of(as_handle("event", event)).event.synchronize()


@api()
def synchronize_event_with_timeout(event: int, timeout: int) -> None:
    """As synchronize_event, giving up after timeout ms (-1: forever) (aclrtSynchronizeEventWithTimeout)."""
    entry = event_of(as_handle("event", event))
    entry.event.synchronize(as_timeout(as_int("timeout", timeout)))


def _timed(handle: object) -> EventEntry:
    entry = event_of(as_handle("event", handle))
    if not entry.timing:
        raise fail(
            ErrorCode.RT_EVENT_TIMESTAMP_INVALID,
            f"event 0x{as_handle('event', handle):x} was created without ACL_EVENT_TIME_LINE",
        )
    return entry


@api(0.0)
def event_elapsed_time(start: int, end: int) -> float:
    """(milliseconds, ret) between two completed records (aclrtEventElapsedTime)."""
    first, last = _timed(start), _timed(end)  # pyACL's own timing rule (WithFlag(0): none)
    return first.event.elapsed_ms(last.event)


@api(0)
def event_get_timestamp(event: int) -> int:
    """(timestamp in microseconds of device time, ret) of the newest completed record (aclrtEventGetTimestamp)."""
    return _timed(event).event.timestamp_ns() // 1000
