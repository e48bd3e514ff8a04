"""acl.rt overflow detection and execute limits: aclrtSetDeviceSatMode, aclrtGetDeviceSatMode,
aclrtGetOverflowStatus, aclrtResetOverflowStatus, and the device side of aclrtSetOpExecuteTimeOut.

The settings are process-wide (the last call wins, as in CANN), kept in the facade's state (kept
across reset_device, cleared by init and finalize) and applied to every device that is open and
to every device opened later.
"""

from __future__ import annotations

from cannrt.abi import OVERFLOW_STATUS_BYTES
from cannrt.acl._state import STATE, api, as_handle, as_int, fail, runtime, stream_of
from cannrt.errors import ErrorCode

ACL_RT_OVERFLOW_MODE_SATURATION = 0
ACL_RT_OVERFLOW_MODE_INFNAN = 1  # the default


def apply_device_settings(device_id: int) -> None:
    """Program a device with the execute limit, the saturation mode and the overflow switch."""
    rt = runtime()
    second = 1_000_000_000
    execute, wait = STATE.op_execute_timeout_s * second, STATE.op_wait_timeout_s * second
    rt.driver.op_timeout_configure(device_id, execute, wait, rt.host_time_ns)
    session = STATE.dump
    overflow = bool(session is not None and session.overflow)
    rt.driver.overflow_configure(device_id, overflow, overflow)
    rt.driver.saturation_configure(device_id, STATE.saturation)


def apply_to_open_devices() -> None:
    """Program every open device with the current settings."""
    for device_id in list(runtime().devices):
        apply_device_settings(device_id)


@api()
def set_device_sat_mode(mode: int) -> None:
    """Float results saturate (0) or give inf/nan (1, the default) (aclrtSetDeviceSatMode)."""
    value = as_int("mode", mode)
    runtime()
    if value not in (ACL_RT_OVERFLOW_MODE_SATURATION, ACL_RT_OVERFLOW_MODE_INFNAN):
        raise fail(ErrorCode.RT_PARAM_INVALID, f"overflow mode must be 0 (saturation) or 1 (inf/nan), got {value}")
    STATE.saturation = value == ACL_RT_OVERFLOW_MODE_SATURATION
    apply_to_open_devices()


@api(ACL_RT_OVERFLOW_MODE_INFNAN)
def get_device_sat_mode() -> int:
    """(mode, ret): the float overflow mode in force (aclrtGetDeviceSatMode)."""
    runtime()
    return ACL_RT_OVERFLOW_MODE_SATURATION if STATE.saturation else ACL_RT_OVERFLOW_MODE_INFNAN


@api()
def get_overflow_status(output_addr: int, output_size: int, stream: int) -> None:
    """Copy the device's overflow status (64 bytes, non-zero after a float exception) into
    device memory at output_addr, after the stream's earlier work (aclrtGetOverflowStatus).

    The copy is made once the stream's work before it has run: the call synchronises the stream
    (CANN queues a task; the bytes are the same)."""
    address = as_handle("output_addr", output_addr)
    size = as_int("output_size", output_size)
    handle = as_handle("stream", stream)
    runtime()
    if address == 0 or size < OVERFLOW_STATUS_BYTES:
        raise fail(ErrorCode.RT_PARAM_INVALID, f"needs {OVERFLOW_STATUS_BYTES} bytes of device memory, got {size}")
    target = stream_of(handle, submit=True)
    target.synchronize()
    context = target.context
    status = runtime().driver.overflow_status(context.device_id)
    runtime().driver.mem_write(context.asid, address, status)


@api()
def reset_overflow_status(stream: int) -> None:
    """Clear the device's overflow status after the stream's earlier work (aclrtResetOverflowStatus)."""
    target = stream_of(as_handle("stream", stream), submit=True)
    target.synchronize()
    runtime().driver.overflow_status(target.context.device_id, reset=True)
