"""Host callbacks, pyACL style: a report thread started with acl.util.start_thread loops on
acl.rt.process_report; acl.rt.subscribe_report binds a stream to it; acl.rt.launch_callback
queues Python functions on the stream, which run on that thread once earlier tasks finish.

Run it on the simulated NPU with:  cannrt exec examples/acl/callbacks.py
"""

from __future__ import annotations

import threading

import numpy as np

import acl

ACL_SUCCESS = 0
ACL_ERROR_WAIT_CALLBACK_TIMEOUT = 100036
ACL_CALLBACK_NO_BLOCK = 0
ACL_CALLBACK_BLOCK = 1
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
DEVICE_ID = 0
REPORT_TIMEOUT_MS = 100

is_running = True
report_log: list[str] = []


def check_ret(message: str, ret: int) -> None:
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def report_thread(args_list: list[int]) -> None:
    """The thread that runs the callbacks: bind the context, then process reports until told to stop."""
    context = args_list[0]
    check_ret("acl.rt.set_context", acl.rt.set_context(context))
    while is_running:
        ret = acl.rt.process_report(REPORT_TIMEOUT_MS)
        if ret not in (ACL_SUCCESS, ACL_ERROR_WAIT_CALLBACK_TIMEOUT):
            report_log.append(f"process_report returned {ret}")


def on_batch_done(user_data: dict[str, object]) -> None:
    """A callback: runs on the report thread after the stream's earlier tasks completed."""
    host = user_data["host"]
    assert isinstance(host, np.ndarray)
    on_thread = threading.current_thread().name
    report_log.append(f"batch {user_data['batch']} done on {on_thread}: checksum {float(host.sum()):.1f}")


def main() -> None:
    global is_running
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    context, ret = acl.rt.get_context()
    check_ret("acl.rt.get_context", ret)
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)

    thread_id, ret = acl.util.start_thread(report_thread, [context])
    check_ret("acl.util.start_thread", ret)
    check_ret("acl.rt.subscribe_report", acl.rt.subscribe_report(thread_id, stream))

    size = 1024 * 4
    device, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    batches = [np.full(1024, i, dtype=np.float32) for i in range(3)]
    results = [np.zeros(1024, dtype=np.float32) for _ in batches]
    for index, (batch, result) in enumerate(zip(batches, results, strict=True)):
        src, dst = acl.util.numpy_to_ptr(batch), acl.util.numpy_to_ptr(result)
        check_ret("upload", acl.rt.memcpy_async(device, size, src, size, ACL_MEMCPY_HOST_TO_DEVICE, stream))
        check_ret("download", acl.rt.memcpy_async(dst, size, device, size, ACL_MEMCPY_DEVICE_TO_HOST, stream))
        block = ACL_CALLBACK_BLOCK if index % 2 == 0 else ACL_CALLBACK_NO_BLOCK
        user_data = {"batch": index, "host": result}
        check_ret("acl.rt.launch_callback", acl.rt.launch_callback(on_batch_done, user_data, block, stream))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))

    is_running = False
    check_ret("acl.util.stop_thread", acl.util.stop_thread(thread_id))
    check_ret("acl.rt.unsubscribe_report", acl.rt.unsubscribe_report(thread_id, stream))
    for line in report_log:
        print(line)

    check_ret("acl.rt.free", acl.rt.free(device))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print("done")


if __name__ == "__main__":
    main()
