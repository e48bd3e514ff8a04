"""A least-recently-used L2 model at 64 KiB granules: hit rates for the cost model and PMU."""

from __future__ import annotations

from collections import OrderedDict

GRANULE_SHIFT = 16


class L2Model:
    """Which granules of device memory are resident, in modelled execution order."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity = max(1, capacity_bytes >> GRANULE_SHIFT)
        self._lines: OrderedDict[int, None] = OrderedDict()
        # the previous access, if repeating it now would change nothing: (reads, writes, hit rate)
        self._repeat: tuple[object, object, float] | None = None

    def access(self, reads: list[tuple[int, int]], writes: list[tuple[int, int]]) -> float:
        """Touch read then written ranges; returns the hit fraction of the read granules."""
        repeat = self._repeat
        if repeat is not None and repeat[0] is reads and repeat[1] is writes:
            # the same ranges again at once: every granule is resident and already in the order
            # this access would leave them in, so it would only count hits
            return repeat[2]
        hit = 0
        total = 0
        lines = self._lines
        for address, nbytes in reads:
            for granule in self._granules(address, nbytes):
                total += 1
                if granule in lines:
                    hit += 1
                    lines.move_to_end(granule)
                else:
                    self._insert(granule)
        for address, nbytes in writes:
            for granule in self._granules(address, nbytes):
                if granule in lines:
                    lines.move_to_end(granule)
                else:
                    self._insert(granule)
        touched = sum(len(self._granules(a, n)) for a, n in (*reads, *writes))
        self._repeat = (reads, writes, 1.0 if total else 0.0) if touched <= self.capacity else None
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
