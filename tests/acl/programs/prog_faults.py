"""Conformance: a device fault reaches the exception callback, becomes a sticky error for every
later call in the context until reset_device, and the device works again afterwards."""

from __future__ import annotations

import numpy as np
from _check import done, expect, ok, value

import acl

ACL_FLOAT, ACL_FORMAT_ND = 0, 2
ACL_ERROR_RT_VECTOR_CORE_EXCEPTION = 507035
INVALID_INFO = 0xFFFFFFFF
STICKY = ACL_ERROR_RT_VECTOR_CORE_EXCEPTION

infos: list[tuple[int, int, int, int, int]] = []


def on_exception(info: int) -> None:
    infos.append(
        (
            acl.rt.get_task_id_from_exception_info(info),
            acl.rt.get_stream_id_from_exception_info(info),
            acl.rt.get_thread_id_from_exception_info(info),
            acl.rt.get_device_id_from_exception_info(info),
            acl.rt.get_error_code_from_exception_info(info),
        )
    )


def relu_with_lying_buffers(stream: int, count: int) -> tuple[list[int], list[int], list[int]]:
    """A Relu whose buffers claim more bytes than their 64-byte allocations hold."""
    small_in = value(acl.rt.malloc(64, 0), "malloc")
    small_out = value(acl.rt.malloc(64, 0), "malloc")
    desc = acl.create_tensor_desc(ACL_FLOAT, [count], ACL_FORMAT_ND)
    nbytes = acl.get_tensor_desc_size(desc)
    buffers = [acl.create_data_buffer(small_in, nbytes), acl.create_data_buffer(small_out, nbytes)]
    ok(acl.op.execute_v2("Relu", [desc], buffers[:1], [desc], buffers[1:], 0, stream), "enqueue the faulty Relu")
    return [small_in, small_out], buffers, [desc]


def sticky_calls(stream: int) -> None:
    """Every call that works in the faulted context returns the fault."""
    data = np.zeros(16, np.float32)
    expect(acl.rt.synchronize_stream(stream), STICKY, "sync again")
    expect(acl.rt.malloc(64, 0), (0, STICKY), "malloc")
    expect(acl.rt.create_stream(), (0, STICKY), "create_stream")
    expect(acl.rt.create_event(), (0, STICKY), "create_event")
    expect(acl.rt.memset_async(0, 64, 0, 64, stream), STICKY, "memset_async")
    expect(acl.rt.memcpy(acl.util.numpy_to_ptr(data), 64, acl.util.numpy_to_ptr(data), 64, 0), STICKY, "memcpy")
    expect(acl.rt.synchronize_device(), STICKY, "synchronize_device")
    expect(acl.rt.get_device(), (0, 0), "queries still answer")
    expect(acl.rt.peek_at_last_error(0), STICKY, "last error is the fault")


def main() -> None:
    ok(acl.init(), "init")
    for getter in (
        acl.rt.get_task_id_from_exception_info,
        acl.rt.get_stream_id_from_exception_info,
        acl.rt.get_thread_id_from_exception_info,
        acl.rt.get_device_id_from_exception_info,
        acl.rt.get_error_code_from_exception_info,
    ):
        expect(getter(12345), INVALID_INFO, f"{getter.__name__} of an unknown info")
    ok(acl.rt.set_exception_info_callback(on_exception), "set_exception_info_callback")
    ok(acl.rt.set_device(0), "set_device")
    stream = value(acl.rt.create_stream(), "create_stream")
    pointers, buffers, descs = relu_with_lying_buffers(stream, 1 << 16)
    expect(acl.rt.synchronize_stream(stream), STICKY, "the fault comes back from synchronize_stream")
    expect(len(infos), 1, "the callback ran once")
    task_id, stream_id, thread_id, device_id, code = infos[0]
    expect((device_id, code), (0, STICKY), "exception info: device and code")
    expect(task_id != INVALID_INFO and stream_id != INVALID_INFO and thread_id != INVALID_INFO, True, "ids set")
    expect("error" in acl.get_recent_err_msg().lower(), True, "the message carries the device report")
    sticky_calls(stream)
    ok(acl.rt.reset_device(0), "reset_device clears the fault")
    ok(acl.rt.set_device(0), "set_device again")
    fresh = value(acl.rt.malloc(64, 0), "malloc works again")
    ok(acl.rt.free(fresh), "free")
    ok(acl.rt.synchronize_device(), "device is clean")
    ok(acl.rt.set_exception_info_callback(None), "remove the callback")
    for buffer in buffers:
        ok(acl.destroy_data_buffer(buffer), "destroy_data_buffer")
    for desc in descs:
        acl.destroy_tensor_desc(desc)
    del pointers  # released with the device
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")
    done("faults")


if __name__ == "__main__":
    main()
