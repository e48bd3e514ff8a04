"""The buffer model: lifetimes, sizes, alignment, packings, validation and the lower bound."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
Progress = Callable[[float, int], None]
"""Called with (elapsed seconds, best peak so far) whenever a search improves."""


class PlannerError(Exception):
    """Base class of every error the planner raises on purpose."""


class InvalidBufferError(PlannerError, ValueError):
    """A buffer description is malformed (negative size, empty lifetime, duplicate id...)."""


class InvalidPackingError(PlannerError):
    """A packing breaks a rule: overlap, misalignment or capacity."""


class InfeasibleError(PlannerError):
    """No packing within the capacity exists or none was found in the time limit."""


@dataclass(frozen=True, slots=True)
class Buffer:
    """A block of `size` bytes live during the half-open time interval [lower, upper)."""

    id: str
    lower: int
    upper: int
    size: int
    alignment: int = 1

    def __post_init__(self) -> None:
        if self.size < 0:
            raise InvalidBufferError(f"buffer {self.id}: negative size {self.size}")
        if self.lower >= self.upper:
            raise InvalidBufferError(f"buffer {self.id}: lower {self.lower} >= upper {self.upper} (empty lifetime)")
        if self.alignment < 1:
            raise InvalidBufferError(f"buffer {self.id}: alignment {self.alignment} < 1")


@dataclass(frozen=True)
class Arrays:
    """Column view of a buffer list, for the vectorised solvers."""

    lower: IntArray
    upper: IntArray
    size: IntArray
    alignment: IntArray

    @staticmethod
    def of(buffers: Sequence[Buffer]) -> Arrays:
        """Build the columns of `buffers` (in the same order)."""

        def col(name: str) -> IntArray:
            return np.fromiter((getattr(b, name) for b in buffers), np.int64, len(buffers))

        return Arrays(col("lower"), col("upper"), col("size"), col("alignment"))

    def __len__(self) -> int:
        return int(self.size.shape[0])


@dataclass(frozen=True)
class Packing:
    """Offsets for a list of buffers; `peak` is the highest end address used."""

    buffers: tuple[Buffer, ...]
    offsets: tuple[int, ...]
    solver: str = "unknown"
    optimal: bool = False

    @property
    def peak(self) -> int:
        """Highest `offset + size` over all buffers (0 when empty)."""
        ends = (o + b.size for o, b in zip(self.offsets, self.buffers, strict=True))
        return max(ends, default=0)

    def offset_of(self) -> dict[str, int]:
        """Map from buffer id to offset."""
        return {b.id: o for b, o in zip(self.buffers, self.offsets, strict=True)}


def check_unique_ids(buffers: Sequence[Buffer]) -> None:
    """Raise InvalidBufferError when two buffers share an id."""
    seen: set[str] = set()
    for b in buffers:
        if b.id in seen:
            raise InvalidBufferError(f"duplicate buffer id {b.id!r}")
        seen.add(b.id)


@dataclass
class SearchResult:
    """Outcome of one exact search at a capacity."""

    offsets: IntArray | None
    """Offsets (bytes) of a packing within the capacity, or None."""
    exhausted: bool
    """True when the search proved that no packing within the capacity exists."""
    nodes: int


def section_index(lower: IntArray, upper: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """Distinct event times, and each lifetime as the run of sections [first, last) between
    them (section k is [times[k], times[k + 1]))."""
    times = np.unique(np.concatenate([lower, upper]))
    first = np.searchsorted(times, lower).astype(np.int64)
    last = np.searchsorted(times, upper).astype(np.int64)
    return times, first, last


def per_section(first: IntArray, last: IntArray, amount: IntArray, count: int) -> IntArray:
    """Sum of `amount` over the runs [first, last) covering each of `count` sections."""
    delta = np.zeros(count + 1, np.int64)
    np.add.at(delta, first, amount)
    np.add.at(delta, last, -amount)
    return np.cumsum(delta)[:count]


def unit_of(arrays: Arrays, capacity: int) -> int:
    """Largest unit dividing every size, every alignment above 1 and the capacity.

    Pushed-down packings (each buffer on 0 or on another) then have every offset a multiple of
    the unit, so solving in units loses nothing and alignments stay whole units."""
    aligns = arrays.alignment[arrays.alignment > 1]
    g = int(np.gcd.reduce(np.concatenate([arrays.size, aligns, [capacity]]).astype(np.int64)))
    return max(g, 1)


def live_profile(arrays: Arrays) -> tuple[IntArray, IntArray]:
    """Distinct event times and the live bytes on [times[k], times[k + 1])."""
    if len(arrays) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    times, first, last = section_index(arrays.lower, arrays.upper)
    return times, per_section(first, last, arrays.size, len(times))


def lower_bound(buffers: Sequence[Buffer] | Arrays) -> int:
    """Maximum over time of the sum of live sizes: no packing can have a smaller peak."""
    arrays = buffers if isinstance(buffers, Arrays) else Arrays.of(buffers)
    _, live = live_profile(arrays)
    return int(live.max(initial=0))


def validate(buffers: Sequence[Buffer], offsets: Sequence[int], capacity: int | None = None) -> int:
    """Check a packing and return its peak; raise InvalidPackingError on any violation."""
    if len(offsets) != len(buffers):
        raise InvalidPackingError(f"{len(offsets)} offsets for {len(buffers)} buffers")
    peak = 0
    for b, off in zip(buffers, offsets, strict=True):
        if off < 0:
            raise InvalidPackingError(f"buffer {b.id}: negative offset {off}")
        if off % b.alignment:
            raise InvalidPackingError(f"buffer {b.id}: offset {off} not aligned to {b.alignment}")
        peak = max(peak, off + b.size)
    if capacity is not None and peak > capacity:
        raise InvalidPackingError(f"peak {peak} exceeds capacity {capacity}")
    _check_no_overlap(buffers, offsets)
    return peak


def _check_no_overlap(buffers: Sequence[Buffer], offsets: Sequence[int]) -> None:
    """Sweep over time keeping live address ranges sorted; neighbours must not intersect."""
    import bisect

    events: list[tuple[int, int, int]] = []
    for i, b in enumerate(buffers):
        if b.size > 0:
            events.append((b.lower, 1, i))
            events.append((b.upper, 0, i))  # ends sort before starts at the same time
    events.sort()
    live: list[tuple[int, int]] = []  # (offset, index), sorted; live ranges are disjoint
    for _, is_start, i in events:
        key = (offsets[i], i)
        pos = bisect.bisect_left(live, key)
        if not is_start:
            del live[pos]
            continue
        if pos > 0:
            _check_pair(buffers, offsets, live[pos - 1][1], i)
        if pos < len(live):
            _check_pair(buffers, offsets, i, live[pos][1])
        live.insert(pos, key)


def _check_pair(buffers: Sequence[Buffer], offsets: Sequence[int], lo: int, hi: int) -> None:
    """Buffer `lo` (lower address) must end at or below the start of buffer `hi`."""
    if offsets[lo] + buffers[lo].size > offsets[hi]:
        a, b = buffers[lo], buffers[hi]
        raise InvalidPackingError(
            f"buffers {a.id} and {b.id} overlap in time and address "
            f"([{offsets[lo]}, {offsets[lo] + a.size}) vs [{offsets[hi]}, {offsets[hi] + b.size}))"
        )
