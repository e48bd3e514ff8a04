"""What every part of the driver shares: its lock discipline and address spaces."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from cannrt.device.memory import AddressSpace
from cannrt.driver.vaspace import VaAllocator


class Locked(Protocol):
    """Anything with the driver's lock."""

    _lock: threading.RLock


P = ParamSpec("P")
R = TypeVar("R")
L = TypeVar("L", bound=Locked)


def serialised(method: Callable[Concatenate[L, P], R]) -> Callable[Concatenate[L, P], R]:
    """Run a bookkeeping call under the driver lock (host threads may call concurrently)."""

    @functools.wraps(method)
    def locked(self: L, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return locked


@dataclass
class SpaceInfo:
    """An address space with its VA bookkeeping and the physical memory malloc put behind it."""

    space: AddressSpace
    va: VaAllocator
    chunks: dict[int, int]  # va of a malloc'd range -> physical handle (freed with it)
