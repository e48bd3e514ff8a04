"""The static memory pool: one device block for a whole graph, tensors at planned offsets.

Models the runtime's static pool: at model load the memory topology is planned
(cannrt.memory.planner over cross-stream-safe lifetimes), one contiguous block is allocated, and
each tensor is handed out at its offset. Tensors whose lifetimes do not overlap share addresses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cannrt.memory.lifetimes import ALIGNMENT, Topology, lifetimes
from cannrt.memory.planner import Packing, lower_bound, plan


class PoolClosedError(RuntimeError):
    """A tensor was requested from a pool whose block was released."""


@dataclass(frozen=True)
class PoolReport:
    """What planning achieved: block size, the lifetime lower bound, and the no-reuse total."""

    block_bytes: int
    lower_bound: int
    no_reuse_bytes: int
    tensors: int
    solver: str

    @property
    def saved_pct(self) -> float:
        """Memory saved against giving every tensor its own space."""
        return 100.0 * (1 - self.block_bytes / self.no_reuse_bytes) if self.no_reuse_bytes else 0.0


class StaticPool:
    """Plans a topology, allocates one block through `allocate`, and resolves tensor addresses."""

    def __init__(
        self,
        topology: Topology,
        allocate: Callable[[int], int],
        free: Callable[[int], None],
        *,
        capacity: int | None = None,
        time_limit: float = 1.0,
        alignment: int = ALIGNMENT,
    ) -> None:
        buffers = lifetimes(topology, alignment)
        self.packing: Packing = plan(buffers, capacity=capacity, time_limit=time_limit)
        self.report = PoolReport(
            block_bytes=self.packing.peak,
            lower_bound=lower_bound(buffers),
            no_reuse_bytes=sum(b.size for b in buffers),
            tensors=len(buffers),
            solver=self.packing.solver,
        )
        self._offsets = self.packing.offset_of()
        self._free = free
        self.base = allocate(max(alignment, self.packing.peak))
        self.closed = False

    def offset(self, name: str) -> int:
        """Offset of a tensor inside the block; KeyError for unknown names."""
        return self._offsets[name]

    def address(self, name: str) -> int:
        """Device address of a tensor."""
        if self.closed:
            raise PoolClosedError(f"the pool was released; tensor {name!r} has no memory")
        return self.base + self._offsets[name]

    def release(self) -> None:
        """Free the block (after the graph's streams are done with it)."""
        if not self.closed:
            self.closed = True
            self._free(self.base)
