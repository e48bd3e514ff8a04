"""DeviceArray: a typed, shaped view of device memory that moves to and from numpy."""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING

import numpy as np

from cannrt.abi import CopyKind, TensorArg
from cannrt.api import pools
from cannrt.api.current import active_stream
from cannrt.dtypes import acl_code
from cannrt.errors import CannError, ErrorCode
from cannrt.memory.caching import Block
from cannrt.runtime import memory_ops, stream_pools
from cannrt.runtime.stream import Stream as RtStream

if TYPE_CHECKING:
    from cannrt.api.device import Device
    from cannrt.api.stream import Stream


FREES = [0]
"""Moves whenever a DeviceArray is freed: argument lists checked before must be checked again."""
_FREE_LOCK = threading.Lock()  # one thread frees an array; two racing frees free it once


class DeviceArray:
    """A typed, shaped view of device memory; moves to and from numpy."""

    def __init__(
        self, device: Device, address: int, shape: tuple[int, ...], dtype: np.dtype, *, owned: bool = True
    ) -> None:
        self.device = device
        self.owned = owned  # False for views into a pool: free() is the pool's business
        self.block: Block | None = None  # set when the memory comes from the caching pool
        self.ordered_on: RtStream | None = None  # set when it comes from a stream-ordered pool
        self.address = address
        self.shape = shape
        self.dtype = dtype
        self._spec: TensorArg | None = None  # tensor_arg(), made once
        self.nbytes = math.prod(shape) * dtype.itemsize  # the shape was checked to fit int64
        self.freed = False

    def __repr__(self) -> str:
        return f"<DeviceArray {self.shape} {self.dtype} at 0x{self.address:x} on device {self.device.index}>"

    @property
    def size(self) -> int:
        """Number of elements."""
        return self.nbytes // self.dtype.itemsize

    def tensor_arg(self) -> TensorArg:
        """The kernel argument describing this array."""
        if self._spec is None:
            self._spec = TensorArg(self.address, acl_code(self.dtype), self.shape)
        return self._spec

    def _check_live(self) -> None:
        if self.freed:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"DeviceArray at 0x{self.address:x} was freed")

    def _check_usable_on(self, stream: RtStream, index: int) -> None:
        self._check_live()
        if stream.context is not self.device.context:
            raise CannError(
                ErrorCode.RT_STREAM_CONTEXT,
                f"argument {index} lives on device {self.device.index}, the stream on device {stream.device_id}",
            )

    def copy_from(self, host: np.ndarray, stream: Stream | None = None) -> None:
        """Copy a host array in: async on stream (or the `with stream:` one), else synchronous."""
        self._check_live()
        stream = stream or active_stream(self.device)
        try:
            data = np.asarray(host, dtype=self.dtype, order="C")
        except (TypeError, ValueError) as exc:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"cannot copy {type(host).__name__} in: {exc}") from None
        if data.nbytes != self.nbytes:
            raise CannError(
                ErrorCode.RT_PARAM_INVALID, f"host array has {data.nbytes} bytes, device array {self.nbytes}"
            )
        ctx = self.device.context
        if stream is None:
            memory_ops.memcpy(ctx, self.address, self.nbytes, data.ctypes.data, data.nbytes, CopyKind.HOST_TO_DEVICE)
            return
        memory_ops.memcpy_async(
            ctx, self.address, self.nbytes, data.ctypes.data, data.nbytes, CopyKind.HOST_TO_DEVICE, stream._rt
        )
        stream._rt.hold(data)  # the source stays alive until the copy ran

    def copy_to(self, host: np.ndarray, stream: Stream) -> None:
        """Queue a copy into a preallocated, contiguous host array (read it after synchronising)."""
        self._check_live()
        if not isinstance(host, np.ndarray):
            raise TypeError(f"copy_to writes into a numpy array, not {type(host).__name__}")
        if not host.flags.c_contiguous or not host.flags.writeable or host.nbytes != self.nbytes:
            raise CannError(ErrorCode.RT_PARAM_INVALID, f"host array must be contiguous with {self.nbytes} bytes")
        ctx = self.device.context
        memory_ops.memcpy_async(
            ctx, host.ctypes.data, host.nbytes, self.address, self.nbytes, CopyKind.DEVICE_TO_HOST, stream._rt
        )
        stream._rt.hold(host)  # the target stays alive until the copy ran, even if a wait fails

    def to_numpy(self, stream: Stream | None = None) -> np.ndarray:
        """Copy out to a new numpy array: on stream (or the `with stream:` one) then synchronising
        it, else synchronously."""
        self._check_live()
        stream = stream or active_stream(self.device)
        host = np.empty(self.shape, dtype=self.dtype)
        if stream is None:
            memory_ops.memcpy(
                self.device.context, host.ctypes.data, host.nbytes, self.address, self.nbytes, CopyKind.DEVICE_TO_HOST
            )
        else:
            self.copy_to(host, stream)
            stream.synchronize()
        return host

    def free(self, stream: RtStream | None = None) -> None:
        """Return the memory (aclrtFree; a stream-ordered array is freed on stream, by default
        the one it was allocated on); the array must not be used afterwards."""
        if not self.owned:
            raise CannError(ErrorCode.RT_PARAM_INVALID, "this array is a view into a static pool; release the pool")
        with _FREE_LOCK:
            if self.freed:
                return
            self.freed = True
            FREES[0] += 1
        if self.block is not None:
            pools.free(self.device.context, self.block)
        elif self.ordered_on is not None:
            stream_pools.free_async(self.device.context, self.address, stream or self.ordered_on)
        else:
            memory_ops.free(self.device.context, self.address)

    def record_stream(self, stream: Stream) -> None:
        """The array is used on stream too: its memory is reused only after that work (PyTorch's
        Tensor.record_stream)."""
        if self.block is not None:
            pools.pool_of(self.device.context).record_stream(self.block, stream._rt)
