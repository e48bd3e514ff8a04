"""A caching device-memory allocator (the runtime's memory pool; CuPy/PyTorch caching allocators).

Policies:
- requests round up to 512 bytes; those up to 1 MiB come from the small pool (2 MiB segments),
  larger ones from the large pool (20 MiB segments up to 10 MiB, else the request rounded to 2 MiB);
- best fit among the free blocks of the same pool and stream; a larger block is split and the rest
  stays free; adjacent free blocks of one segment merge again when freed;
- a block belongs to the stream it was allocated on and is reused only by that stream (stream
  order makes that safe at once); if it was also used on other streams (`record_stream`), it
  becomes free only once the events recorded on those streams at free time have completed;
- when a segment cannot be allocated, unused cached segments are released and the allocation is
  retried once; then OutOfMemoryError with the requested, free, total and reserved bytes;
- `memory_stats()` uses PyTorch's key schema ({allocated,reserved,active,inactive_split}_bytes and
  allocation / segment counts, each .{all,large_pool,small_pool}.{current,peak,allocated,freed}).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

ROUND = 512
SMALL_LIMIT = 1 << 20
SMALL_SEGMENT = 2 << 20
LARGE_SEGMENT = 20 << 20
LARGE_SEGMENT_LIMIT = 10 << 20
HUGE_ROUND = 2 << 20
POOLS = ("small_pool", "large_pool")


class PoolOutOfMemory(Exception):
    """No segment could be allocated even after releasing the cache."""

    def __init__(self, requested: int, reserved: int, cause: Exception) -> None:
        super().__init__(f"requested {requested} bytes with {reserved} bytes reserved by the pool: {cause}")
        self.requested = requested
        self.reserved = reserved
        self.cause = cause


@dataclass(eq=False)
class Block:
    """A piece of a segment: allocated (handed out) or free (cached)."""

    address: int
    size: int
    segment: Segment
    stream: Hashable
    allocated: bool = False
    prev: Block | None = None
    next: Block | None = None
    uses: set[Hashable] = field(default_factory=set)  # other streams the block was used on
    pending: list[object] = field(default_factory=list)  # events that must complete before reuse


@dataclass(eq=False)
class Segment:
    """One device allocation the pool carves blocks from."""

    address: int
    size: int
    pool: str


class CachingAllocator:
    """Caches device memory obtained through `malloc` / `free` (see the module docstring)."""

    def __init__(
        self,
        malloc: Callable[[int], int],
        free: Callable[[int], None],
        record_event: Callable[[Hashable], object],
        event_done: Callable[[object], bool],
        on_block: Callable[[int, int], None] | None = None,
    ) -> None:
        self._malloc = malloc
        self._free = free
        self._record_event = record_event
        self._event_done = event_done
        self._on_block = on_block  # (address, requested bytes): tells the MMU about handed-out blocks
        self._free_blocks: dict[tuple[str, Hashable], list[tuple[int, int, Block]]] = {}
        self._by_address: dict[int, Block] = {}
        self._segments: dict[int, Segment] = {}
        self._pending: list[Block] = []
        self.stats = _Stats()

    # -- allocation --------------------------------------------------------------------------
    def allocate(self, nbytes: int, stream: Hashable) -> Block:
        """A block of at least nbytes for use on stream."""
        size = max(ROUND, -(-nbytes // ROUND) * ROUND)
        pool = "small_pool" if size <= SMALL_LIMIT else "large_pool"
        self._collect_pending()
        block = self._best_fit(pool, stream, size)
        if block is None:
            block = self._new_segment(pool, stream, size)
        if block.size - size >= ROUND:
            self._split(block, size)
        block.allocated = True
        self._by_address[block.address] = block
        if self._on_block is not None:
            self._on_block(block.address, nbytes)
        self.stats.change(pool, "allocated_bytes", block.size)
        self.stats.change(pool, "active_bytes", block.size)
        self.stats.change(pool, "allocation", 1)
        return block

    def _best_fit(self, pool: str, stream: Hashable, size: int) -> Block | None:
        free = self._free_blocks.get((pool, stream))
        if not free:
            return None
        index = bisect.bisect_left(free, (size, -1))
        if index == len(free):
            return None
        _, _, block = free.pop(index)
        self._update_inactive_split(block.segment, -block.size)
        return block

    def _new_segment(self, pool: str, stream: Hashable, size: int) -> Block:
        if pool == "small_pool":
            segment_size = SMALL_SEGMENT
        elif size <= LARGE_SEGMENT_LIMIT:
            segment_size = LARGE_SEGMENT
        else:
            segment_size = -(-size // HUGE_ROUND) * HUGE_ROUND
        try:
            address = self._malloc(segment_size)
        except Exception:
            self.stats.counters["num_alloc_retries"] += 1
            self.empty_cache()
            try:
                address = self._malloc(segment_size)
            except Exception as exc:
                self.stats.counters["num_ooms"] += 1
                raise PoolOutOfMemory(size, self.stats.current("reserved_bytes"), exc) from exc
        segment = Segment(address, segment_size, pool)
        self._segments[address] = segment
        self.stats.change(pool, "reserved_bytes", segment_size)
        self.stats.change(pool, "segment", 1)
        return Block(address, segment_size, segment, stream)

    def _split(self, block: Block, size: int) -> None:
        rest = Block(block.address + size, block.size - size, block.segment, block.stream, prev=block, next=block.next)
        if block.next is not None:
            block.next.prev = rest
        block.next = rest
        block.size = size
        self._insert_free(rest)

    # -- release -----------------------------------------------------------------------------
    def record_stream(self, block: Block, stream: Hashable) -> None:
        """The block is also used on stream: its reuse waits for that stream's work at free."""
        if stream != block.stream:
            block.uses.add(stream)

    def free(self, block: Block) -> None:
        """Give a block back; it becomes reusable by its stream (after other streams' work)."""
        if not block.allocated or self._by_address.get(block.address) is not block:
            raise ValueError(f"block at 0x{block.address:x} is not allocated from this pool")
        del self._by_address[block.address]
        block.allocated = False
        pool = block.segment.pool
        self.stats.change(pool, "allocated_bytes", -block.size)
        self.stats.change(pool, "allocation", -1)
        if block.uses:
            block.pending = [self._record_event(stream) for stream in block.uses]
            block.uses = set()
            self._pending.append(block)
            return
        self.stats.change(pool, "active_bytes", -block.size)
        self._release_to_cache(block)

    def _collect_pending(self) -> None:
        still = []
        for block in self._pending:
            block.pending = [event for event in block.pending if not self._event_done(event)]
            if block.pending:
                still.append(block)
            else:
                self.stats.change(block.segment.pool, "active_bytes", -block.size)
                self._release_to_cache(block)
        self._pending = still

    def _release_to_cache(self, block: Block) -> None:
        for neighbour in (block.prev, block.next):
            if neighbour is not None and not neighbour.allocated and not neighbour.pending:
                self._remove_free(neighbour)
                block = self._merge(block, neighbour)
        self._insert_free(block)

    def _merge(self, block: Block, neighbour: Block) -> Block:
        first, second = (block, neighbour) if block.address < neighbour.address else (neighbour, block)
        first.size += second.size
        first.next = second.next
        if second.next is not None:
            second.next.prev = first
        return first

    def _insert_free(self, block: Block) -> None:
        bisect.insort(self._free_blocks.setdefault((block.segment.pool, block.stream), []), _key(block))
        self._update_inactive_split(block.segment, block.size)

    def _remove_free(self, block: Block) -> None:
        self._free_blocks[(block.segment.pool, block.stream)].remove(_key(block))
        self._update_inactive_split(block.segment, -block.size)

    def _update_inactive_split(self, segment: Segment, delta: int) -> None:
        """Free bytes inside a segment that is partly in use (cannot be released)."""
        self.stats.set_inactive_split(segment, delta)

    def empty_cache(self) -> None:
        """Release every wholly free segment back to the device."""
        self._collect_pending()
        for (pool, stream), free in list(self._free_blocks.items()):
            keep = []
            for entry in free:
                block = entry[2]
                if block.prev is None and block.next is None and block.size == block.segment.size:
                    self._free(block.segment.address)
                    del self._segments[block.segment.address]
                    self.stats.change(pool, "reserved_bytes", -block.size)
                    self.stats.change(pool, "segment", -1)
                    self._update_inactive_split(block.segment, -block.size)
                else:
                    keep.append(entry)
            self._free_blocks[(pool, stream)] = keep

    def release_all(self) -> None:
        """Free every segment (the device is being reset); blocks become invalid."""
        for segment in list(self._segments.values()):
            self._free(segment.address)
        self._segments.clear()
        self._free_blocks.clear()
        self._by_address.clear()
        self._pending.clear()

    def memory_stats(self) -> dict[str, int]:
        """PyTorch-style statistics (see the module docstring)."""
        return self.stats.flat()


