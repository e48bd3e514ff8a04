"""A stream-ordered memory pool (aclrtMemPoolCreate, aclrtMemPoolMallocAsync/FreeAsync, TrimTo;
CUDA's cudaMemPool semantics).

- A free is an operation on a stream: the block becomes free when the stream reaches it (an
  event recorded there marks the point).
- Reuse: on the freeing stream at once (stream order makes it safe); on another stream when the
  free has completed as far as the host can tell (REUSE_ALLOW_OPPORTUNISTIC), or, failing that,
  by making the allocating stream wait for the free's event (REUSE_ALLOW_INTERNAL_DEPENDENCIES);
  with both off, only a new segment serves another stream.
- Segments are multiples of 2 MiB obtained page-exact; blocks round to 512 bytes, best fit with
  split; adjacent free blocks merge when both frees completed or both were on one stream.
- Release: when a new segment is needed and reserved bytes exceed RELEASE_THRESHOLD (default
  0), wholly free segments whose frees completed go back to the device first; `trim_to(n)`
  releases them down to n bytes. (CUDA also releases at every synchronize call; the runtime has
  no hook there, so memory above the threshold stays cached until one of these.) `max_size`
  caps the reserved bytes.
- REUSE_FOLLOW_EVENT_DEPENDENCIES is accepted and reported but not tracked separately: an order
  the program made with its own events is used once its completion is visible (opportunistic)
  or through an inserted wait.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import IntEnum

from cannrt.memory.block_list import fit_key, merge_neighbours, split_off

ROUND = 512
GRANULE = 2 << 20


class PoolAttr(IntEnum):
    """aclrtMemPoolAttr (CUDA's cudaMemPoolAttr values)."""

    REUSE_FOLLOW_EVENT_DEPENDENCIES = 1
    REUSE_ALLOW_OPPORTUNISTIC = 2
    REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3
    RELEASE_THRESHOLD = 4
    RESERVED_MEM_CURRENT = 5
    RESERVED_MEM_HIGH = 6
    USED_MEM_CURRENT = 7
    USED_MEM_HIGH = 8


class PoolExhausted(Exception):
    """No segment could be had for a stream-ordered allocation."""

    def __init__(self, requested: int, segment: int, reserved: int, cause: Exception | str) -> None:
        super().__init__(f"requested {requested} bytes (a segment of {segment}), {reserved} reserved: {cause}")
        self.requested = requested
        self.segment = segment
        self.reserved = reserved
        self.cause = cause


@dataclass(eq=False)
class _Block:
    address: int
    size: int
    segment: int  # the segment's address
    stream: Hashable  # allocating stream while allocated; freeing stream once freed
    event: object | None = None  # the free's event until known complete
    allocated: bool = False
    prev: _Block | None = None
    next: _Block | None = None


class StreamOrderedPool:
    """Blocks allocated and freed in stream order (see the module docstring)."""

    def __init__(
        self,
        obtain: Callable[[int], int],
        release: Callable[[int], None],
        record: Callable[[Hashable], object],  # a mark of where a free sits on its stream (no resources)
        done: Callable[[object], bool],  # whether the device has passed a mark
        wait: Callable[[Hashable, object], None],
        *,
        max_size: int | None = None,
        on_block: Callable[[int, int], None] | None = None,
    ) -> None:
        self._obtain, self._release, self._record = obtain, release, record
        self._done, self._wait, self._on_block = done, wait, on_block
        self.max_size = max_size
        self.on_event: Callable[[str, int, int, Hashable], None] | None = None  # the memory timeline
        self.attrs: dict[PoolAttr, int] = {
            PoolAttr.REUSE_FOLLOW_EVENT_DEPENDENCIES: 1,
            PoolAttr.REUSE_ALLOW_OPPORTUNISTIC: 1,
            PoolAttr.REUSE_ALLOW_INTERNAL_DEPENDENCIES: 1,
            PoolAttr.RELEASE_THRESHOLD: 0,
        }
        self.reserved = self.reserved_high = self.used = self.used_high = 0
        self._segments: dict[int, tuple[int, _Block]] = {}  # address -> (size, first block)
        self._free: list[tuple[int, int, _Block]] = []  # (size, address, block), sorted
        self._live: dict[int, _Block] = {}
        self._lock = threading.RLock()

    # -- attributes --------------------------------------------------------------------------
    def get_attr(self, attr: int) -> int:
        """aclrtMemPoolGetAttr; ValueError for an unknown attribute."""
        key = PoolAttr(attr)
        with self._lock:
            derived = {
                PoolAttr.RESERVED_MEM_CURRENT: self.reserved,
                PoolAttr.RESERVED_MEM_HIGH: self.reserved_high,
                PoolAttr.USED_MEM_CURRENT: self.used,
                PoolAttr.USED_MEM_HIGH: self.used_high,
            }
            return derived[key] if key in derived else self.attrs[key]

    def set_attr(self, attr: int, value: int) -> None:
        """aclrtMemPoolSetAttr: the reuse flags, the release threshold, and the two high-water
        marks (only to 0, which resets them). ValueError otherwise."""
        key = PoolAttr(attr)
        with self._lock:
            if key in (PoolAttr.RESERVED_MEM_HIGH, PoolAttr.USED_MEM_HIGH):
                if value != 0:
                    raise ValueError(f"{key.name} can only be reset to 0, not {value}")
                if key == PoolAttr.RESERVED_MEM_HIGH:
                    self.reserved_high = self.reserved
                else:
                    self.used_high = self.used
                return
            if key in (PoolAttr.RESERVED_MEM_CURRENT, PoolAttr.USED_MEM_CURRENT):
                raise ValueError(f"{key.name} is read-only")
            if value < 0 or (key != PoolAttr.RELEASE_THRESHOLD and value not in (0, 1)):
                raise ValueError(f"{key.name} cannot be {value}")
            self.attrs[key] = value

    # -- allocation --------------------------------------------------------------------------
    def malloc_async(self, nbytes: int, stream: Hashable) -> int:
        """A block usable by work queued on stream from now on (aclrtMemPoolMallocAsync)."""
        size = max(ROUND, -(-nbytes // ROUND) * ROUND)
        with self._lock:
            block = self._reusable(size, stream)
            if block is None:
                block = self._new_segment(size, stream)
            else:
                self._free.remove(fit_key(block))
            if block.size - size >= ROUND:
                rest = _Block(block.address + size, block.size - size, block.segment, block.stream, block.event)
                bisect.insort(self._free, fit_key(split_off(block, size, rest)))
            block.allocated, block.stream, block.event = True, stream, None
            self._live[block.address] = block
            self.used += block.size
            self.used_high = max(self.used_high, self.used)
            if self._on_block is not None:
                self._on_block(block.address, nbytes)
            if self.on_event is not None:
                self.on_event("block_alloc", block.address, block.size, stream)
            return block.address

    def _reusable(self, size: int, stream: Hashable) -> _Block | None:
        """Best fit: first a block free for stream now, then one reached through a wait."""
        free = self._free
        index = bisect.bisect_left(free, (size, -1))
        opportunistic = self.attrs[PoolAttr.REUSE_ALLOW_OPPORTUNISTIC]
        for _, _, block in itertools.islice(free, index, None):  # the list is not changed while read
            if block.stream == stream or block.event is None:
                return block
            if opportunistic and self._done(block.event):
                block.event = None
                return block
        if self.attrs[PoolAttr.REUSE_ALLOW_INTERNAL_DEPENDENCIES]:
            for _, _, block in itertools.islice(free, index, None):
                assert block.event is not None
                if not self._done(block.event):
                    self._wait(stream, block.event)  # the allocating stream waits for the free
                block.event = None
                return block
        return None

    def _new_segment(self, size: int, stream: Hashable) -> _Block:
        segment = -(-size // GRANULE) * GRANULE
        if self.reserved > self.attrs[PoolAttr.RELEASE_THRESHOLD]:
            self._trim(self.attrs[PoolAttr.RELEASE_THRESHOLD])
        if self.max_size is not None and self.reserved + segment > self.max_size:
            self._trim(0)
            if self.reserved + segment > self.max_size:
                raise PoolExhausted(size, segment, self.reserved, f"the pool's max size of {self.max_size} bytes")
        try:
            address = self._obtain(segment)
        except Exception as first:
            self._trim(0)
            try:
                address = self._obtain(segment)
            except Exception:
                raise PoolExhausted(size, segment, self.reserved, first) from first
        block = _Block(address, segment, address, stream)
        self._segments[address] = (segment, block)
        self.reserved += segment
        self.reserved_high = max(self.reserved_high, self.reserved)
        if self.on_event is not None:
            self.on_event("segment_alloc", address, segment, stream)
        return block

    # -- free --------------------------------------------------------------------------------
    def owns(self, address: int) -> bool:
        """True if address is a live allocation of this pool."""
        with self._lock:
            return address in self._live

    def free_async(self, address: int, stream: Hashable) -> None:
        """Free when stream reaches this point (aclrtMemPoolFreeAsync); KeyError if not live."""
        with self._lock:
            block = self._live.pop(address)
            event = self._record(stream)
            block.allocated, block.stream, block.event = False, stream, event
            self.used -= block.size
            if self.on_event is not None:
                self.on_event("block_free", address, -block.size, stream)
            for neighbour in (block.prev, block.next):
                if neighbour is not None and not neighbour.allocated and self._mergeable(block, neighbour):
                    self._free.remove(fit_key(neighbour))
                    block = _merge(block, neighbour, stream, event)
            bisect.insort(self._free, fit_key(block))

    def _mergeable(self, block: _Block, neighbour: _Block) -> bool:
        if neighbour.stream == block.stream:
            return True  # the later free (block's) completes after the earlier one
        return neighbour.event is None or self._done(neighbour.event)

    # -- release -----------------------------------------------------------------------------
    def trim_to(self, keep: int) -> None:
        """Release wholly free segments whose frees completed until at most keep bytes stay
        reserved (aclrtMemPoolTrimTo)."""
        with self._lock:
            self._trim(keep)

    def _coalesce(self, head: _Block) -> None:
        """Merge neighbouring free blocks of a segment whose frees have both completed."""
        block = head
        while block.next is not None:
            after = block.next
            settled = not block.allocated and not after.allocated
            settled = settled and all(b.event is None or self._done(b.event) for b in (block, after))
            if settled:
                self._free.remove(fit_key(block))
                self._free.remove(fit_key(after))
                block.event = after.event = None
                block = _merge(block, after, after.stream, None)
                bisect.insort(self._free, fit_key(block))
            else:
                block = after

    def _trim(self, keep: int) -> None:
        for address, (size, head) in sorted(self._segments.items(), key=lambda item: -item[1][0]):
            if self.reserved <= keep:
                return
            self._coalesce(head)
            if head.allocated or head.next is not None or head.size != size:
                continue
            if head.event is not None and not self._done(head.event):
                continue
            self._free.remove(fit_key(head))
            del self._segments[address]
            self.reserved -= size
            self._release(address)
            if self.on_event is not None:
                self.on_event("segment_free", address, -size, head.stream)

    def outstanding(self) -> int:
        """Live allocations."""
        with self._lock:
            return len(self._live)

    def release_all(self) -> None:
        """Give back every segment (the pool is destroyed; its frees must have completed)."""
        with self._lock:
            for address, (size, head) in list(self._segments.items()):
                self._release(address)
                if self.on_event is not None:
                    self.on_event("segment_free", address, -size, head.stream)
            self._segments.clear()
            self._free.clear()
            self._live.clear()
            self.reserved = self.used = 0

    def blocks(self) -> list[tuple[int, int, bool]]:
        """(address, size, allocated) of every block, in address order (a snapshot for checks)."""
        with self._lock:
            result = []
            for _, (_, head) in sorted(self._segments.items()):
                block: _Block | None = head
                while block is not None:
                    result.append((block.address, block.size, block.allocated))
                    block = block.next
            return result


def _merge(block: _Block, neighbour: _Block, stream: Hashable, event: object) -> _Block:
    """One free block of two; the newer free (stream, event) decides when it may be reused."""
    first = merge_neighbours(block, neighbour)
    first.stream, first.event = stream, event
    return first
