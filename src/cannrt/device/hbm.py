"""HBM: physical memory in 2 MiB frames, handed out as 4 KiB, 2 MiB or 1 GiB pages.

A frame is either wholly free, one 2 MiB page, part of a 1 GiB page (512 aligned frames), or
holds 4 KiB pages (only 4 KiB pages share a frame). So the free bytes differ by page size:
free 4 KiB pages count every free byte; free 2 MiB pages only wholly free frames; free 1 GiB pages
only wholly free, aligned groups of 512 frames. Host RAM backs a chunk only where it is touched.
"""

from __future__ import annotations

import contextlib
import heapq
import mmap
from dataclasses import dataclass, field

import numpy as np

NORMAL_PAGE = 4096
HUGE_PAGE = 2 << 20
GIANT_PAGE = 1 << 30
PAGES_PER_FRAME = HUGE_PAGE // NORMAL_PAGE
FRAMES_PER_GROUP = GIANT_PAGE // HUGE_PAGE
_MAP_NORESERVE = 0x4000  # Linux: do not reserve swap for the mapping (lazy backing)


class OutOfDeviceMemory(Exception):
    """HBM has too few free pages of the asked size for a physical allocation."""

    def __init__(self, requested: int, free: int, total: int, page_size: int = NORMAL_PAGE) -> None:
        super().__init__(f"requested {requested} bytes, {free} free of {total}")
        self.requested = requested
        self.free = free  # bytes free in pages of page_size
        self.total = total
        self.page_size = page_size


@dataclass(eq=False)
class PhysicalChunk:
    """Physically allocated pages; host memory appears at first touch."""

    handle: int
    size: int  # page-rounded bytes
    page_size: int
    phys_addr: int  # the first frame's physical address
    # (frame, 4 KiB pages) taken in each frame; pages == PAGES_PER_FRAME for 2 MiB / 1 GiB pages
    frames: list[tuple[int, int]] = field(default_factory=list)
    maps: int = 0  # live mappings of this chunk (a mapped chunk cannot be freed)
    _backing: mmap.mmap | None = None
    _array: np.ndarray | None = None

    def array(self) -> np.ndarray:
        """The chunk's bytes as a uint8 array (created lazily, zero-filled)."""
        if self._array is None:
            flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE
            self._backing = mmap.mmap(-1, self.size, flags=flags)
            self._array = np.frombuffer(self._backing, dtype=np.uint8)
        return self._array

    def release(self) -> None:
        """Drop the host backing."""
        self._array = None
        if self._backing is not None:
            with contextlib.suppress(BufferError):  # a view still exports it; the GC frees it later
                self._backing.close()
            self._backing = None


