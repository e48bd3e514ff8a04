"""`plan`: the one call the runtime and the CLI make."""

from __future__ import annotations

import time
from collections.abc import Sequence

from cannrt.memory.planner.buffers import (
    Buffer,
    InfeasibleError,
    Packing,
    Progress,
    check_unique_ids,
    lower_bound,
)
from cannrt.memory.planner.greedy import greedy, greedy_by_size

GREEDY_ALL_MAX = 5000
"""Above this many buffers `plan` runs one greedy pass instead of eight."""


class DoesNotFitError(InfeasibleError):
    """The lower bound alone exceeds the capacity."""

    def __init__(self, bound: int, capacity: int) -> None:
        super().__init__(f"does not fit: lower bound {bound} > capacity {capacity}")
        self.bound = bound
        self.capacity = capacity


class NotFoundError(InfeasibleError):
    """The search ran out of time before finding a packing within the capacity."""

    def __init__(self, time_limit: float, best: Packing) -> None:
        super().__init__(f"no packing found within {time_limit:g} s (best: {best.peak})")
        self.time_limit = time_limit
        self.best = best


def plan(
    buffers: Sequence[Buffer],
    capacity: int | None = None,
    time_limit: float = 10.0,
    progress: Progress | None = None,
) -> Packing:
    """Offsets for `buffers` with the smallest peak found within `time_limit` seconds.

    With a capacity the search stops at the first packing that fits and raises
    DoesNotFitError / NotFoundError when none does. The result is always validated.
    """
    start = time.monotonic()
    check_unique_ids(buffers)
    bound = lower_bound(buffers)
    if capacity is not None and bound > capacity:
        raise DoesNotFitError(bound, capacity)
    # every greedy pass is a Python loop over the buffers: big graphs get one (the skyline
    # search then does better than the other seven would)
    best = greedy(buffers) if len(buffers) <= GREEDY_ALL_MAX else greedy_by_size(buffers)
    if best.peak > bound and time_limit > 0 and time.monotonic() < start + time_limit:
        from cannrt.memory.planner.search import improve

        target = bound if capacity is None else capacity
        deadline = start + time_limit
        best = improve(best, bound, target, deadline, progress)
    if capacity is not None and best.peak > capacity:
        raise NotFoundError(time_limit, best)
    return best  # validated by greedy, and again by improve if it found better
