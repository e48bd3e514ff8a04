"""acl.media: the memory calls of the media (DVPP) engines, which pyACL samples use for copies.

The simulated NPU has no DVPP engines; dvpp_malloc hands out ordinary device memory of the
current context, so it works with acl.rt.memcpy / memcpy_async like real DVPP memory.
"""

from __future__ import annotations

from cannrt.acl._state import api, as_handle, as_int, current_context, fail
from cannrt.errors import ErrorCode
from cannrt.runtime import memory_ops

DVPP_ALIGN = 128  # DVPP buffers start and end on 128-byte boundaries


@api(0)
def dvpp_malloc(size: int) -> int:
    """(dev_ptr, ret): device memory for media processing (acldvppMalloc)."""
    nbytes = as_int("size", size)
    if nbytes <= 0:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"size must be positive, got {nbytes}")
    padded = -(-nbytes // DVPP_ALIGN) * DVPP_ALIGN
    return memory_ops.malloc(current_context(), padded, memory_ops.MallocPolicy.HUGE_FIRST, pad=False)


@api()
def dvpp_free(dev_ptr: int) -> None:
    """Free memory from dvpp_malloc (acldvppFree)."""
    address = as_handle("dev_ptr", dev_ptr)
    if address == 0:
        raise fail(ErrorCode.RT_PARAM_INVALID, "dvpp_free of a null pointer")
    memory_ops.free(current_context(sticky=False), address)


__all__ = [
    "dvpp_free",
    "dvpp_malloc",
]