class Hbm:
    """The device's physical memory: frame accounting over a fixed capacity."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.frame_count = -(-capacity // HUGE_PAGE)
        last = (capacity - (self.frame_count - 1) * HUGE_PAGE) // NORMAL_PAGE if self.frame_count else 0
        self._last_pages = last  # 4 KiB pages in the last frame (a short frame serves 4 KiB pages only)
        self._whole = bytearray(b"\x01") * self.frame_count  # 1: the frame is wholly free
        self._free_heap = list(range(self.frame_count))  # candidates, lowest first (lazily cleaned)
        self.free_frames = self.frame_count - (last < PAGES_PER_FRAME)
        if last < PAGES_PER_FRAME and self.frame_count:
            self._whole[-1] = 0
        self._normal_free: dict[int, int] = {self.frame_count - 1: last} if last < PAGES_PER_FRAME and last else {}
        groups = -(-self.frame_count // FRAMES_PER_GROUP)
        self._group_free = [0] * groups  # wholly free frames per aligned 1 GiB group
        for frame in range(self.frame_count):
            if self._whole[frame]:
                self._group_free[frame // FRAMES_PER_GROUP] += 1
        self.used_huge = 0  # bytes in 2 MiB and 1 GiB pages
        self.used_normal = 0  # bytes in 4 KiB pages
        self._chunks: dict[int, PhysicalChunk] = {}
        self._next_handle = 1

    @property
    def used(self) -> int:
        """Bytes of pages in use."""
        return self.used_huge + self.used_normal

    def free_bytes(self, page_size: int = NORMAL_PAGE) -> int:
        """Bytes that can still be allocated in pages of page_size."""
        if page_size == GIANT_PAGE:
            return sum(1 for n in self._group_free if n == FRAMES_PER_GROUP) * GIANT_PAGE
        if page_size == HUGE_PAGE:
            return self.free_frames * HUGE_PAGE
        return self.capacity - self.used

    def allocate(self, size: int, page_size: int) -> PhysicalChunk:
        """Allocate page-rounded physical memory; OutOfDeviceMemory when it does not fit."""
        rounded = -(-size // page_size) * page_size
        if rounded > self.free_bytes(page_size):
            raise OutOfDeviceMemory(rounded, self.free_bytes(page_size), self.capacity, page_size)
        if page_size == GIANT_PAGE:
            frames = self._take_groups(rounded // GIANT_PAGE)
        elif page_size == HUGE_PAGE:
            frames = [(self._take_frame(), PAGES_PER_FRAME) for _ in range(rounded // HUGE_PAGE)]
        else:
            frames = self._take_pages(rounded // NORMAL_PAGE)
        chunk = PhysicalChunk(self._next_handle, rounded, page_size, frames[0][0] * HUGE_PAGE, frames)
        self._next_handle += 1
        self._chunks[chunk.handle] = chunk
        if page_size == NORMAL_PAGE:
            self.used_normal += rounded
        else:
            self.used_huge += rounded
        return chunk

    def _take_frame(self, frame: int | None = None) -> int:
        """Mark a wholly free frame used (the lowest one unless given)."""
        if frame is None:
            frame = heapq.heappop(self._free_heap)
            while not self._whole[frame]:
                frame = heapq.heappop(self._free_heap)
        self._whole[frame] = 0
        self.free_frames -= 1
        self._group_free[frame // FRAMES_PER_GROUP] -= 1
        return frame

    def _take_groups(self, count: int) -> list[tuple[int, int]]:
        groups = [g for g, n in enumerate(self._group_free) if n == FRAMES_PER_GROUP][:count]
        frames = []
        for group in groups:
            for frame in range(group * FRAMES_PER_GROUP, (group + 1) * FRAMES_PER_GROUP):
                frames.append((self._take_frame(frame), PAGES_PER_FRAME))
        return frames

    def _take_pages(self, pages: int) -> list[tuple[int, int]]:
        """4 KiB pages: from frames already holding 4 KiB pages first, then from free frames."""
        taken = []
        for frame in sorted(self._normal_free):
            if pages == 0:
                break
            here = min(pages, self._normal_free[frame])
            self._normal_free[frame] -= here
            if not self._normal_free[frame]:
                del self._normal_free[frame]
            taken.append((frame, here))
            pages -= here
        while pages:
            frame = self._take_frame()
            here = min(pages, PAGES_PER_FRAME)
            if here < PAGES_PER_FRAME:
                self._normal_free[frame] = PAGES_PER_FRAME - here
            taken.append((frame, here))
            pages -= here
        return taken

    def free(self, handle: int) -> None:
        """Return a chunk's pages; KeyError for unknown handles."""
        chunk = self._chunks.pop(handle)
        for frame, pages in chunk.frames:
            if chunk.page_size == NORMAL_PAGE:
                self._give_pages(frame, pages)
            else:
                self._give_frame(frame)
        if chunk.page_size == NORMAL_PAGE:
            self.used_normal -= chunk.size
        else:
            self.used_huge -= chunk.size
        chunk.release()

    def _give_pages(self, frame: int, pages: int) -> None:
        free = self._normal_free.get(frame, 0) + pages
        full = self._last_pages if frame == self.frame_count - 1 else PAGES_PER_FRAME
        if free == PAGES_PER_FRAME:
            self._normal_free.pop(frame, None)
            self._give_frame(frame)
        else:
            self._normal_free[frame] = min(free, full)

    def _give_frame(self, frame: int) -> None:
        self._whole[frame] = 1
        self.free_frames += 1
        self._group_free[frame // FRAMES_PER_GROUP] += 1
        heapq.heappush(self._free_heap, frame)

    def chunk(self, handle: int) -> PhysicalChunk:
        """The chunk with this handle; KeyError for unknown handles."""
        return self._chunks[handle]
