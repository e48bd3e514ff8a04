"""Host pointers are raw process addresses: check them before the copy engine touches them.

A bad int from a pyACL program must give an error code, not a segmentation fault. Every page of a
range is checked: a short range page by page through /proc/self/mem (an unmapped address is EIO
there, not a crash); a long one with mincore(2) over the whole range (ENOMEM if any page is
unmapped) and the readable mappings of /proc/self/maps. A destination must also lie in a writable
mapping. The mapping lists are cached and read again when a range is not found in them; mincore
sees every unmapped hole anew, so only a long range made inaccessible with mprotect since the last
read of the list could pass.
"""

from __future__ import annotations

import bisect
import ctypes
import os
import threading
from typing import Any

_PAGE = os.sysconf("SC_PAGE_SIZE")
PROBED_PAGES = 64  # ranges up to this many pages are probed page by page
MINCORE_CHUNK = 1 << 16  # pages per mincore call (its result vector has one byte per page)
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
    if len(pages) > PROBED_PAGES:
        return _all_mapped(first, pages[-1] + _PAGE) and _in_mappings(_READABLE, address, count)
    try:
        for page in pages:
            os.pread(fd, 1, max(page, address))
    except OSError:
        return False
    return True


def writable(address: int, count: int) -> bool:
    """True if [address, address + count) is readable and lies in writable mappings (every page
    is checked for being mapped each time, so an unmapped range never passes)."""
    if _mem() is None:
        return True
    return readable(address, count) and _in_mappings(_WRITABLE, address, count)


def _all_mapped(start: int, end: int) -> bool:
    """mincore(2) over page-aligned [start, end), a chunk at a time: False if a page is unmapped."""
    mincore = _libc_mincore()
    if mincore is None:
        return all(_probe(page) for page in range(start, end, _PAGE))
    vector = (ctypes.c_ubyte * min(MINCORE_CHUNK, (end - start) // _PAGE))()
    for chunk in range(start, end, MINCORE_CHUNK * _PAGE):
        length = min(MINCORE_CHUNK * _PAGE, end - chunk)
        if mincore(chunk, length, vector) != 0:
            return False
    return True


def _probe(page: int) -> bool:
    fd = _mem()
    try:
        if fd is not None:
            os.pread(fd, 1, page)
    except OSError:
        return False
    return True


_mincore: list[Any] = []  # [libc's mincore, or None where there is none], looked up once


def _libc_mincore() -> Any:
    if not _mincore:
        try:
            function = ctypes.CDLL(None, use_errno=True).mincore
            function.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
            function.restype = ctypes.c_int
            _mincore.append(function)
        except (OSError, AttributeError):
            _mincore.append(None)
    return _mincore[0]


def _mapping_ranges(permission: str) -> tuple[list[int], list[int]]:
    starts, ends = [], []
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, perms = line.split()[:2]
            if permission in perms:
                lo, hi = (int(x, 16) for x in span.split("-"))
                starts.append(lo)
                ends.append(hi)
    return starts, ends


_READABLE, _WRITABLE = "r", "w"
_cached: dict[str, tuple[list[int], list[int]]] = {}  # permission -> mappings with it, as last read


def _in_mappings(permission: str, address: int, count: int) -> bool:
    """[address, address + count) lies in mappings with the permission (contiguous ones allowed);
    the cached list is read again when the range is not found in it."""
    known = _cached.get(permission)
    if known is not None and _covered(known, address, count):
        return True
    known = _cached[permission] = _mapping_ranges(permission)
    return _covered(known, address, count)


def _covered(ranges: tuple[list[int], list[int]], address: int, count: int) -> bool:
    starts, ends = ranges
    cursor, end = address, address + max(count, 1)
    while cursor < end:
        index = bisect.bisect_right(starts, cursor) - 1
        if index < 0 or cursor >= ends[index]:
            return False
        cursor = ends[index]
    return True
