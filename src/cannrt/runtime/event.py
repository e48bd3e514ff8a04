"""Events resolved on the device (models aclrtCreateEvent*, RecordEvent, StreamWaitEvent, ...).

An event is a device slot. CUDA-like (`ex`) events are timeline semaphores: record n writes n,
a wait captures the newest n at call time and waits for slot >= n, so later records cannot
affect it; never recorded means complete. Legacy events are binary: a wait blocks until a
record sets the slot, reset (an async task) clears it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cannrt.abi import EventMode, SqeType
from cannrt.driver.hal import Resource
from cannrt.errors import CannError, CannTimeout, ErrorCode
from cannrt.runtime.stream import poll_cost, timeout_ns
from cannrt.runtime.tracing import api_call

if TYPE_CHECKING:
    from cannrt.runtime.context import Context
    from cannrt.runtime.stream import Stream

EVENT_SYNC = 0x1
EVENT_TIME_LINE = 0x8


class Event:
    """A synchronisation point recorded on one stream and awaited on others."""

    def __init__(self, context: Context, flags: int = EVENT_SYNC | EVENT_TIME_LINE, *, legacy: bool = False) -> None:
        self.context = context
        self.flags = flags
        self.legacy = legacy
        # aclrtCreateEvent (legacy, no flags) records timestamps; otherwise ACL_EVENT_TIME_LINE decides
        self.timing = bool(flags & EVENT_TIME_LINE) or (legacy and flags == 0)
        self.device_id = context.device_id
        self._runtime = context.runtime
        self._driver = context.runtime.driver
        self._costs = context.runtime.settings.host_costs
        self.event_id = self._driver.resource_alloc(self.device_id, Resource.EVENT)
        self.records = 0  # ex: value of the newest record; legacy: records since reset
        self.destroyed = False
        self._poll_streak = 0  # consecutive not-ready queries
        # sq id -> (stream, position of its newest task naming this event): the slot is given
        # back only once all of them completed
        self._uses: dict[int, tuple[Stream, int]] = {}

    def __repr__(self) -> str:
        kind = "legacy " if self.legacy else ""
        return f"<{kind}Event {self.event_id} on device {self.device_id}, recorded {self.records}x>"

    @property
    def mode(self) -> int:
        """How the device treats this event's slot."""
        return EventMode.BINARY if self.legacy else EventMode.TIMELINE

    def _check(self) -> None:
        if self.destroyed:
            raise CannError(ErrorCode.RT_INVALID_HANDLE, f"event {self.event_id} was destroyed")

    def _check_stream(self, stream: Stream) -> None:
        if stream.device_id != self.device_id:
            raise CannError(
                ErrorCode.RT_STREAM_CONTEXT,
                f"event on device {self.device_id} used with a stream of device {stream.device_id}",
            )

    def record(self, stream: Stream) -> None:
        """Capture the work queued on stream now (aclrtRecordEvent); re-record overwrites."""
        self._check()
        self._check_stream(stream)
        value = 1 if self.legacy else self.records + 1
        self._used(stream, stream.submit_event(SqeType.EVENT_RECORD, self.event_id, self.mode, value))
        self.records += 1

    def wait_on(self, stream: Stream) -> None:
        """Make stream wait for the newest record as of now (aclrtStreamWaitEvent)."""
        self._check()
        self._check_stream(stream)
        if not self.legacy and self.records == 0:
            stream.check_usable()  # never recorded: nothing to wait for
            return
        value = 0 if self.legacy else self.records
        self._used(stream, stream.submit_event(SqeType.EVENT_WAIT, self.event_id, self.mode, value))

    def reset(self, stream: Stream) -> None:
        """Clear the event as an async task on stream (aclrtResetEvent)."""
        self._check()
        self._check_stream(stream)
        self._used(stream, stream.submit_event(SqeType.WRITE_VALUE, self.event_id, EventMode.BINARY, 0))
        self.records = 0

    @api_call("aclrtQueryEventStatus")
    def query(self) -> bool:
        """True once the newest record completed, or if never recorded (aclrtQueryEventStatus)."""
        self._check()
        self._runtime.clock.now_ns += poll_cost(self._costs.call_ns, self._poll_streak)
        if self.records == 0:
            return True
        value, _ = self._driver.event_read(self.device_id, self.event_id, self._runtime.clock.now_ns)
        done = value != 0 if self.legacy else value >= self.records
        self._poll_streak = 0 if done else self._poll_streak + 1
        return done

    @api_call("aclrtSynchronizeEvent")
    def synchronize(self, timeout_ms: int | None = None) -> None:
        """Block until the newest record completed (aclrtSynchronizeEvent[WithTimeout])."""
        self._check()
        self.context.check_sticky()
        if self.records == 0:
            return
        now = self._runtime.clock.now_ns
        result = self._driver.event_wait(
            self.device_id, self.event_id, self.records, self.mode, now, timeout_ns(timeout_ms)
        )
        done = self._runtime.waited(result)
        self.context.drain_reports()
        if not done:
            raise CannTimeout(
                ErrorCode.RT_EVENT_SYNC_TIMEOUT,
                f"event {self.event_id} not complete after {timeout_ms} ms",
                timeout_ms=timeout_ms,
            )
        self.context.check_sticky()

    def timestamp_ns(self) -> int:
        """Device time at which the newest record completed."""
        self._check()
        if self.records == 0:
            raise CannError(ErrorCode.RT_INVALID_HANDLE, f"event {self.event_id} was never recorded")
        if not self.query():
            raise CannError(ErrorCode.RT_EVENT_NOT_COMPLETE, f"event {self.event_id} is not complete yet")
        return self._driver.event_read(self.device_id, self.event_id, self._runtime.clock.now_ns)[1]

    @api_call("aclrtEventElapsedTime")
    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds between two completed records (aclrtEventElapsedTime)."""
        for event in (self, end):
            event._check()
            if not event.timing:
                raise CannError(
                    ErrorCode.RT_EVENT_TIMESTAMP_INVALID,
                    f"event {event.event_id} was created without ACL_EVENT_TIME_LINE (flags 0x{event.flags:x})",
                )
        for event in (self, end):  # "never recorded" is reported before "not complete"
            if event.records == 0:
                raise CannError(ErrorCode.RT_INVALID_HANDLE, f"event {event.event_id} was never recorded")
        start = self.timestamp_ns()
        return (end.timestamp_ns() - start) / 1e6

    def destroy(self) -> None:
        """Give the event back (aclrtDestroyEvent): at once, or once the queued tasks naming it
        completed (its slot must not be reused under them)."""
        self._check()
        self.destroyed = True
        self.context.retire_event(self)

    def release(self) -> None:
        """Destroy later, at the context's next safe point (for finalizers: takes no lock)."""
        self.context.orphaned_events.append(self)

    def in_use(self) -> bool:
        """A task naming this event is still queued on a live stream."""
        uses = list(self._uses.values())
        return any(not stream.destroyed and stream.head() <= position for stream, position in uses)

    def free_slot(self) -> None:
        """Return the device event id (the context calls it once the event is out of use)."""
        self._uses.clear()
        self._driver.resource_free(self.device_id, Resource.EVENT, self.event_id)

    def _used(self, stream: Stream, position: int) -> None:
        self._uses[stream.sq_id] = (stream, position)
