"""Virtual address bookkeeping of one address space (the driver's reserve/release).

Freed allocations go through a quarantine before their VA can be handed out again (as CUDA's
allocator and AddressSanitizer do): the newest QUARANTINE_ENTRIES freed ranges, at most
QUARANTINE_BYTES of VA, stay reserved, so a use after free faults instead of reading whatever
was placed there next. When the window runs out of VA, the quarantine is emptied and the
reservation retried.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable

QUARANTINE_ENTRIES = 1024
QUARANTINE_BYTES = 4 << 30


class AddressRangeError(Exception):
    """A reservation that cannot be satisfied or released."""


class VaAllocator:
    """First-fit reservation of aligned ranges inside [base, limit), coalescing on release."""

    def __init__(self, base: int, limit: int, on_evict: Callable[[int], None] | None = None) -> None:
        self._free_starts = [base]
        self._free_ends = [limit]
        self._reserved: dict[int, int] = {}  # start -> size
        self._user: list[int] = []  # starts of reservations made by aclrtReserveMemAddress (VMM), sorted
        self._quarantine: deque[int] = deque()  # starts of freed ranges, oldest first
        self._quarantined_bytes = 0
        self._on_evict = on_evict  # told the start of each range leaving the quarantine

    def reserve(self, size: int, alignment: int, expect: int = 0, *, user: bool = False) -> int:
        """Reserve size bytes aligned to alignment (at expect if it is free); returns the start.
        user marks a VMM reservation (mappings may be placed inside it)."""
        try:
            start = self._reserve(size, alignment, expect)
        except AddressRangeError:
            if not self._quarantine:
                raise
            self._evict(len(self._quarantine))
            start = self._reserve(size, alignment, expect)
        if user:
            bisect.insort(self._user, start)
        return start

    def _reserve(self, size: int, alignment: int, expect: int) -> int:
        if size <= 0:
            raise AddressRangeError(f"cannot reserve {size} bytes")
        if expect:
            start = self._reserve_at(expect, size)
            if start is not None:
                return start
        for index, (lo, hi) in enumerate(zip(self._free_starts, self._free_ends, strict=True)):
            start = -(-lo // alignment) * alignment
            if start + size <= hi:
                self._carve(index, start, size)
                return start
        raise AddressRangeError(f"no free range of {size} bytes aligned to {alignment}")

    def _reserve_at(self, start: int, size: int) -> int | None:
        index = bisect.bisect_right(self._free_starts, start) - 1
        if index >= 0 and start + size <= self._free_ends[index]:
            self._carve(index, start, size)
            return start
        return None

    def _carve(self, index: int, start: int, size: int) -> None:
        lo, hi = self._free_starts[index], self._free_ends[index]
        del self._free_starts[index], self._free_ends[index]
        if start + size < hi:
            self._free_starts.insert(index, start + size)
            self._free_ends.insert(index, hi)
        if lo < start:
            self._free_starts.insert(index, lo)
            self._free_ends.insert(index, start)
        self._reserved[start] = size

    def quarantine(self, start: int) -> None:
        """A freed allocation's range: released only after newer frees push it out."""
        if start not in self._reserved:
            raise AddressRangeError(f"0x{start:x} is not the start of a reservation")
        self._quarantine.append(start)
        self._quarantined_bytes += self._reserved[start]
        while len(self._quarantine) > QUARANTINE_ENTRIES or self._quarantined_bytes > QUARANTINE_BYTES:
            self._evict(1)

    def _evict(self, count: int) -> None:
        for _ in range(count):
            start = self._quarantine.popleft()
            self._quarantined_bytes -= self._reserved[start]
            self.release(start)
            if self._on_evict is not None:
                self._on_evict(start)

    def user_range(self, start: int, size: int) -> int | None:
        """The VMM reservation holding [start, start + size), if any."""
        starts = self._user
        index = bisect.bisect_right(starts, start) - 1
        if index >= 0 and start + size <= starts[index] + self._reserved[starts[index]]:
            return starts[index]
        return None

    def is_user(self, start: int) -> bool:
        """True if start begins a VMM reservation."""
        return self._user_index(start) >= 0

    def _user_index(self, start: int) -> int:
        """Where start is in the sorted VMM reservation starts (-1 if it is not one)."""
        index = bisect.bisect_left(self._user, start)
        return index if index < len(self._user) and self._user[index] == start else -1

    def release(self, start: int) -> int:
        """Release a reservation; returns its size. AddressRangeError if start was not reserved."""
        size = self._reserved.pop(start, None)
        if size is None:
            raise AddressRangeError(f"0x{start:x} is not the start of a reservation")
        index = self._user_index(start)
        if index >= 0:
            del self._user[index]
        end = start + size
        index = bisect.bisect_left(self._free_starts, start)
        if index < len(self._free_starts) and self._free_starts[index] == end:
            end = self._free_ends[index]
            del self._free_starts[index], self._free_ends[index]
        if index > 0 and self._free_ends[index - 1] == start:
            index -= 1
            start = self._free_starts[index]
            del self._free_starts[index], self._free_ends[index]
        self._free_starts.insert(index, start)
        self._free_ends.insert(index, end)
        return size

    def size_of(self, start: int) -> int | None:
        """Size of the reservation starting at start, if any."""
        return self._reserved.get(start)
