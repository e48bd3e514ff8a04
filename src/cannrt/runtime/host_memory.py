"""Pinned host memory: real, page-aligned process memory (models aclrtMallocHost)."""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import threading


class HostAllocations:
    """Page-aligned host buffers handed out by address."""

    def __init__(self) -> None:
        self._buffers: dict[int, tuple[mmap.mmap, int]] = {}
        self._lock = threading.Lock()

    def allocate(self, size: int) -> int:
        """Map size bytes of zeroed host memory; returns its address (page aligned)."""
        buffer = mmap.mmap(-1, size)
        address = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
        with self._lock:
            self._buffers[address] = (buffer, size)
        return address

    def free(self, address: int) -> bool:
        """Unmap a buffer; False if address was not returned by allocate."""
        with self._lock:
            entry = self._buffers.pop(address, None)
        if entry is None:
            return False
        with contextlib.suppress(BufferError):  # a view still exports it; the GC closes it later
            entry[0].close()
        return True

    def contains(self, address: int, nbytes: int = 1) -> bool:
        """True if [address, address + nbytes) lies inside one pinned buffer."""
        with self._lock:
            for start, (_, size) in self._buffers.items():
                if start <= address and address + nbytes <= start + size:
                    return True
        return False

    def free_all(self) -> None:
        """Unmap everything (finalize)."""
        for address in list(self._buffers):
            self.free(address)
