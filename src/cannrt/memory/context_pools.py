"""The pools of one context: its caching pool and its stream-ordered pools (by id)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cannrt.memory.caching import CachingAllocator
from cannrt.memory.stream_ordered import StreamOrderedPool


@dataclass
class ContextPools:
    """What a context's `memory_pool` slot holds."""

    caching: CachingAllocator | None = None
    stream_ordered: dict[int, StreamOrderedPool] = field(default_factory=dict)  # live pools by id
    default_id: int = 0  # id of the pool aclrtMallocAsync uses (0: not made yet)
    # destroyed pools with allocations still outstanding: released when the last one is freed
    retiring: list[StreamOrderedPool] = field(default_factory=list)
    next_id: int = 1
    # events a stream-ordered pool inserted to order a reuse, each with the points (opaque to
    # this layer) that must be passed before it can be destroyed
    events: list[tuple[object, tuple[object, ...]]] = field(default_factory=list)
