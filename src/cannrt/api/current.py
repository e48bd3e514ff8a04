"""The calling thread's current stream per device: the stack of `with stream:` blocks."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cannrt.api.device import Device
    from cannrt.api.stream import Stream

_current = threading.local()


def active_stream(device: Device) -> Stream | None:
    """The innermost `with stream:` of this thread for device, if any."""
    stack: list[Stream] = getattr(_current, "streams", None) or []
    for stream in reversed(stack):
        if stream._rt.device_id == device.index:
            return stream
    return None


def current_stream(device: Device) -> Stream:
    """The innermost `with stream:` of this thread for device, else its default stream."""
    return active_stream(device) or device.default_stream
