"""acl.rt memory calls (aclrtMalloc*, aclrtFree*, aclrtMemset*, aclrtMemcpy*, aclrtGetMemInfo).

Device pointers are device virtual addresses; host pointers are real process addresses
(pinned memory from malloc_host, or bytes / numpy buffers from acl.util).
"""

from __future__ import annotations

from cannrt.acl import constants as c
from cannrt.acl._state import api, as_handle, as_int, current_context, fail, runtime, stream_of
from cannrt.errors import ErrorCode
from cannrt.runtime import memory_ops
from cannrt.runtime.context import Context

HOST_COPY_KINDS = (c.ACL_MEMCPY_HOST_TO_DEVICE, c.ACL_MEMCPY_DEVICE_TO_HOST)


def _size(name: str, value: object) -> int:
    size = as_int(name, value)
    if size <= 0:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"{name} must be positive, got {size}")
    return size


def _malloc(size: object, policy: object, *, pad: bool) -> int:
    nbytes, rule = _size("size", size), as_int("policy", policy)
    return memory_ops.malloc(current_context(), nbytes, rule, pad=pad)


@api(0)
def malloc(size: int, policy: int) -> int:
    """(dev_ptr, ret): device memory, size padded to ALIGN_UP(size + 32, 32), 64-byte aligned (aclrtMalloc)."""
    return _malloc(size, policy, pad=True)


@api(0)
def malloc_align32(size: int, policy: int) -> int:
    """(dev_ptr, ret): device memory of ALIGN_UP(size, 32) bytes, no padding (aclrtMallocAlign32)."""
    return _malloc(size, policy, pad=False)


@api(0)
def malloc_cached(size: int, policy: int) -> int:
    """(dev_ptr, ret): cacheable device memory; here the same as malloc (aclrtMallocCached)."""
    return _malloc(size, policy, pad=True)


@api()
def mem_flush(dev_ptr: int, size: int) -> None:
    """Write back cached device memory; a no-op in the simulation (aclrtMemFlush)."""
    _check_device_range(as_handle("dev_ptr", dev_ptr), _size("size", size))


@api()
def mem_invalidate(dev_ptr: int, size: int) -> None:
    """Invalidate cached device memory; a no-op in the simulation (aclrtMemInvalidate)."""
    _check_device_range(as_handle("dev_ptr", dev_ptr), _size("size", size))


def _check_device_range(address: int, size: int) -> None:
    context = current_context()
    if runtime().driver.mem_owner(address) is None:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"0x{address:x} is not device memory")
    memory_ops.check_device_range(context, address, size, "dev_ptr")


@api()
def free(dev_ptr: int) -> None:
    """Free memory from malloc (aclrtFree)."""
    address = as_handle("dev_ptr", dev_ptr)
    if address == 0:
        raise fail(ErrorCode.RT_PARAM_INVALID, "free of a null pointer")
    memory_ops.free(current_context(sticky=False), address)


@api(0)
def malloc_host(size: int) -> int:
    """(host_ptr, ret): pinned, page-aligned host memory at a real process address (aclrtMallocHost)."""
    nbytes = _size("size", size)
    try:
        return runtime().host.allocate(nbytes)
    except (OSError, ValueError, OverflowError, MemoryError) as exc:
        raise fail(ErrorCode.RT_MEMORY_ALLOCATION, f"host allocation of {nbytes} bytes failed: {exc}") from None


@api()
def free_host(host_ptr: int) -> None:
    """Free memory from malloc_host (aclrtFreeHost)."""
    address = as_handle("host_ptr", host_ptr)
    if not runtime().host.free(address):
        raise fail(ErrorCode.RT_PARAM_INVALID, f"0x{address:x} was not returned by malloc_host")


def _memset_target(context: Context, address: int, dst_max: int, count: int) -> None:
    """Device memory, or pinned host memory from malloc_host (the range must lie inside it)."""
    if address and runtime().driver.mem_owner(address) is None:
        span = max(1, min(dst_max, count))
        if not runtime().host.contains(address, span):
            raise fail(
                ErrorCode.RT_PARAM_INVALID,
                f"memset target 0x{address:x} is neither device memory nor pinned host memory from malloc_host",
            )


@api()
def memset(dev_ptr: int, max_size: int, value: int, count: int) -> None:
    """Fill count bytes with value (device memory or malloc_host memory) (aclrtMemset)."""
    address, limit = as_handle("dev_ptr", dev_ptr), as_int("max_size", max_size)
    byte, nbytes = as_int("value", value), as_int("count", count)
    context = current_context()
    _memset_target(context, address, limit, nbytes)
    memory_ops.memset(context, address, limit, byte, nbytes)


@api()
def memset_async(dev_ptr: int, max_size: int, value: int, count: int, stream: int) -> None:
    """memset as a task on stream (aclrtMemsetAsync)."""
    address, limit = as_handle("dev_ptr", dev_ptr), as_int("max_size", max_size)
    byte, nbytes = as_int("value", value), as_int("count", count)
    target = stream_of(as_handle("stream", stream), submit=True)
    _memset_target(target.context, address, limit, nbytes)
    memory_ops.memset(target.context, address, limit, byte, nbytes, target)


def _copy_args(dst: object, dest_max: object, src: object, count: object, kind: object) -> tuple[int, ...]:
    return (
        as_handle("dst", dst),
        as_int("dest_max", dest_max),
        as_handle("src", src),
        as_int("count", count),
        as_int("kind", kind),
    )


@api()
def memcpy(dst: int, dest_max: int, src: int, count: int, kind: int) -> None:
    """Synchronous copy; kind must match the pointers (DEFAULT infers it) (aclrtMemcpy)."""
    d, limit, s, n, k = _copy_args(dst, dest_max, src, count, kind)
    memory_ops.memcpy(current_context(), d, limit, s, n, k)


@api()
def memcpy_async(dst: int, dest_max: int, src: int, count: int, kind: int, stream: int) -> None:
    """Copy as a task on stream; host memory must stay valid until it runs (aclrtMemcpyAsync)."""
    d, limit, s, n, k = _copy_args(dst, dest_max, src, count, kind)
    target = stream_of(as_handle("stream", stream), submit=True)
    memory_ops.memcpy_async(target.context, d, limit, s, n, k, target)


@api()
def memcpy2d(dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int) -> None:
    """Copy height rows of width bytes between pitched buffers; HOST_TO_DEVICE or DEVICE_TO_HOST (aclrtMemcpy2d)."""
    d, dp, s, sp = as_handle("dst", dst), as_int("dpitch", dpitch), as_handle("src", src), as_int("spitch", spitch)
    w, h, k = as_int("width", width), as_int("height", height), as_int("kind", kind)
    if k not in HOST_COPY_KINDS:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"memcpy2d supports HOST_TO_DEVICE and DEVICE_TO_HOST, not kind {k}")
    if w <= 0 or h <= 0 or w > dp or w > sp:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"need 0 < width <= pitches (width {w}, dpitch {dp}, spitch {sp})")
    context = current_context()
    if dp == sp == w:
        memory_ops.memcpy(context, d, w * h, s, w * h, k)
        return
    for row in range(h):
        memory_ops.memcpy(context, d + row * dp, w, s + row * sp, w, k)


@api(0, 0)
def get_mem_info(attr: int) -> tuple[int, int]:
    """(free, total, ret) bytes for a memory attribute such as ACL_HBM_MEM (aclrtGetMemInfo)."""
    return memory_ops.mem_info(current_context(), as_int("attr", attr))
