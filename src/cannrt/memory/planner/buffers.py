"""The buffer model: lifetimes, sizes, alignment, packings, validation and the lower bound."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


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
    stats: dict[str, float] = field(default_factory=dict)

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


def live_profile(arrays: Arrays) -> tuple[IntArray, IntArray]:
    """Distinct event times and the live bytes on [times[k], times[k + 1])."""
    if len(arrays) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    times = np.unique(np.concatenate([arrays.lower, arrays.upper]))
    delta = np.zeros(len(times), np.int64)
    np.add.at(delta, np.searchsorted(times, arrays.lower), arrays.size)
    np.add.at(delta, np.searchsorted(times, arrays.upper), -arrays.size)
    return times, np.cumsum(delta)


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
