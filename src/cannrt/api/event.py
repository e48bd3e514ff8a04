"""Event: a record/wait synchronisation point of the API over the runtime's event (RtEvent)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from cannrt.runtime.event import Event as RtEvent

if TYPE_CHECKING:
    from cannrt.api.stream import Stream


class Event:
    """A record/wait synchronisation point with device timestamps."""

    def __init__(self, rt_event: RtEvent) -> None:
        self._rt = rt_event
        # dropped without destroy(): the runtime destroys it at a safe point (no lock taken here)
        self._finalizer = weakref.finalize(self, _release, rt_event)

    def __repr__(self) -> str:
        return repr(self._rt)

    def record(self, stream: Stream) -> None:
        """Capture the work queued on stream now."""
        self._rt.record(stream._rt)

    def query(self) -> bool:
        """True once the newest record completed (or if never recorded)."""
        return self._rt.query()

    def synchronize(self, timeout_ms: int | None = None) -> None:
        """Block until the newest record completed."""
        self._rt.synchronize(timeout_ms)

    def reset(self, stream: Stream) -> None:
        """Clear the event as a task on stream."""
        self._rt.reset(stream._rt)

    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds from this event's record to end's."""
        return self._rt.elapsed_ms(end._rt)

    @property
    def timestamp_ns(self) -> int:
        """Device time of the newest record."""
        return self._rt.timestamp_ns()

    def destroy(self) -> None:
        """Release the event."""
        self._rt.destroy()
        self._finalizer.detach()


def _release(rt_event: RtEvent) -> None:
    if not rt_event.destroyed:
        rt_event.release()
