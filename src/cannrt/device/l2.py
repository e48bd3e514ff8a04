"""A least-recently-used L2 model at 64 KiB granules: hit rates for the cost model and PMU."""

from __future__ import annotations

from collections import OrderedDict

GRANULE_SHIFT = 16


class L2Model:
    """Which granules of device memory are resident, in modelled execution order."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity = max(1, capacity_bytes >> GRANULE_SHIFT)
        self._lines: OrderedDict[int, None] = OrderedDict()

    def access(self, reads: list[tuple[int, int]], writes: list[tuple[int, int]]) -> float:
        """Touch read then written ranges; returns the hit fraction of the read granules."""
        hit = 0
        total = 0
        for address, nbytes in reads:
            for granule in self._granules(address, nbytes):
                total += 1
                if granule in self._lines:
                    hit += 1
                    self._lines.move_to_end(granule)
                else:
                    self._insert(granule)
        for address, nbytes in writes:
            for granule in self._granules(address, nbytes):
                if granule in self._lines:
                    self._lines.move_to_end(granule)
                else:
                    self._insert(granule)
        return hit / total if total else 0.0

    def _insert(self, granule: int) -> None:
        self._lines[granule] = None
        if len(self._lines) > self.capacity:
            self._lines.popitem(last=False)

    @staticmethod
    def _granules(address: int, nbytes: int) -> range:
        if nbytes <= 0:
            return range(0)
        return range(address >> GRANULE_SHIFT, ((address + nbytes - 1) >> GRANULE_SHIFT) + 1)
