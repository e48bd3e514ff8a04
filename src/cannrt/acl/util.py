"""acl.util: pointers to and from Python buffers, and pyACL threads.

Host pointers are real process addresses: a device-to-host copy into `bytes_to_ptr(data)` writes
the bytes object in place, as pyACL programs expect. Reading a device pointer here is refused
with ValueError (real pyACL would crash the process).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from cannrt.acl import constants as c
from cannrt.acl._state import STATE, ArgTypeError, as_callable, as_int, record_error
from cannrt.errors import ErrorCode

NPY_DTYPES: dict[int, np.dtype] = {
    c.NPY_BOOL: np.dtype(np.bool_),
    c.NPY_BYTE: np.dtype(np.int8),
    c.NPY_UBYTE: np.dtype(np.uint8),
    c.NPY_SHORT: np.dtype(np.int16),
    c.NPY_USHORT: np.dtype(np.uint16),
    c.NPY_INT: np.dtype(np.int32),
    c.NPY_UINT: np.dtype(np.uint32),
    c.NPY_LONG: np.dtype(np.int64),
    c.NPY_ULONG: np.dtype(np.uint64),
    c.NPY_LONGLONG: np.dtype(np.int64),
    c.NPY_ULONGLONG: np.dtype(np.uint64),
    c.NPY_FLOAT: np.dtype(np.float32),
    c.NPY_DOUBLE: np.dtype(np.float64),
    c.NPY_HALF: np.dtype(np.float16),
}

_threads: dict[int, threading.Thread] = {}
_threads_lock = threading.Lock()


def bytes_to_ptr(data: bytes | bytearray) -> int:
    """Address of the buffer inside a bytes (or bytearray) object, no copy."""
    if isinstance(data, bytes):
        address = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
        return int(address or 0)
    if isinstance(data, bytearray):
        if not data:
            raise ValueError("bytes_to_ptr of an empty bytearray has no address")
        return ctypes.addressof((ctypes.c_char * len(data)).from_buffer(data))
    raise ArgTypeError(f"bytes_to_ptr takes bytes or bytearray, not {type(data).__name__}")


def _check_host(ptr: int, size: int) -> None:
    if ptr == 0:
        raise ValueError("null pointer")
    if STATE.runtime is not None and STATE.runtime.driver.mem_owner(ptr) is not None:
        raise ValueError(f"0x{ptr:x} is a device address: copy it to host memory (acl.rt.memcpy) first")
    if size < 0:
        raise ValueError(f"negative size {size}")


def ptr_to_bytes(ptr: int, size: int) -> bytes:
    """A bytes copy of size bytes of host memory at ptr."""
    address, nbytes = as_int("ptr", ptr), as_int("size", size)
    _check_host(address, nbytes)
    return ctypes.string_at(address, nbytes)


def numpy_to_ptr(array: np.ndarray) -> int:
    """Address of a numpy array's data, no copy (the array must stay alive)."""
    if not isinstance(array, np.ndarray):
        raise ArgTypeError(f"numpy_to_ptr takes a numpy.ndarray, not {type(array).__name__}")
    return int(array.__array_interface__["data"][0])


def ptr_to_numpy(ptr: int, shape: tuple[int, ...] | list[int] | int, npy_type: int) -> np.ndarray:
    """A numpy array viewing host memory at ptr (no copy), npy_type a NumPy C type number (NPY_*)."""
    address, code = as_int("ptr", ptr), as_int("npy_type", npy_type)
    dims = (
        (as_int("shape", shape),) if not isinstance(shape, list | tuple) else tuple(as_int("shape", d) for d in shape)
    )
    if code not in NPY_DTYPES:
        raise ValueError(f"unsupported numpy type number {code}")
    dtype = NPY_DTYPES[code]
    count = int(np.prod(dims, dtype=np.int64)) if dims else 1
    _check_host(address, count)
    if count == 0:
        return np.empty(dims, dtype=dtype)
    buffer = (ctypes.c_char * (count * dtype.itemsize)).from_address(address)
    view: np.ndarray = np.frombuffer(memoryview(buffer), dtype=dtype)
    return view.reshape(dims)


def start_thread(fn: Callable[[Any], Any], args: Any) -> tuple[int, int]:
    """(thread_id, ret): run fn(args) on a new thread; the id works with acl.rt.subscribe_report.

    The new thread has no current context (call acl.rt.set_context in it if it needs one).
    """
    function = as_callable("fn", fn)
    thread = threading.Thread(target=function, args=(args,), name="acl-thread", daemon=True)
    thread.start()
    assert thread.ident is not None
    with _threads_lock:
        _threads[thread.ident] = thread
    return thread.ident, 0


def stop_thread(thread_id: int) -> int:
    """Wait for a thread from start_thread to return (its function must end by itself)."""
    tid = as_int("thread_id", thread_id)
    with _threads_lock:
        thread = _threads.pop(tid, None)
    if thread is None:
        return record_error(ErrorCode.INVALID_PARAM, f"stop_thread: {tid} is not a thread from start_thread")
    if thread is not threading.current_thread():
        thread.join()
    return 0


__all__ = [
    "bytes_to_ptr",
    "numpy_to_ptr",
    "ptr_to_bytes",
    "ptr_to_numpy",
    "start_thread",
    "stop_thread",
]
