"""User allocations as fault reports name them: requested (unpadded) sizes, the Python call site
of each allocation and free (recorded while tracking is on), and the recently freed ones.

`Context.allocations` is a `UserAllocations`: the runtime's malloc and free write it as a dict of
VA -> requested bytes; pool blocks are noted with `note_block`. Only these are named in a report:
the runtime's own memory (argument areas) never is. Tracking costs one flag test per allocation
when off; on, one walk up the Python stack (as PyTorch's memory history records call sites).
"""

from __future__ import annotations

import os
import sys
from collections import deque
from types import FrameType
from typing import NamedTuple

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FREED_KEPT = 1024  # frees remembered for use-after-free reports


class _Tracking:
    enabled = os.environ.get("CANNRT_TRACK_ALLOCATIONS", "") not in ("", "0")


TRACKING = _Tracking()


def track_allocations(on: bool = True) -> None:
    """Record the Python call site of every allocation and free from now on (or stop)."""
    TRACKING.enabled = bool(on)


def call_site() -> str:
    """file:line in function of the nearest caller outside the cannrt package."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return ""
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"


class Allocation(NamedTuple):
    """A user allocation: start, requested bytes, where it was made (and freed)."""

    address: int
    size: int
    site: str = ""
    freed_at: str | None = None  # None while live

    def label(self) -> str:
        freed = "freed " if self.freed_at is not None else ""
        return f"{freed}{self.size}-byte allocation at 0x{self.address:x}"


class UserAllocations(dict[int, int]):
    """VA -> requested bytes of the user's mallocs, with sites, pool blocks and recent frees."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: dict[int, str] = {}
        self.blocks: dict[int, tuple[int, str]] = {}  # pool block VA -> (requested bytes, site)
        self.freed: deque[Allocation] = deque(maxlen=FREED_KEPT)

    def __setitem__(self, va: int, size: int) -> None:
        super().__setitem__(va, size)
        if TRACKING.enabled:
            self.sites[va] = call_site()

    def __delitem__(self, va: int) -> None:
        size = self[va]
        super().__delitem__(va)
        self.freed.append(Allocation(va, size, self.sites.pop(va, ""), call_site() if TRACKING.enabled else ""))
        for start in [b for b in self.blocks if va <= b < va + size]:
            del self.blocks[start]

    def pop(self, va: int, *default: int) -> int:  # type: ignore[override]
        """dict.pop that remembers the free as del does."""
        if va not in self:
            if default:
                return default[0]
            raise KeyError(va)
        size = self[va]
        del self[va]
        return size

    def clear(self) -> None:
        super().clear()
        self.sites.clear()
        self.blocks.clear()
        self.freed.clear()

    def note_block(self, va: int, size: int) -> None:
        """A caching pool handed out size bytes at va (a user allocation inside a segment)."""
        self.blocks[va] = (size, call_site() if TRACKING.enabled else "")

    def live(self) -> list[Allocation]:
        """Pool blocks, and mallocs that hold no pool block (those are the pool's segments)."""
        blocks = [Allocation(va, size, site) for va, (size, site) in self.blocks.items()]
        segments = {va for va, size in self.items() if any(va <= b < va + size for b in self.blocks)}
        mallocs = [Allocation(va, size, self.sites.get(va, "")) for va, size in self.items() if va not in segments]
        return blocks + mallocs

    def describe(self, start: int, nbytes: int, kind: str) -> list[str]:
        """AddressSanitizer-style lines for an access of nbytes at start: the user allocation it
        overran or missed (requested size), where that was made and whether it was freed."""
        end = start + max(1, nbytes)
        live = self.live()
        inside_live = [a for a in live if a.address <= start < a.address + a.size]
        freed = [a for a in self.freed if a.address <= start < a.address + a.size]
        if not inside_live and freed:
            target = freed[-1]
        else:
            candidates = inside_live or live
            if not candidates:
                return [f"  0x{start:x} is not near any user allocation of this context"]
            target = min(candidates, key=lambda a: _distance(start, end, a))
        lines = [f"  {kind} of {nbytes} bytes at 0x{start:x} {_relation(start, end, target)} the {target.label()}"]
        lines.append(f"  allocated at {target.site}" if target.site else _NO_SITE)
        if target.freed_at is not None:
            lines.append(f"  freed at {target.freed_at}" if target.freed_at else "  freed (site not recorded)")
        return lines


_NO_SITE = "  allocation site not recorded (cannrt.track_allocations() or CANNRT_TRACK_ALLOCATIONS=1)"


def _distance(start: int, end: int, allocation: Allocation) -> int:
    low, high = allocation.address, allocation.address + allocation.size
    if end <= low:
        return low - end
    if start >= high:
        return start - high
    return 0


def _relation(start: int, end: int, allocation: Allocation) -> str:
    low, high = allocation.address, allocation.address + allocation.size
    if start >= high:
        return f"is {start - high} bytes after"
    if end <= low:
        return f"ends {low - end} bytes before"
    if start < low:
        return f"starts {low - start} bytes before"
    if end > high:
        return f"ends {end - high} bytes after"
    return "lies inside"
