"""Typed views into a planned static pool (what `Device.static_pool` returns)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cannrt.api.array import DeviceArray
from cannrt.api.device import Device
from cannrt.errors import CannError, ErrorCode
from cannrt.memory.static_pool import PoolReport, StaticPool


class GraphMemory:
    """A planned static pool on a device: typed views of its tensors."""

    def __init__(self, device: Device, pool: StaticPool) -> None:
        self.device = device
        self.pool = pool

    @property
    def report(self) -> PoolReport:
        """Block size, lower bound and the bytes saved by reuse."""
        return self.pool.report

    def tensor(self, name: str, shape: Sequence[int], dtype: Any = np.float32) -> DeviceArray:
        """The tensor's memory as a DeviceArray (it must fit the size the topology declared)."""
        dt = np.dtype(dtype)
        nbytes = int(np.prod(tuple(shape), dtype=np.int64)) * dt.itemsize
        planned = next(b.size for b in self.pool.packing.buffers if b.id == name)
        if nbytes > planned:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"tensor {name}: {nbytes} bytes requested, {planned} planned")
        return DeviceArray(self.device, self.pool.address(name), tuple(shape), dt, owned=False)

    def release(self) -> None:
        """Free the block (synchronise the graph's streams first)."""
        self.pool.release()