def _key(block: Block) -> tuple[int, int, Block]:
    return (block.size, block.address, block)


class _Stats:
    """Counters in PyTorch's memory_stats schema."""

    KINDS = ("allocated_bytes", "reserved_bytes", "active_bytes", "inactive_split_bytes", "allocation", "segment")

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], dict[str, int]] = {
            (kind, pool): {"current": 0, "peak": 0, "allocated": 0, "freed": 0}
            for kind in self.KINDS
            for pool in ("all", *POOLS)
        }
        self.counters = {"num_alloc_retries": 0, "num_ooms": 0}
        self._inactive: dict[int, int] = {}

    def change(self, pool: str, kind: str, delta: int) -> None:
        for target in ("all", pool):
            entry = self.values[(kind, target)]
            entry["current"] += delta
            entry["peak"] = max(entry["peak"], entry["current"])
            entry["allocated" if delta > 0 else "freed"] += abs(delta)

    def set_inactive_split(self, segment: Segment, delta: int) -> None:
        """Track free bytes per segment; they count as inactive split bytes while the segment is split."""
        before = self._split_bytes(segment)
        self._inactive[id(segment)] = self._inactive.get(id(segment), 0) + delta
        after = self._split_bytes(segment)
        if after != before:
            self.change(segment.pool, "inactive_split_bytes", after - before)

    def _split_bytes(self, segment: Segment) -> int:
        free = self._inactive.get(id(segment), 0)
        return free if 0 < free < segment.size else 0

    def current(self, kind: str) -> int:
        return self.values[(kind, "all")]["current"]

    def flat(self) -> dict[str, int]:
        stats = {
            f"{kind}.{pool}.{stat}": value
            for (kind, pool), entry in self.values.items()
            for stat, value in entry.items()
        }
        stats.update(self.counters)
        return stats
