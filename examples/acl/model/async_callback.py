"""An offline model run asynchronously: per batch, copy in, execute_async on a stream, copy out,
then a callback on the report thread reads the result (the samples' async inference flow).

    cannrt exec examples/acl/model/async_callback.py resnet50.om [batches]
"""

from __future__ import annotations

import sys

import numpy as np

import acl

ACL_SUCCESS = 0
ACL_ERROR_WAIT_CALLBACK_TIMEOUT = 100036
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_CALLBACK_BLOCK = 1
NPY_FLOAT32 = 11
DEVICE_ID = 0
REPORT_TIMEOUT_MS = 100

is_running = True
finished: list[str] = []


def check_ret(message: str, ret: int) -> None:
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def report_thread(args_list: list[int]) -> None:
    context = args_list[0]
    check_ret("acl.rt.set_context", acl.rt.set_context(context))
    while is_running:
        ret = acl.rt.process_report(REPORT_TIMEOUT_MS)
        if ret not in (ACL_SUCCESS, ACL_ERROR_WAIT_CALLBACK_TIMEOUT):
            finished.append(f"process_report returned {ret}")


def on_inference_done(user_data: dict[str, object]) -> None:
    """Runs on the report thread once the batch's output copy completed."""
    host, size = user_data["host"], user_data["size"]
    scores = acl.util.ptr_to_numpy(host, (int(size) // 4,), NPY_FLOAT32)  # type: ignore[call-overload]
    finished.append(f"batch {user_data['batch']}: top class {int(np.argmax(scores))}, max {float(scores.max()):.6f}")


def main(model_path: str, batches: int) -> None:
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

    model_id, ret = acl.mdl.load_from_file(model_path)
    check_ret("acl.mdl.load_from_file", ret)
    desc = acl.mdl.create_desc()
    check_ret("acl.mdl.get_desc", acl.mdl.get_desc(desc, model_id))
    in_size, out_size = acl.mdl.get_input_size_by_index(desc, 0), acl.mdl.get_output_size_by_index(desc, 0)
    dims, ret = acl.mdl.get_input_dims(desc, 0)
    check_ret("acl.mdl.get_input_dims", ret)

    rng = np.random.default_rng(0)
    jobs = []
    for batch in range(batches):  # every batch has its own buffers: the copies overlap the model
        device_in, ret = acl.rt.malloc(in_size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        device_out, ret = acl.rt.malloc(out_size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        host_in, ret = acl.rt.malloc_host(in_size)
        check_ret("acl.rt.malloc_host", ret)
        host_out, ret = acl.rt.malloc_host(out_size)
        check_ret("acl.rt.malloc_host", ret)
        image = rng.standard_normal(dims["dims"]).astype(np.float32)
        acl.util.ptr_to_numpy(host_in, (image.size,), NPY_FLOAT32)[:] = image.ravel()
        inputs, outputs = acl.mdl.create_dataset(), acl.mdl.create_dataset()
        check_ret("add input", acl.mdl.add_dataset_buffer(inputs, acl.create_data_buffer(device_in, in_size))[1])
        check_ret("add output", acl.mdl.add_dataset_buffer(outputs, acl.create_data_buffer(device_out, out_size))[1])
        extras = []  # the model's other outputs: buffers it writes, not read back here
        for index in range(1, acl.mdl.get_num_outputs(desc)):
            size = acl.mdl.get_output_size_by_index(desc, index)
            extra, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
            check_ret("acl.rt.malloc", ret)
            check_ret("add output", acl.mdl.add_dataset_buffer(outputs, acl.create_data_buffer(extra, size))[1])
            extras.append(extra)
        check_ret(
            "copy in", acl.rt.memcpy_async(device_in, in_size, host_in, in_size, ACL_MEMCPY_HOST_TO_DEVICE, stream)
        )
        check_ret("acl.mdl.execute_async", acl.mdl.execute_async(model_id, inputs, outputs, stream))
        check_ret(
            "copy out", acl.rt.memcpy_async(host_out, out_size, device_out, out_size, ACL_MEMCPY_DEVICE_TO_HOST, stream)
        )
        user_data = {"batch": batch, "host": host_out, "size": out_size}
        check_ret(
            "acl.rt.launch_callback", acl.rt.launch_callback(on_inference_done, user_data, ACL_CALLBACK_BLOCK, stream)
        )
        jobs.append((device_in, device_out, host_in, host_out, inputs, outputs, extras))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))

    is_running = False
    check_ret("acl.rt.unsubscribe_report", acl.rt.unsubscribe_report(thread_id, stream))
    check_ret("acl.util.stop_thread", acl.util.stop_thread(thread_id))
    for line in finished:
        print(line)
    for device_in, device_out, host_in, host_out, inputs, outputs, extras in jobs:
        for dataset in (inputs, outputs):
            for index in range(acl.mdl.get_dataset_num_buffers(dataset)):
                check_ret("destroy buffer", acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(dataset, index)))
            check_ret("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset(dataset))
        for extra in extras:
            check_ret("acl.rt.free", acl.rt.free(extra))
        check_ret("acl.rt.free", acl.rt.free(device_in))
        check_ret("acl.rt.free", acl.rt.free(device_out))
        check_ret("acl.rt.free_host", acl.rt.free_host(host_in))
        check_ret("acl.rt.free_host", acl.rt.free_host(host_out))
    check_ret("acl.mdl.destroy_desc", acl.mdl.destroy_desc(desc))
    check_ret("acl.mdl.unload", acl.mdl.unload(model_id))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print("done")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
