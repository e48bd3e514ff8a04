"""Virtual address bookkeeping of one address space (the driver's reserve/release)."""

from __future__ import annotations

import bisect


class AddressRangeError(Exception):
    """A reservation that cannot be satisfied or released."""


class VaAllocator:
    """First-fit reservation of aligned ranges inside [base, limit), coalescing on release."""

    def __init__(self, base: int, limit: int) -> None:
        self._free_starts = [base]
        self._free_ends = [limit]
        self._reserved: dict[int, int] = {}  # start -> size

    def reserve(self, size: int, alignment: int, expect: int = 0) -> int:
        """Reserve size bytes aligned to alignment (at expect if it is free); returns the start."""
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

    def release(self, start: int) -> int:
        """Release a reservation; returns its size. AddressRangeError if start was not reserved."""
        size = self._reserved.pop(start, None)
        if size is None:
            raise AddressRangeError(f"0x{start:x} is not the start of a reservation")
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
