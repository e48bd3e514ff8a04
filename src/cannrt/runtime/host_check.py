"""Host pointers are raw process addresses: check them before the copy engine touches them.

A bad int from a pyACL program must give an error code, not a segmentation fault. Readability is
probed through /proc/self/mem (an unmapped address is EIO there, not a crash); a destination must
also lie in a writable mapping of /proc/self/maps.
"""

from __future__ import annotations

import bisect
import os
import threading

_PAGE = os.sysconf("SC_PAGE_SIZE")
_lock = threading.Lock()
_mem_fd: int | None = None


def _mem() -> int | None:
    global _mem_fd
    with _lock:
        if _mem_fd is None:
            try:
                _mem_fd = os.open("/proc/self/mem", os.O_RDONLY)
            except OSError:
                _mem_fd = -1  # not Linux or no procfs: no check possible
        return _mem_fd if _mem_fd >= 0 else None


def readable(address: int, count: int) -> bool:
    """True if every page of [address, address + count) can be read."""
    fd = _mem()
    if fd is None:
        return True
    if address <= 0 or count < 0 or address + count >= 1 << 63:
        return False
    first = address - address % _PAGE
    pages = range(first, address + max(count, 1), _PAGE)
    probes = pages if len(pages) <= 64 else (pages[0], pages[len(pages) // 2], pages[-1])
    try:
        for page in probes:
            os.pread(fd, 1, max(page, address))
    except OSError:
        return False
    return True


def _writable_ranges() -> tuple[list[int], list[int]]:
    starts, ends = [], []
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, perms = line.split()[:2]
            if "w" in perms:
                lo, hi = (int(x, 16) for x in span.split("-"))
                starts.append(lo)
                ends.append(hi)
    return starts, ends


_cached: tuple[list[int], list[int]] | None = None  # writable mappings as last read


def writable(address: int, count: int) -> bool:
    """True if [address, address + count) lies in writable mappings (contiguous ones allowed).

    The mapping list is cached and read again only when the range is not found in it (the range
    is probed for readability every time, so an unmapped range never passes)."""
    global _cached
    if _mem() is None:
        return True
    if not readable(address, count):
        return False
    if _cached is not None and _covered(_cached, address, count):
        return True
    _cached = _writable_ranges()
    return _covered(_cached, address, count)


def _covered(ranges: tuple[list[int], list[int]], address: int, count: int) -> bool:
    starts, ends = ranges
    cursor, end = address, address + max(count, 1)
    while cursor < end:
        index = bisect.bisect_right(starts, cursor) - 1
        if index < 0 or cursor >= ends[index]:
            return False
        cursor = ends[index]
    return True
