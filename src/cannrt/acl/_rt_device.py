"""acl.rt device and context calls (aclrtSetDevice, aclrtCreateContext, aclrtGetDeviceInfo...)."""

from __future__ import annotations

from cannrt.acl import constants as c
from cannrt.acl._rt_overflow import apply_device_settings, apply_to_open_devices
from cannrt.acl._state import (
    STATE,
    api,
    as_handle,
    as_int,
    as_timeout,
    context_of,
    current_context,
    fail,
    runtime,
)
from cannrt.errors import ErrorCode
from cannrt.runtime import memory_ops

MAX_EXECUTE_TIMEOUT_S = 1091  # the largest AI Core execute timeout on Atlas A2 (CANN docs)


def _check_device_id(device_id: int) -> None:
    count = runtime().settings.device_count
    if not 0 <= device_id < count:
        raise fail(ErrorCode.RT_INVALID_DEVICEID, f"device {device_id} does not exist: this host has {count}")


@api()
def set_device(device_id: int) -> None:
    """Open a device and make its default context current (aclrtSetDevice)."""
    device = as_int("device_id", device_id)
    _check_device_id(device)
    context = runtime().set_device(device)
    STATE.contexts.add(context)
    apply_device_settings(device)  # the execute limit and overflow mode are process-wide


def _reset(device_id: int) -> None:
    device = as_int("device_id", device_id)
    _check_device_id(device)
    STATE.flush_dump()
    runtime().reset_device(device)
    STATE.forget_device(device)


@api()
def reset_device(device_id: int) -> None:
    """Release every resource of the device and clear its sticky error (aclrtResetDevice)."""
    _reset(device_id)


@api()
def reset_device_force(device_id: int) -> None:
    """Reset the device whatever set_device count it has (aclrtResetDeviceForce)."""
    _reset(device_id)


@api(0)
def get_device() -> int:
    """(device_id, ret) of the calling thread's context (aclrtGetDevice)."""
    return current_context(sticky=False).device_id


@api(0)
def get_device_count() -> int:
    """(count, ret): devices on this host (aclrtGetDeviceCount)."""
    if STATE.runtime is not None:
        return STATE.runtime.settings.device_count
    from cannrt.config import load_settings

    return load_settings().device_count


@api(c.ACL_HOST)
def get_run_mode() -> int:
    """(run_mode, ret): always ACL_HOST, the program runs on the host (aclrtGetRunMode)."""
    return c.ACL_HOST


def _device_attributes() -> dict[int, int]:
    chip = runtime().settings.chip
    return {
        c.ACL_DEV_ATTR_AICPU_CORE_NUM: chip.aicpu_count,
        c.ACL_DEV_ATTR_AICORE_CORE_NUM: chip.aicore_count - len(chip.disabled_cores),
        c.ACL_DEV_ATTR_CUBE_CORE_NUM: chip.aicore_count - len(chip.disabled_cores),
        c.ACL_DEV_ATTR_VECTOR_CORE_NUM: chip.vector_core_count,
        c.ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE: chip.ub_bytes,
        c.ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE: chip.hbm_bytes,
        c.ACL_DEV_ATTR_L2_CACHE_SIZE: chip.l2_bytes,
    }


@api(0)
def get_device_info(device_id: int, attr: int) -> int:
    """(value, ret) of a device attribute such as ACL_DEV_ATTR_AICORE_CORE_NUM (aclrtGetDeviceInfo)."""
    device, key = as_int("device_id", device_id), as_int("attr", attr)
    _check_device_id(device)
    table = _device_attributes()
    if key not in table:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"unknown device attribute {key}")
    return table[key]


@api()
def synchronize_device() -> None:
    """Wait for every stream of the current device (aclrtSynchronizeDevice)."""
    try:
        runtime().synchronize_device(current_context(sticky=False).device_id)
    finally:
        STATE.flush_dump()


@api()
def synchronize_device_with_timeout(timeout: int) -> None:
    """Wait up to timeout ms (-1: forever) for the current device (aclrtSynchronizeDeviceWithTimeout)."""
    limit = as_timeout(as_int("timeout", timeout))
    runtime().synchronize_device(current_context(sticky=False).device_id, limit)


@api(0)
def device_can_access_peer(device_id: int, peer_device_id: int) -> int:
    """(1 or 0, ret): whether device_id can copy to peer_device_id (aclrtDeviceCanAccessPeer)."""
    device, peer = as_int("device_id", device_id), as_int("peer_device_id", peer_device_id)
    return int(memory_ops.can_access_peer(runtime().settings.device_count, device, peer))


# -- contexts -----------------------------------------------------------------------------------
@api(0)
def create_context(device_id: int) -> int:
    """(context, ret): a new context on the device, made current (aclrtCreateContext)."""
    device = as_int("device_id", device_id)
    _check_device_id(device)
    return STATE.contexts.add(runtime().create_context(device))


@api()
def destroy_context(context: int) -> None:
    """Destroy a created context and everything in it (aclrtDestroyContext)."""
    handle = as_handle("context", context)
    ctx = context_of(handle)
    runtime().destroy_context(ctx)
    STATE.contexts.remove(handle)
    STATE.streams.remove_where(lambda s: s.context is ctx)
    STATE.events.remove_where(lambda e: e.event.context is ctx)


@api()
def set_context(context: int) -> None:
    """Make a context current on the calling thread (aclrtSetCurrentContext)."""
    runtime().set_context(context_of(as_handle("context", context)))


@api(0)
def get_context() -> int:
    """(context, ret): the calling thread's current context (aclrtGetCurrentContext)."""
    return STATE.contexts.add(current_context(sticky=False))


# -- timeouts and errors ------------------------------------------------------------------------
@api()
def set_op_wait_timeout(timeout: int) -> None:
    """Limit (seconds, 0 = none) on event waits (aclrtSetOpWaitTimeout): a stream wait blocked
    longer in modelled time fails with 107020 at the next synchronize."""
    value = as_int("timeout", timeout)
    if value < 0:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"timeout must be >= 0 s, got {value}")
    runtime()
    STATE.op_wait_timeout_s = value
    apply_to_open_devices()


@api()
def set_op_execute_timeout(timeout: int) -> None:
    """Limit (seconds, 0 = none) on one operator's execution (aclrtSetOpExecuteTimeOut): a kernel
    whose modelled run time passes it fails with 507014 (AI Core) or 507034 (vector core)."""
    value = as_int("timeout", timeout)
    if not 0 <= value <= MAX_EXECUTE_TIMEOUT_S:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"timeout must be 0..{MAX_EXECUTE_TIMEOUT_S} s, got {value}")
    runtime()
    STATE.op_execute_timeout_s = value
    apply_to_open_devices()


def _level_ok(level: object) -> bool:
    return as_int("level", level) == c.ACL_RT_THREAD_LEVEL


def peek_at_last_error(level: int = c.ACL_RT_THREAD_LEVEL) -> int:
    """This thread's most recent error code, kept (aclrtPeekAtLastError); only thread level exists."""
    if not _level_ok(level):
        return int(ErrorCode.RT_PARAM_INVALID)
    return STATE.errors.last_error


def get_last_error(level: int = c.ACL_RT_THREAD_LEVEL) -> int:
    """This thread's most recent error code, then cleared to ACL_SUCCESS (aclrtGetLastError)."""
    if not _level_ok(level):
        return int(ErrorCode.RT_PARAM_INVALID)
    code, STATE.errors.last_error = STATE.errors.last_error, 0
    return code
