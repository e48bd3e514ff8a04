"""The MMU of each address space (HBM pages come from cannrt.device.hbm).

Every device access (kernels, SDMA) goes through AddressSpace.segments: an address outside a
mapping's valid bytes is a DeviceFault carrying the numbers a precise report needs.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from cannrt.device.hbm import GIANT_PAGE, HUGE_PAGE, NORMAL_PAGE, Hbm, OutOfDeviceMemory, PhysicalChunk

VA_SPACE_SHIFT = 38  # each address space owns a 256 GiB window of the 48-bit device VA
VA_SPACE_BASE = 64  # window index of address space 0; keeps low addresses invalid
VIEWS_KEPT = 4096  # views an address space keeps per generation
MAX_ADDRESS_SPACES = (1 << (48 - VA_SPACE_SHIFT)) - VA_SPACE_BASE


@dataclass(eq=False)
class Mapping:
    """VA range [va, va + size) -> chunk pages at chunk_offset; accesses beyond valid bytes fault."""

    va: int
    size: int
    chunk: PhysicalChunk
    chunk_offset: int
    valid: int  # bytes the allocation asked for (<= size)
    writable: bool = True  # False: a read-only mapping (writes fault)
    # blocks a caching pool handed out inside this mapping: start -> largest size ever handed out
    # there, (starts, sizes) in address order, replaced whole on change; None for a plain
    # allocation. Sizes never shrink, so work still queued on a stream after a free (and a reuse)
    # is never refused; an access must fit inside one of the blocks.
    blocks: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    def covered(self, address: int, end: int) -> bool:
        """True if [address, end) lies inside one block handed out by the pool."""
        assert self.blocks is not None
        starts, sizes = self.blocks
        index = bisect.bisect_right(starts, address)
        return any(starts[j] + sizes[j] >= end for j in range(index - 1, -1, -1))

    def block_containing(self, address: int) -> tuple[int, int] | None:
        """(start, size) of the largest block holding address, if any."""
        assert self.blocks is not None
        starts, sizes = self.blocks
        index = bisect.bisect_right(starts, address)
        holding = [(starts[j], sizes[j]) for j in range(index) if address < starts[j] + sizes[j]]
        return max(holding, key=lambda b: b[0] + b[1]) if holding else None

    def nearest_block(self, address: int) -> Mapping | None:
        """The block closest to address, as a mapping (for fault reports)."""
        assert self.blocks is not None
        starts, sizes = self.blocks
        if not starts:
            return None
        holding = self.block_containing(address)
        if holding is not None:
            start, size = holding
        else:
            pairs = list(zip(starts, sizes, strict=True))
            start, size = min(pairs, key=lambda b: min(abs(address - b[0]), abs(address - b[0] - b[1])))
        return Mapping(start, size, self.chunk, self.chunk_offset + start - self.va, size)


@dataclass
class DeviceFault(Exception):
    """An access the MMU refused: kind is 'read' or 'write'."""

    kind: str
    address: int
    nbytes: int
    nearest: Mapping | None = None
    asid: int = -1
    owner_asid: int | None = None  # address space that owns the address, when foreign
    reason: str = ""  # "freed": nearest is a freed allocation; "read-only": a write to one

    def __str__(self) -> str:
        text = f"invalid {self.kind} of {self.nbytes} bytes at 0x{self.address:x}"
        near = self.nearest
        if self.reason == "freed" and near is not None:
            offset = self.address - near.va
            return f"{text}: {offset} bytes inside a freed {near.valid}-byte allocation at 0x{near.va:x}"
        if self.reason == "read-only" and near is not None:
            return f"{text}: the mapping at 0x{near.va:x} of {near.size} bytes is read-only"
        if self.owner_asid is not None and self.owner_asid != self.asid:
            if self.owner_asid < 0:
                return f"{text}: address belongs to no address space (this context's is {self.asid})"
            return f"{text}: address belongs to address space {self.owner_asid}, not {self.asid}"
        if near is None:
            return f"{text}: no allocation in this address space"
        if self.address >= near.va + near.valid:
            gap = self.address - (near.va + near.valid)
            where = f"is {gap} bytes after"
        elif self.address < near.va:
            where = f"is {near.va - self.address} bytes before"
        else:
            end = self.address + self.nbytes - (near.va + near.valid)
            where = f"overruns by {end} bytes"
        return f"{text}: {where} the nearest allocation at 0x{near.va:x} of size {near.valid}"


@dataclass
class AddressSpace:
    """One context's device virtual address space and its page table."""

    asid: int
    device_id: int
    # (starts, mappings) in address order, replaced as a whole on change (copy-on-write), so the
    # device worker always reads a consistent table while the host maps and unmaps
    _table: tuple[list[int], list[Mapping]] = field(default_factory=lambda: ([], []))
    generation: int = 0  # moves on every change of the table or of a pool's blocks (views cache on it)
    # view() results while the generation is unchanged: (generation, {(address, bytes, kind): view})
    _views: tuple[int, dict[tuple[int, int, str], np.ndarray]] = field(default_factory=lambda: (0, {}))
    # allocations freed but still in the VA quarantine: start -> valid bytes (readers take a
    # snapshot, which the GIL makes atomic); a fault inside one names it ("freed 4096-byte
    # allocation at A")
    _freed: dict[int, int] = field(default_factory=dict)

    @property
    def base(self) -> int:
        """First address of this space's VA window."""
        return (self.asid + VA_SPACE_BASE) << VA_SPACE_SHIFT

    @property
    def limit(self) -> int:
        """One past the last address of the window."""
        return self.base + (1 << VA_SPACE_SHIFT)

    def map(
        self, va: int, chunk: PhysicalChunk, chunk_offset: int, size: int, valid: int, writable: bool = True
    ) -> None:
        """Enter a mapping; ValueError if it overlaps one already present."""
        starts, maps = self._table
        index = bisect.bisect_left(starts, va)
        if index > 0 and maps[index - 1].va + maps[index - 1].size > va:
            raise ValueError(f"0x{va:x} is already mapped")
        if index < len(maps) and va + size > maps[index].va:
            raise ValueError(f"range at 0x{va:x} of {size} bytes overlaps a mapping")
        mapping = Mapping(va, size, chunk, chunk_offset, valid, writable)
        self._table = ([*starts[:index], va, *starts[index:]], [*maps[:index], mapping, *maps[index:]])
        chunk.maps += 1
        self.generation += 1

    def unmap(self, va: int) -> Mapping:
        """Remove the mapping starting at va; KeyError if none starts there."""
        starts, maps = self._table
        index = bisect.bisect_left(starts, va)
        if index == len(starts) or starts[index] != va:
            raise KeyError(va)
        self._table = (starts[:index] + starts[index + 1 :], maps[:index] + maps[index + 1 :])
        maps[index].chunk.maps -= 1
        self.generation += 1
        return maps[index]

    def set_writable(self, va: int, writable: bool) -> None:
        """Change the access of the mapping starting at va; KeyError if none starts there."""
        starts, maps = self._table
        index = bisect.bisect_left(starts, va)
        if index == len(starts) or starts[index] != va:
            raise KeyError(va)
        old = maps[index]
        new = Mapping(old.va, old.size, old.chunk, old.chunk_offset, old.valid, writable, old.blocks)
        self._table = (starts, [*maps[:index], new, *maps[index + 1 :]])
        self.generation += 1

    def mappings_in(self, start: int, end: int) -> list[Mapping]:
        """The mappings overlapping [start, end)."""
        starts, maps = self._table
        index = max(0, bisect.bisect_right(starts, start) - 1)
        return [m for m in maps[index:] if m.va < end and m.va + m.size > start]

    def retire(self, va: int, valid: int) -> None:
        """An allocation at va was freed; its VA is quarantined (faults there name it)."""
        self._freed[va] = valid

    def forget_freed(self, va: int) -> None:
        """The quarantine let go of va: its VA may be handed out again."""
        self._freed.pop(va, None)

    def freed_at(self, address: int) -> Mapping | None:
        """The freed allocation whose bytes hold address, as a mapping (fault reports)."""
        for start, valid in list(self._freed.items()):
            if start <= address < start + max(valid, 1):
                return Mapping(start, valid, PhysicalChunk(0, 0, NORMAL_PAGE, 0), 0, valid)
        return None

    def annotate(self, address: int, size: int) -> None:
        """A pool handed out a block inside a mapping: accesses are checked against its blocks
        (as a sanitizer tracks a caching allocator)."""
        found = self.mapping_at(address)
        if found is None:
            raise KeyError(address)
        starts, sizes = found.blocks if found.blocks is not None else ((), ())
        index = bisect.bisect_left(starts, address)
        if index < len(starts) and starts[index] == address:
            if sizes[index] < size:
                found.blocks = (starts, (*sizes[:index], size, *sizes[index + 1 :]))
                self.generation += 1
        else:
            found.blocks = ((*starts[:index], address, *starts[index:]), (*sizes[:index], size, *sizes[index:]))
            self.generation += 1

    def mapping_at(self, address: int) -> Mapping | None:
        """The mapping whose valid bytes contain address, if any."""
        starts, maps = self._table
        index = bisect.bisect_right(starts, address) - 1
        if index >= 0:
            found = maps[index]
            if address < found.va + found.valid:
                return found
        return None

    def nearest(self, address: int) -> Mapping | None:
        """The mapping closest to address (for fault reports)."""
        starts, maps = self._table
        index = bisect.bisect_right(starts, address)
        candidates = maps[max(0, index - 1) : index + 1]
        if not candidates:
            return None
        return min(candidates, key=lambda m: min(abs(address - m.va), abs(address - m.va - m.valid)))

    def segments(self, address: int, nbytes: int, kind: str) -> list[np.ndarray]:
        """uint8 views covering [address, address + nbytes); DeviceFault if any byte is unmapped."""
        views: list[np.ndarray] = []
        cursor = address
        end = address + nbytes
        while cursor < end or not views:
            found = self.mapping_at(cursor)
            if found is None:
                freed = self.freed_at(cursor)
                if freed is not None:
                    raise DeviceFault(kind, address, nbytes, freed, self.asid, reason="freed")
                raise DeviceFault(kind, address, nbytes, self.nearest(cursor), self.asid)
            if kind == "write" and not found.writable:
                raise DeviceFault(kind, address, nbytes, found, self.asid, reason="read-only")
            if found.blocks is not None and not found.covered(cursor, end):
                raise DeviceFault(kind, address, nbytes, found.nearest_block(cursor), self.asid)
            stop = min(end, found.va + found.valid)
            if stop == cursor and nbytes:
                raise DeviceFault(kind, address, nbytes, found, self.asid)
            start = found.chunk_offset + cursor - found.va
            views.append(found.chunk.array()[start : start + stop - cursor])
            cursor = stop
            if nbytes == 0:
                break
        return views

    def view(self, address: int, nbytes: int, kind: str) -> np.ndarray:
        """One contiguous uint8 view, kept while the mappings are unchanged; DeviceFault when
        unmapped or split over mappings."""
        generation, kept = self._views
        if generation != self.generation:
            generation, kept = self._views = (self.generation, {})
        key = (address, nbytes, kind)
        found = kept.get(key)
        if found is not None:
            return found
        parts = self.segments(address, nbytes, kind)
        if len(parts) != 1:
            raise DeviceFault(kind, address, nbytes, self.nearest(address), self.asid)
        if len(kept) < VIEWS_KEPT:
            kept[key] = parts[0]
        return parts[0]

    def contiguous_end(self, address: int) -> int:
        """End of the run of back-to-back mappings holding address (address itself if unmapped)."""
        found = self.mapping_at(address)
        end = address
        while found is not None:
            end = found.va + found.valid
            if found.valid < found.size:
                break  # padding after an allocation's valid bytes ends the run
            found = self.mapping_at(end)
        return end


__all__ = [
    "GIANT_PAGE",
    "HUGE_PAGE",
    "NORMAL_PAGE",
    "AddressSpace",
    "DeviceFault",
    "Hbm",
    "Mapping",
    "OutOfDeviceMemory",
    "PhysicalChunk",
]
