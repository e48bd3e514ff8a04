"""Search for packings below the greedy peak (placeholder: returns the start)."""

from __future__ import annotations

from collections.abc import Callable

from cannrt.memory.planner.buffers import Packing


def improve(
    start: Packing,
    bound: int,
    target: int,
    deadline: float,
    progress: Callable[[float, int], None] | None = None,
) -> Packing:
    """Best packing found before `deadline` (monotonic clock), never worse than `start`."""
    return start
