"""Exception callbacks: aclrtSetExceptionInfoCallback and the aclrtGet*FromExceptionInfo getters.

The callback receives an int (pyACL passes the address of an aclrtExceptionInfo); the getters
read it and return a bare int, 0xFFFFFFFF when the info is unknown.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from cannrt.acl._handles import HANDLE_STEP, Kind
from cannrt.acl._state import api, as_callable, as_handle, runtime
from cannrt.runtime.core import ExceptionInfo

INVALID_INFO = 0xFFFFFFFF
KEEP_INFOS = 256  # infos stay readable for the most recent faults

_infos: dict[int, ExceptionInfo] = {}
_ids = itertools.count(1)
_lock = threading.Lock()


def _publish(info: ExceptionInfo) -> int:
    with _lock:
        handle = (int(Kind.EXCEPTION_INFO) << 40) + next(_ids) * HANDLE_STEP
        _infos[handle] = info
        while len(_infos) > KEEP_INFOS:
            del _infos[next(iter(_infos))]
    return handle


def _wrap(fn: Callable[[int], Any]) -> Callable[[ExceptionInfo], None]:
    def deliver(info: ExceptionInfo) -> None:
        fn(_publish(info))

    return deliver


@api()
def set_exception_info_callback(fn: Callable[[int], Any] | None) -> None:
    """Call fn(info) for every device error reported from now on (aclrtSetExceptionInfoCallback).

    fn None removes the callback.
    """
    callback = None if fn is None else _wrap(as_callable("fn", fn))
    runtime().exception_callback = callback


def _field(info: object, name: str) -> int:
    record = _infos.get(as_handle("info", info))
    if record is None:
        return INVALID_INFO
    return int(getattr(record, name))


def get_task_id_from_exception_info(info: int) -> int:
    """Task id of the failed task (aclrtGetTaskIdFromExceptionInfo)."""
    return _field(info, "task_id")


def get_stream_id_from_exception_info(info: int) -> int:
    """Stream id of the failed task (aclrtGetStreamIdFromExceptionInfo)."""
    return _field(info, "stream_id")


def get_thread_id_from_exception_info(info: int) -> int:
    """Id of the thread that created the failed task's stream (aclrtGetThreadIdFromExceptionInfo)."""
    return _field(info, "thread_id")


def get_device_id_from_exception_info(info: int) -> int:
    """Device of the failed task (aclrtGetDeviceIdFromExceptionInfo)."""
    return _field(info, "device_id")


def get_error_code_from_exception_info(info: int) -> int:
    """ACL error code of the failure (aclrtGetErrorCodeFromExceptionInfo)."""
    return _field(info, "error_code")
