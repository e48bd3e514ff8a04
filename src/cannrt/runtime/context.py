"""Contexts: one device address space, a default stream, streams, events and error state.

Models aclrtCreateContext / aclrtSetContext; a device's default context comes from aclrtSetDevice.
"""

from __future__ import annotations

import numbers
import threading
from collections import deque
from typing import TYPE_CHECKING

from cannrt.abi import CQE_DISCARDED, decode_cqes
from cannrt.errors import CannError, ErrorCode
from cannrt.runtime.event import Event
from cannrt.runtime.memory_ops import record_event
from cannrt.runtime.stream import STREAM_FLAGS, Stream
from cannrt.runtime.tracing import api_call
from cannrt.tools.allocations import UserAllocations
from cannrt.tools.dump import exception_dump_root, shared_writer
from cannrt.tools.exception_report import format_exception_record

if TYPE_CHECKING:
    from cannrt.abi import ExceptionRecord
    from cannrt.runtime.core import Runtime


class Context:
    """Everything a thread works with on one device."""

    def __init__(self, runtime: Runtime, device_id: int, *, is_default: bool = False) -> None:
        self.runtime = runtime
        self.device_id = device_id
        self.is_default = is_default
        driver = runtime.driver
        self.asid = driver.space_create(device_id)
        self.cq_id = driver.cq_alloc(device_id)
        self.lock = threading.RLock()
        self.streams: dict[int, Stream] = {}  # sq id -> stream
        self.events: set[Event] = set()
        self.retired_events: list[Event] = []  # destroyed, slot held while queued tasks name them
        self.orphaned_events: deque[Event] = deque()  # dropped by their owners: destroyed at the next reap
        self.allocations = UserAllocations()  # user VA -> requested bytes (with call sites and frees)
        self._internal: dict[int, int] = {}  # VA -> bytes of runtime-internal memory (argument areas)
        self.memory_pool: object | None = None  # the API's caching pool (cannrt.api.pools)
        self.sticky_code = 0
        self.sticky_message = ""
        self.exception_records: list[ExceptionRecord] = []
        self._exceptions_seen = 0
        self.destroyed = False
        self.default_stream = self.create_stream(is_default=True)

    def __repr__(self) -> str:
        kind = "default " if self.is_default else ""
        return f"<{kind}Context on device {self.device_id}, {len(self.streams)} streams>"

    # -- objects -----------------------------------------------------------------------------
    @api_call("aclrtCreateStream")
    def create_stream(self, priority: int = 0, flags: int = 0, *, is_default: bool = False) -> Stream:
        """A new stream in this context (aclrtCreateStreamWithConfig): TypeError unless priority
        and flags are integers; CannError 107000 for flags other than FAST_LAUNCH | FAST_SYNC."""
        given: tuple[tuple[str, object], ...] = (("priority", priority), ("flags", flags))
        for name, value in given:
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"stream {name} is an integer, not {type(value).__name__}")
        if flags < 0 or flags & ~STREAM_FLAGS:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"unknown stream flags 0x{flags:x} (known: 0x{STREAM_FLAGS:x})")
        self.check_alive()
        self.check_sticky()
        self.runtime.host_cost(self.runtime.settings.host_costs.stream_ns)
        stream = Stream(self, priority, flags, is_default=is_default)
        with self.lock:
            self.streams[stream.sq_id] = stream
        return stream

    def forget_stream(self, stream: Stream) -> None:
        """Called by a stream as it is destroyed."""
        with self.lock:
            self.streams.pop(stream.sq_id, None)
        self.runtime.callbacks.forget_stream(stream)

    @api_call("aclrtCreateEvent")
    def create_event(self, flags: int = 0x9, *, legacy: bool = False) -> Event:
        """A new event in this context."""
        self.check_alive()
        self.check_sticky()
        self.runtime.host_cost(self.runtime.settings.host_costs.event_ns)
        if self.orphaned_events or self.retired_events:
            self.reap_events()
        event = Event(self, flags, legacy=legacy)
        with self.lock:
            self.events.add(event)
        return event

    def retire_event(self, event: Event) -> None:
        """A destroyed event: its slot is freed now if no queued task names it, else later."""
        busy = event.in_use()  # asks the device: not under the context lock
        with self.lock:
            self.events.discard(event)
            if busy:
                self.retired_events.append(event)
        if not busy:
            event.free_slot()

    def reap_events(self) -> None:
        """Destroy the orphaned events, free the slots of retired ones no queued task names."""
        orphans = self.orphaned_events
        while orphans:
            event = orphans.popleft()
            if not event.destroyed:
                event.destroy()
        with self.lock:
            retired = list(self.retired_events)
        done = [event for event in retired if not event.in_use()]
        with self.lock:
            self.retired_events = [event for event in self.retired_events if event not in done]
        for event in done:
            event.free_slot()

    def invalidate_launches(self) -> None:
        """Every stream's next launches go through the launch checks."""
        with self.lock:
            streams = list(self.streams.values())
        for stream in streams:
            stream.launcher.invalidate()

    def allocate_internal(self, size: int) -> int:
        """Device memory the runtime itself uses (argument areas)."""
        va = self.runtime.driver.mem_alloc(self.asid, size, size, False)
        self._internal[va] = size
        record_event(self, "internal_alloc", va, size)  # reserved, as the driver counts it
        return va

    def note_block(self, address: int, nbytes: int) -> None:
        """A memory pool handed out a block: the MMU checks accesses against it, and fault
        reports name it as a user allocation."""
        self.allocations.note_block(address, nbytes)
        self.runtime.driver.mem_annotate(self.asid, address, nbytes)

    def free_internal(self, va: int) -> None:
        """Free runtime-internal memory."""
        size = self._internal.pop(va, None)
        if size is not None:
            self.runtime.driver.mem_free(self.asid, va)
            record_event(self, "internal_free", va, -size)

    # -- error state -------------------------------------------------------------------------
    def check_alive(self) -> None:
        """Raise if the context was destroyed."""
        if self.destroyed:
            raise CannError(ErrorCode.RT_CONTEXT_NULL, f"context on device {self.device_id} was destroyed")

    def check_sticky(self) -> None:
        """Raise the sticky error of an earlier device fault (until the device is reset)."""
        if self.sticky_code:
            raise CannError(self.sticky_code, self.sticky_message)

    def drain_reports(self) -> None:
        """Process completion reports: errors become stream errors and the sticky context error."""
        driver = self.runtime.driver
        data = driver.report_receive(self.device_id, self.cq_id, 1 << 16, self.runtime.clock.now_ns)
        if not data:
            return
        new_records = driver.exceptions(self.device_id, self._exceptions_seen)
        self._exceptions_seen += len(new_records)
        self.exception_records.extend(r for r in new_records if r.sq_id in self.streams)
        if new_records and self.runtime.dump_config is None:
            self._write_exception_dumps()
        for cqe in decode_cqes(data):
            if not cqe.error_code:
                continue
            stream = self.streams.get(cqe.sq_id)
            if stream is not None and not stream.error_code:
                stream.error_code = cqe.error_code
            if cqe.flags & CQE_DISCARDED:
                continue
            if not self.sticky_code:
                self.sticky_code = cqe.error_code
                self.invalidate_launches()  # launches must see the sticky error now
                self.sticky_message = self.error_report(stream) or f"device error {cqe.error_code}"
            self.runtime.report_exception(self, cqe)

    def error_report(self, stream: Stream | None) -> str:
        """The CANN-style report of the newest fault on stream (or in the context), with the
        user allocation the access overran or missed (AddressSanitizer style)."""
        for record in reversed(self.exception_records):
            if stream is None or record.sq_id == stream.sq_id:
                return format_exception_record(record, self._allocation_lines(record))
        return ""

    def _allocation_lines(self, record: ExceptionRecord) -> list[str]:
        if not record.access_kind or "MTE_ERR_ADDR_MISALIGN" in record.error_bits:
            return []
        owner = self.runtime.driver.mem_owner(record.access_address)
        if owner is not None and owner != (self.device_id, self.asid):
            return [f"  0x{record.access_address:x} belongs to another context (device {owner[0]}), not this one"]
        return self.allocations.describe(record.access_address, record.access_size, record.access_kind)

    def _write_exception_dumps(self) -> None:
        """Without a dump session, a fault's exception dump goes to CANN's default place
        (exception_dump_root(); CANNRT_EXCEPTION_DUMP=0 turns it off)."""
        root = exception_dump_root()
        records = self.runtime.driver.dump_read(self.device_id, self.runtime.clock.now_ns)
        if root is None:
            return
        writer = shared_writer(root)
        written = [writer.write(r, r.kernel_name) for r in records if r.exception]
        if written:
            writer.write_manifests()

    # -- teardown ----------------------------------------------------------------------------
    def destroy(self) -> None:
        """Discard queued work and free everything (aclrtDestroyContext)."""
        if self.destroyed:
            raise CannError(ErrorCode.RT_CONTEXT_NULL, "context was already destroyed")
        for stream in list(self.streams.values()):
            stream.release(discard=True)
        for event in list(self.events):
            event.destroy()
        self.reap_events()  # every stream is gone: no task names an event any more
        self.destroyed = True
        self.runtime.driver.space_destroy(self.asid)
        self.allocations.clear()
        for va, size in self._internal.items():
            record_event(self, "internal_free", va, -size)
        self._internal.clear()
