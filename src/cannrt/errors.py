"""ACL error codes (REFERENCE.md section 6) and the typed exception that carries them."""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ErrorCode(IntEnum):
    """ACL and runtime error codes."""

    SUCCESS = 0
    INVALID_PARAM = 100000
    UNINITIALIZE = 100001
    REPEAT_INITIALIZE = 100002
    REPEAT_SUBSCRIBE = 100033
    STREAM_NOT_SUBSCRIBE = 100034
    THREAD_NOT_SUBSCRIBE = 100035
    WAIT_CALLBACK_TIMEOUT = 100036
    REPEAT_FINALIZE = 100037
    PROF_ALREADY_RUN = 100042
    DUMP_ALREADY_RUN = 100044
    BAD_ALLOC = 200000
    API_NOT_SUPPORT = 200001
    INVALID_DEVICE = 200002
    MEMORY_ADDRESS_UNALIGNED = 200003
    RESOURCE_NOT_MATCH = 200004
    INVALID_RESOURCE_HANDLE = 200005
    FEATURE_UNSUPPORTED = 200006
    INTERNAL_ERROR = 500000
    FAILURE = 500001
    RT_FAILURE = 500003
    RT_PARAM_INVALID = 107000
    RT_INVALID_DEVICEID = 107001
    RT_CONTEXT_NULL = 107002
    RT_STREAM_CONTEXT = 107003
    RT_EVENT_TIMESTAMP_INVALID = 107006
    RT_ADDR_UNALIGNED = 107008
    RT_STREAM_SUBSCRIBE = 107011
    RT_THREAD_SUBSCRIBE = 107012
    RT_STREAM_NO_CB_REG = 107015
    RT_INVALID_MEMORY_TYPE = 107016
    RT_INVALID_HANDLE = 107017
    RT_INVALID_MALLOC_TYPE = 107018
    RT_WAIT_TIMEOUT = 107019
    RT_TASK_TIMEOUT = 107020
    RT_FEATURE_NOT_SUPPORT = 207000
    RT_MEMORY_ALLOCATION = 207001
    RT_MEMORY_FREE = 207002
    RT_AICORE_OVER_FLOW = 207003
    RT_NO_DEVICE = 207004
    RT_RESOURCE_ALLOC_FAIL = 207005
    RT_NO_PERMISSION = 207006
    RT_NO_EVENT_RESOURCE = 207007
    RT_NO_STREAM_RESOURCE = 207008
    RT_OVER_LIMIT = 207012
    RT_AIVEC_OVER_FLOW = 207016
    RT_DEVICE_OOM = 207018
    RT_TIMEOUT = 207020
    RT_INTERNAL_ERROR = 507000
    RT_TS_ERROR = 507001
    RT_STREAM_TASK_FULL = 507002
    RT_STREAM_NOT_COMPLETE = 507004
    RT_EVENT_NOT_COMPLETE = 507006
    RT_CONTEXT_RELEASE_ERROR = 507007
    RT_TASK_TYPE_NOT_SUPPORT = 507009
    RT_SYS_DMA = 507013
    RT_AICORE_TIMEOUT = 507014
    RT_AICORE_EXCEPTION = 507015
    RT_AICORE_TRAP_EXCEPTION = 507016
    RT_AICPU_TIMEOUT = 507017
    RT_AICPU_EXCEPTION = 507018
    RT_KERNEL_LOOKUP = 507027
    RT_KERNEL_DUPLICATE = 507028
    RT_VECTOR_CORE_TIMEOUT = 507034
    RT_VECTOR_CORE_EXCEPTION = 507035
    RT_AICORE_TRAP_READ_OVERFLOW = 507042
    RT_AICORE_TRAP_WRITE_OVERFLOW = 507043
    RT_STREAM_SYNC_TIMEOUT = 507046
    RT_EVENT_SYNC_TIMEOUT = 507047
    RT_DEVICE_MEM_ERROR = 507053


def error_name(code: int) -> str:
    """The symbolic name of a code (or the number when unknown)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class CannError(Exception):
    """A runtime call failed: `code` is the ACL error code; extra keyword numbers explain it."""

    def __init__(self, code: int, message: str, **numbers: Any) -> None:
        super().__init__(f"[{error_name(code)} {code}] {message}")
        self.code = int(code)
        self.detail = message
        for key, value in numbers.items():
            setattr(self, key, value)


class OutOfMemoryError(CannError):
    """Device memory exhausted: carries requested, free and total bytes."""


class CannTimeout(CannError):
    """A wait hit its (modelled) deadline."""
