"""A caching device-memory allocator (the runtime's memory pool; CuPy/PyTorch caching allocators).

Policies:
- requests round up to 512 bytes; those up to 1 MiB come from the small pool (2 MiB segments),
  larger ones from the large pool (20 MiB segments up to 10 MiB, else the request rounded to 2 MiB);
- best fit among the free blocks of the same pool and stream; a larger block is split and the rest
  stays free; adjacent free blocks of one segment merge again when freed;
- with `max_split_size` set, requests at or above it are "oversize": they are never split and
  take a cached block only if it wastes less than 20 MiB, and smaller requests never split an
  oversize block (PyTorch's max_split_size_mb);
- a block belongs to the stream it was allocated on and is reused only by that stream (stream
  order makes that safe at once); if it was also used on other streams (`record_stream`), it
  becomes free only once the marks recorded on those streams at free time (`record_event`) are
  done (`event_done`);
- `limit` caps the reserved bytes (torch.cuda.set_per_process_memory_fraction);
- when a segment cannot be had (device full or over the limit), unused cached segments are
  released and the allocation retried once; then PoolOutOfMemory with the numbers;
- `memory_stats()` has every key of torch.cuda.memory_stats (cannrt.memory.caching_stats);
- every method takes the pool's lock: host threads may allocate and free concurrently.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from cannrt.memory.block_list import fit_key, merge_neighbours, split_off
from cannrt.memory.caching_stats import KINDS, POOLS, PoolStats

ROUND = 512
SMALL_LIMIT = 1 << 20
SMALL_SEGMENT = 2 << 20
LARGE_SEGMENT = 20 << 20
LARGE_SEGMENT_LIMIT = 10 << 20
HUGE_ROUND = 2 << 20
OVERSIZE_WASTE = 20 << 20  # an oversize request takes a cached block only if it wastes less


class PoolOutOfMemory(Exception):
    """No segment could be had even after releasing the cache."""

    def __init__(
        self,
        requested: int,
        reserved: int,
        cause: Exception | str,
        *,
        segment: int = 0,
        allocated: int = 0,
        largest_free: int = 0,
        limit: int | None = None,
    ) -> None:
        super().__init__(
            f"requested {requested} bytes (a segment of {segment}) with {allocated} bytes in use, {reserved} "
            f"reserved by the pool, largest free block {largest_free}: {cause}"
        )
        self.requested = requested
        self.segment = segment  # bytes of the segment the pool tried to get
        self.reserved = reserved
        self.allocated = allocated
        self.largest_free = largest_free
        self.limit = limit
        self.cause = cause


@dataclass(eq=False)
class Block:
    """A piece of a segment: allocated (handed out) or free (cached)."""

    address: int
    size: int
    segment: Segment
    stream: Hashable
    allocated: bool = False
    requested: int = 0  # bytes the caller asked for
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
    head: Block | None = None  # the block at the segment's start (it survives every merge)
    split: tuple[int, int] = (0, 0)  # (free blocks, free bytes) counted as inactive split now


class CachingAllocator:
    """Caches device memory obtained through `malloc` / `free` (see the module docstring)."""

    def __init__(
        self,
        malloc: Callable[[int], int],
        free: Callable[[int], None],
        record_event: Callable[[Hashable], object],
        event_done: Callable[[object], bool],
        on_block: Callable[[int, int], None] | None = None,
        synchronize: Callable[[], None] | None = None,
    ) -> None:
        self._malloc = malloc
        self._free = free
        self._record_event = record_event
        self._event_done = event_done
        self._on_block = on_block  # (address, requested bytes): tells the MMU about handed-out blocks
        self._synchronize = synchronize  # waits for the device before segments are given back
        self.on_event: Callable[[str, int, int, Hashable], None] | None = None  # the memory timeline
        self._free_blocks: dict[tuple[str, Hashable], list[tuple[int, int, Block]]] = {}
        self._by_address: dict[int, Block] = {}
        self._segments: dict[int, Segment] = {}
        self._pending: list[Block] = []
        self._lock = threading.RLock()
        self.limit: int | None = None  # most bytes the pool may reserve (None: the device's capacity)
        self.max_split_size: int | None = None
        self.stats = PoolStats()

    # -- allocation --------------------------------------------------------------------------
    def allocate(self, nbytes: int, stream: Hashable) -> Block:
        """A block of at least nbytes for use on stream."""
        size = max(ROUND, -(-nbytes // ROUND) * ROUND)
        pool = "small_pool" if size <= SMALL_LIMIT else "large_pool"
        with self._lock:
            self._collect_pending()
            block = self._best_fit(pool, stream, size)
            if block is None:
                block = self._new_segment(pool, stream, size)
            if block.size - size >= ROUND and (pool == "small_pool" or not self._oversize(size)):
                self._split(block, size)
            block.allocated = True
            block.requested = nbytes
            self._by_address[block.address] = block
            if self._on_block is not None:
                self._on_block(block.address, nbytes)
            self._count_block(block, 1)
            self._refresh_split(block.segment)
            if self.on_event is not None:
                self.on_event("block_alloc", block.address, block.size, stream)
            return block

    def _oversize(self, size: int) -> bool:
        return self.max_split_size is not None and size >= self.max_split_size

    def _best_fit(self, pool: str, stream: Hashable, size: int) -> Block | None:
        free = self._free_blocks.get((pool, stream))
        if not free:
            return None
        index = bisect.bisect_left(free, (size, -1))
        if index == len(free):
            return None
        candidate = free[index][2]
        if self.max_split_size is not None:
            if not self._oversize(size) and self._oversize(candidate.size):
                return None  # a small request never splits an oversize block
            if self._oversize(size) and candidate.size >= size + OVERSIZE_WASTE:
                return None
        free.pop(index)
        return candidate

    def _new_segment(self, pool: str, stream: Hashable, size: int) -> Block:
        if pool == "small_pool":
            segment_size = SMALL_SEGMENT
        elif size <= LARGE_SEGMENT_LIMIT and not self._oversize(size):
            segment_size = LARGE_SEGMENT
        else:
            segment_size = -(-size // HUGE_ROUND) * HUGE_ROUND
        try:
            address = self._obtain(segment_size)
        except Exception:
            self.stats.counters["num_alloc_retries"] += 1
            self.empty_cache()
            try:
                address = self._obtain(segment_size)
            except Exception as exc:
                self.stats.counters["num_ooms"] += 1
                raise PoolOutOfMemory(
                    size,
                    self.stats.current("reserved_bytes"),
                    exc,
                    segment=segment_size,
                    allocated=self.stats.current("allocated_bytes"),
                    largest_free=self.largest_free_block(),
                    limit=self.limit,
                ) from exc
        segment = Segment(address, segment_size, pool)
        self._segments[address] = segment
        self.stats.counters["num_device_alloc"] += 1
        self.stats.change(pool, "reserved_bytes", segment_size)
        self.stats.change(pool, "segment", 1)
        if self._oversize(segment_size):
            self.stats.change_oversize("oversize_segments", 1)
        if self.on_event is not None:
            self.on_event("segment_alloc", address, segment_size, stream)
        segment.head = Block(address, segment_size, segment, stream)
        return segment.head

    def _obtain(self, segment_size: int) -> int:
        reserved = self.stats.current("reserved_bytes")
        if self.limit is not None and reserved + segment_size > self.limit:
            raise MemoryError(
                f"the pool's limit of {self.limit} bytes: {reserved} reserved, a segment of {segment_size} needed"
            )
        return self._malloc(segment_size)

    def _split(self, block: Block, size: int) -> None:
        rest = Block(block.address + size, block.size - size, block.segment, block.stream)
        self._insert_free(split_off(block, size, rest))

    def _count_block(self, block: Block, sign: int) -> None:
        """A block handed out (sign 1) or given back (-1): allocation and requested counts."""
        pool = block.segment.pool
        self.stats.change(pool, "allocated_bytes", sign * block.size)
        self.stats.change(pool, "requested_bytes", sign * block.requested)
        self.stats.change(pool, "allocation", sign)
        if sign > 0:
            self.stats.change(pool, "active_bytes", block.size)
            self.stats.change(pool, "active", 1)
        if self._oversize(block.size):
            self.stats.change_oversize("oversize_allocations", sign)

    # -- release -----------------------------------------------------------------------------
    def record_stream(self, block: Block, stream: Hashable) -> None:
        """The block is also used on stream: its reuse waits for that stream's work at free."""
        with self._lock:
            if stream != block.stream:
                block.uses.add(stream)

    def free(self, block: Block) -> None:
        """Give a block back; it becomes reusable by its stream (after other streams' work)."""
        with self._lock:
            if not block.allocated or self._by_address.get(block.address) is not block:
                raise ValueError(f"block at 0x{block.address:x} is not allocated from this pool")
            del self._by_address[block.address]
            block.allocated = False
            self._count_block(block, -1)
            if self.on_event is not None:
                self.on_event("block_free", block.address, -block.size, block.stream)
            if block.uses:
                block.pending = [self._record_event(stream) for stream in block.uses]
                block.uses = set()
                self._pending.append(block)
                return
            self._deactivate(block)

    def _deactivate(self, block: Block) -> None:
        self.stats.change(block.segment.pool, "active_bytes", -block.size)
        self.stats.change(block.segment.pool, "active", -1)
        self._release_to_cache(block)
        self._refresh_split(block.segment)

    def _collect_pending(self) -> None:
        still = []
        for block in self._pending:
            block.pending = [event for event in block.pending if not self._event_done(event)]
            if block.pending:
                still.append(block)
            else:
                self._deactivate(block)
        self._pending = still

    def _release_to_cache(self, block: Block) -> None:
        for neighbour in (block.prev, block.next):
            if neighbour is not None and not neighbour.allocated and not neighbour.pending:
                self._remove_free(neighbour)
                block = merge_neighbours(block, neighbour)
        self._insert_free(block)

    def _insert_free(self, block: Block) -> None:
        bisect.insort(self._free_blocks.setdefault((block.segment.pool, block.stream), []), fit_key(block))

    def _remove_free(self, block: Block) -> None:
        self._free_blocks[(block.segment.pool, block.stream)].remove(fit_key(block))

    def _refresh_split(self, segment: Segment) -> None:
        """Recount the segment's inactive split blocks (free blocks of a segment in pieces)."""
        count = size = 0
        block = segment.head
        if block is not None and block.next is not None:
            while block is not None:
                if not block.allocated and not block.pending:
                    count, size = count + 1, size + block.size
                block = block.next
        old_count, old_size = segment.split
        segment.split = (count, size)
        self.stats.change(segment.pool, "inactive_split", count - old_count)
        self.stats.change(segment.pool, "inactive_split_bytes", size - old_size)

    def largest_free_block(self) -> int:
        """Bytes of the largest cached free block (0 if none)."""
        with self._lock:
            return max((free[-1][0] for free in self._free_blocks.values() if free), default=0)

    def empty_cache(self) -> None:
        """Release every wholly free segment back to the device (after the device is idle)."""
        with self._lock:
            self._collect_pending()
            whole = [
                entry[2]
                for free in self._free_blocks.values()
                for entry in free
                if entry[2].prev is None and entry[2].next is None
            ]
            if not whole:
                return
            if self._synchronize is not None:
                self._synchronize()
                self.stats.counters["num_sync_all_streams"] += 1
            for block in whole:
                self._release_segment(block)

    def _release_segment(self, block: Block) -> None:
        segment = block.segment
        self._remove_free(block)
        self._free(segment.address)
        del self._segments[segment.address]
        self.stats.counters["num_device_free"] += 1
        self.stats.change(segment.pool, "reserved_bytes", -segment.size)
        self.stats.change(segment.pool, "segment", -1)
        if self._oversize(segment.size):
            self.stats.change_oversize("oversize_segments", -1)
        if self.on_event is not None:
            self.on_event("segment_free", segment.address, -segment.size, block.stream)

    def release_all(self) -> None:
        """Free every segment (the device is being reset); blocks become invalid."""
        with self._lock:
            for segment in list(self._segments.values()):
                self._free(segment.address)
            self._segments.clear()
            self._free_blocks.clear()
            self._by_address.clear()
            self._pending.clear()

    def memory_stats(self) -> dict[str, int]:
        """torch.cuda.memory_stats's 122 keys (see cannrt.memory.caching_stats)."""
        with self._lock:
            self.stats.max_split_size = -1 if self.max_split_size is None else self.max_split_size
            return self.stats.flat()

    def recount(self) -> dict[str, int]:
        """The current values recomputed from the blocks themselves (a check of the counters)."""
        with self._lock:
            counts = {f"{kind}.{pool}.current": 0 for kind in KINDS for pool in ("all", *POOLS)}
            for segment in self._segments.values():
                _add(counts, segment.pool, "reserved_bytes", segment.size)
                _add(counts, segment.pool, "segment", 1)
                block = segment.head
                pieces = block is not None and block.next is not None
                while block is not None:
                    if block.allocated:
                        _add(counts, segment.pool, "allocated_bytes", block.size)
                        _add(counts, segment.pool, "requested_bytes", block.requested)
                        _add(counts, segment.pool, "allocation", 1)
                    if block.allocated or block.pending:
                        _add(counts, segment.pool, "active_bytes", block.size)
                        _add(counts, segment.pool, "active", 1)
                    elif pieces:
                        _add(counts, segment.pool, "inactive_split_bytes", block.size)
                        _add(counts, segment.pool, "inactive_split", 1)
                    block = block.next
            return counts

    def segments(self) -> list[tuple[int, int, str, list[tuple[int, int, bool]]]]:
        """(address, size, pool, [(block address, size, allocated)]) of every segment (a snapshot)."""
        with self._lock:
            result = []
            for segment in sorted(self._segments.values(), key=lambda s: s.address):
                blocks = []
                block = segment.head
                while block is not None:
                    blocks.append((block.address, block.size, block.allocated or bool(block.pending)))
                    block = block.next
                result.append((segment.address, segment.size, segment.pool, blocks))
            return result


def _add(counts: dict[str, int], pool: str, kind: str, value: int) -> None:
    counts[f"{kind}.all.current"] += value
    counts[f"{kind}.{pool}.current"] += value
