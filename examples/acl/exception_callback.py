"""An exception callback, pyACL style: acl.rt.set_exception_info_callback is told about a task
that fails on the device (here a Relu whose data buffers claim more memory than was allocated),
the error stays in the context (every later call returns it) until acl.rt.reset_device.

Run it on the simulated NPU with:  cannrt exec examples/acl/exception_callback.py
"""

from __future__ import annotations

import acl

ACL_SUCCESS = 0
ACL_FLOAT = 0
ACL_FORMAT_ND = 2
ACL_MEM_MALLOC_HUGE_FIRST = 0
DEVICE_ID = 0


def check_ret(message: str, ret: int) -> None:
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def exception_callback(exception_info: int) -> None:
    """Runs when the device reports a failed task."""
    print("exception callback:")
    print(f"  task id   {acl.rt.get_task_id_from_exception_info(exception_info)}")
    print(f"  stream id {acl.rt.get_stream_id_from_exception_info(exception_info)}")
    print(f"  thread id {acl.rt.get_thread_id_from_exception_info(exception_info)}")
    print(f"  device id {acl.rt.get_device_id_from_exception_info(exception_info)}")
    print(f"  error     {acl.rt.get_error_code_from_exception_info(exception_info)}")


def launch_faulty_relu(stream: int) -> None:
    """A Relu over 64 Ki floats whose buffers really hold 64 bytes each: the kernel reads past them."""
    count = 64 * 1024
    desc = acl.create_tensor_desc(ACL_FLOAT, [count], ACL_FORMAT_ND)
    nbytes = acl.get_tensor_desc_size(desc)
    x, ret = acl.rt.malloc(64, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    y, ret = acl.rt.malloc(64, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    inputs = [acl.create_data_buffer(x, nbytes)]  # the size is a lie
    outputs = [acl.create_data_buffer(y, nbytes)]
    check_ret("acl.op.execute_v2", acl.op.execute_v2("Relu", [desc], inputs, [desc], outputs, 0, stream))


def main() -> None:
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_exception_info_callback", acl.rt.set_exception_info_callback(exception_callback))
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)

    launch_faulty_relu(stream)  # enqueueing succeeds: the fault happens on the device
    ret = acl.rt.synchronize_stream(stream)
    print(f"synchronize_stream returned {ret}")
    print(f"device report: {acl.get_recent_err_msg().splitlines()[0]}")

    _, ret = acl.rt.malloc(1024, ACL_MEM_MALLOC_HUGE_FIRST)
    print(f"malloc after the fault returned {ret} (sticky until reset_device)")

    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    ptr, ret = acl.rt.malloc(1024, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc after reset", ret)
    print("after reset_device the device works again")
    check_ret("acl.rt.free", acl.rt.free(ptr))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print("done")


if __name__ == "__main__":
    main()
