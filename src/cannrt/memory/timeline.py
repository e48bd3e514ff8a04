"""The memory timeline: every allocation and free of a device in a bounded ring.

Like torch.cuda.memory._record_memory_history: each event keeps the modelled host time, the
action, the address (or physical handle), the bytes, the pool, the stream and, when call sites
are on, the Python line that made the call. Two running totals follow the events: `reserved`
(HBM held by aclrtMalloc, pool segments and physical handles) and `allocated` (what the program
holds: aclrtMalloc and pool blocks); the profiler draws both as counter tracks.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections import deque
from typing import NamedTuple

RING_EVENTS = 65536  # events kept per device; older ones are dropped (the totals stay right)

# which running totals an action moves
_RESERVED = {
    "malloc", "free", "segment_alloc", "segment_free", "malloc_physical", "free_physical",
    "internal_alloc", "internal_free",  # the runtime's own (argument areas)
}  # fmt: skip
_ALLOCATED = {"malloc", "free", "block_alloc", "block_free"}


class MemoryEvent(NamedTuple):
    """One allocation (delta > 0) or free (delta < 0)."""

    time_ns: int  # modelled host clock
    action: str  # malloc, free, segment_alloc/free, block_alloc/free, malloc/free_physical, internal_alloc/free
    address: int  # device VA (a physical handle for *_physical)
    delta: int  # bytes
    pool: str  # "malloc", "caching", "stream_ordered:N", "physical"
    stream: int  # stream id, -1 when no stream
    reserved: int  # running total of reserved bytes after the event
    allocated: int  # running total of allocated bytes after the event
    site: str = ""  # "file.py:12 in fn" when call sites are recorded


class MemoryTimeline:
    """The bounded ring of one device's memory events."""

    def __init__(self, capacity: int = RING_EVENTS) -> None:
        self.enabled = True
        self.call_sites = False  # record the Python call site of every event (slower)
        self._events: deque[MemoryEvent] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self.reserved = 0
        self.allocated = 0
        self._epoch: weakref.ref[object] | None = None  # the device session the totals belong to

    def begin_epoch(self, owner: object, time_ns: int) -> None:
        """The totals belong to owner (a device's session); a new owner (the device was reset,
        freeing everything) starts them from zero with a "reset" event."""
        epoch = self._epoch
        if epoch is not None and epoch() is owner:
            return
        with self._lock:
            if epoch is not None and self.reserved | self.allocated:
                self._events.append(MemoryEvent(time_ns, "reset", 0, -self.reserved, "", -1, 0, 0))
            self.reserved = self.allocated = 0
            self._epoch = weakref.ref(owner)

    def record(self, time_ns: int, action: str, address: int, delta: int, pool: str, stream: int = -1) -> None:
        """Append one event (thread-safe)."""
        site = _call_site() if self.call_sites else ""
        with self._lock:
            if action in _RESERVED:
                self.reserved += delta
            if action in _ALLOCATED:
                self.allocated += delta
            event = MemoryEvent(time_ns, action, address, delta, pool, stream, self.reserved, self.allocated, site)
            self._events.append(event)

    def events(self) -> list[MemoryEvent]:
        """The events kept, oldest first."""
        with self._lock:
            return list(self._events)

    def clear(self) -> None:
        """Drop the events kept (the running totals stay)."""
        with self._lock:
            self._events.clear()

    def mark(self) -> tuple[int, int, MemoryEvent | None]:
        """(reserved, allocated, the newest event kept) read together: where a profile starts."""
        with self._lock:
            return self.reserved, self.allocated, self._events[-1] if self._events else None


def _call_site() -> str:
    """The first frame outside the cannrt package: where the program asked for the memory."""
    frame = sys._getframe(2)
    while frame.f_back is not None and "/cannrt/" in frame.f_code.co_filename.replace("\\", "/"):
        frame = frame.f_back
    return f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno} in {frame.f_code.co_name}"


_TIMELINES: weakref.WeakKeyDictionary[object, dict[int, MemoryTimeline]] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()


def memory_timeline(owner: object, device: int) -> MemoryTimeline:
    """The timeline of device under owner (the runtime), created on first use."""
    with _REGISTRY_LOCK:
        per_device = _TIMELINES.setdefault(owner, {})
        timeline = per_device.get(device)
        if timeline is None:
            timeline = per_device[device] = MemoryTimeline()
        return timeline


def device_timelines(owner: object) -> dict[int, MemoryTimeline]:
    """Every device timeline made under owner (the runtime), by device id."""
    with _REGISTRY_LOCK:
        return dict(_TIMELINES.get(owner, {}))
