"""A least-recently-used L2 model at 64 KiB granules: hit rates for the cost model and PMU."""

from __future__ import annotations

from collections import OrderedDict

GRANULE_SHIFT = 16
Touched = tuple[tuple[int, ...], tuple[int, ...]]
"""The granules one launch shape reads, and those it writes."""


def granules(ranges: list[tuple[int, int]]) -> tuple[int, ...]:
    """The granules (address >> GRANULE_SHIFT) that (address, bytes) ranges touch, in order; a
    launch shape's are computed once and handed to every access."""
    return tuple(
        granule
        for address, nbytes in ranges
        if nbytes > 0
        for granule in range(address >> GRANULE_SHIFT, ((address + nbytes - 1) >> GRANULE_SHIFT) + 1)
    )


class L2Model:
    """Which granules of device memory are resident, in modelled execution order."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity = max(1, capacity_bytes >> GRANULE_SHIFT)
        self._lines: OrderedDict[int, None] = OrderedDict()
        # the (reads, writes) of the last access if all its granules stayed resident: the same
        # access again (by identity) hits every read and leaves the recency order as it is
        self.repeat: Touched | None = None

    def access(self, touched: Touched) -> float:
        """Touch the read then the written granules of touched = (reads, writes); returns the
        hit fraction of the read granules."""
        reads, writes = touched
        if self.repeat is touched:
            return 1.0 if reads else 0.0
        lines = self._lines
        touch, insert = lines.move_to_end, self._insert
        hit = 0
        evicted = False
        for granule in reads:
            if granule in lines:
                hit += 1
                touch(granule)
            else:
                evicted |= insert(granule)
        for granule in writes:
            if granule in lines:
                touch(granule)
            else:
                evicted |= insert(granule)
        self.repeat = None if evicted else touched
        return hit / len(reads) if reads else 0.0

    def _insert(self, granule: int) -> bool:
        """Make granule resident; True if that evicted one (perhaps of this very access)."""
        self._lines[granule] = None
        if len(self._lines) > self.capacity:
            self._lines.popitem(last=False)
            return True
        return False
