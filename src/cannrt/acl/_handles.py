"""Integer handles for facade objects, as pyACL hands out C pointers as Python ints.

Each kind of object gets its own handle range, so a stream handle passed where an event is
expected is recognised as invalid instead of silently meaning something else.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from enum import IntEnum
from typing import Generic, TypeVar

T = TypeVar("T")

HANDLE_STEP = 0x40  # handles look like 64-byte aligned pointers


class Kind(IntEnum):
    """Handle ranges (the high bits of a handle)."""

    CONTEXT = 0xA1
    STREAM = 0xA2
    EVENT = 0xA3
    DATA_BUFFER = 0xA4
    TENSOR_DESC = 0xA5
    OP_ATTR = 0xA6
    OP_HANDLE = 0xA7
    EXCEPTION_INFO = 0xA8
    PHYSICAL_MEMORY = 0xA9
    PROF_CONFIG = 0xAA
    MEMORY_POOL = 0xAB
    MODEL_DESC = 0xAB
    DATASET = 0xAC


class HandleTable(Generic[T]):
    """Objects by int handle, and handles by object identity."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self._base = int(kind) << 40
        self._ids = itertools.count(1)
        self._objects: dict[int, T] = {}
        self._handles: dict[int, int] = {}  # id(object) -> handle
        self._lock = threading.Lock()

    def add(self, obj: T) -> int:
        """A new handle for obj (or its existing one)."""
        with self._lock:
            handle = self._handles.get(id(obj))
            if handle is None:
                handle = self._base + next(self._ids) * HANDLE_STEP
                self._objects[handle] = obj
                self._handles[id(obj)] = handle
            return handle

    def get(self, handle: int) -> T | None:
        """The object behind handle, or None."""
        return self._objects.get(handle)

    def remove(self, handle: int) -> T | None:
        """Forget a handle; returns its object."""
        with self._lock:
            obj = self._objects.pop(handle, None)
            if obj is not None:
                self._handles.pop(id(obj), None)
            return obj

    def remove_where(self, predicate: Callable[[T], bool]) -> None:
        """Forget every handle whose object satisfies predicate."""
        for handle, obj in list(self._objects.items()):
            if predicate(obj):
                self.remove(handle)

    def values(self) -> list[T]:
        """Every live object."""
        return list(self._objects.values())

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._objects.clear()
            self._handles.clear()

    def __len__(self) -> int:
        return len(self._objects)
