"""The caching pool's counters in PyTorch's memory_stats schema (all 122 keys, same meanings).

- `{allocated,reserved,active,inactive_split,requested}_bytes` and the counts `allocation`,
  `segment`, `active`, `inactive_split`, each `.{all,large_pool,small_pool}.{current,peak,
  allocated,freed}`: blocks handed out (bytes rounded / as requested), segments obtained from the
  device, blocks handed out or waiting for other streams, free blocks inside split segments
  (memory that cannot be released);
- `oversize_allocations` / `oversize_segments.{current,peak,allocated,freed}`: requests and
  segments above `max_split_size`;
- `num_alloc_retries`, `num_ooms`, `num_sync_all_streams`, `num_device_alloc`,
  `num_device_free`, and `max_split_size` (-1 when unlimited, as PyTorch reports it).
"""

from __future__ import annotations

POOLS = ("small_pool", "large_pool")
KINDS = (
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "requested_bytes",
    "allocation",
    "segment",
    "active",
    "inactive_split",
)
OVERSIZE = ("oversize_allocations", "oversize_segments")
COUNTERS = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free")
STATS = ("current", "peak", "allocated", "freed")


class PoolStats:
    """Current, peak, allocated and freed of every kind, per pool and for all pools."""

    def __init__(self) -> None:
        # [current, peak, allocated, freed] of each (kind, pool)
        self.values: dict[tuple[str, str], list[int]] = {
            (kind, pool): [0, 0, 0, 0] for kind in KINDS for pool in ("all", *POOLS)
        }
        # what one change moves: the total's entry and the pool's
        self._pairs = {
            (kind, pool): (self.values[(kind, "all")], self.values[(kind, pool)]) for kind in KINDS for pool in POOLS
        }
        self.oversize: dict[str, list[int]] = {kind: [0, 0, 0, 0] for kind in OVERSIZE}
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.max_split_size = -1

    def change(self, pool: str, kind: str, delta: int) -> None:
        """Move a kind's current value in pool (and in all) by delta."""
        if delta:
            for entry in self._pairs[(kind, pool)]:
                _move(entry, delta)

    def change_oversize(self, kind: str, delta: int) -> None:
        """Move an oversize count by delta."""
        _move(self.oversize[kind], delta)

    def current(self, kind: str, pool: str = "all") -> int:
        """The current value of a kind."""
        return self.values[(kind, pool)][0]

    def reset_peaks(self) -> None:
        """Peaks start again from the current values (torch.cuda.reset_peak_memory_stats)."""
        for entry in (*self.values.values(), *self.oversize.values()):
            entry[1] = entry[0]

    def reset_accumulated(self) -> None:
        """Allocated/freed totals and counters restart (torch.cuda.reset_accumulated_memory_stats)."""
        for entry in (*self.values.values(), *self.oversize.values()):
            entry[2] = entry[3] = 0
        self.counters = dict.fromkeys(COUNTERS, 0)

    def flat(self) -> dict[str, int]:
        """The 122 keys of torch.cuda.memory_stats."""
        stats = {
            f"{kind}.{pool}.{stat}": value
            for (kind, pool), entry in self.values.items()
            for stat, value in zip(STATS, entry, strict=True)
        }
        for kind, entry in self.oversize.items():
            stats.update({f"{kind}.{stat}": value for stat, value in zip(STATS, entry, strict=True)})
        stats.update(self.counters)
        stats["max_split_size"] = self.max_split_size
        return dict(sorted(stats.items()))


def _move(entry: list[int], delta: int) -> None:
    current = entry[0] = entry[0] + delta
    if current > entry[1]:
        entry[1] = current
    if delta > 0:
        entry[2] += delta
    else:
        entry[3] -= delta
