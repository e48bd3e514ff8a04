"""The pyACL quick-start flow on an offline model: load_from_file, datasets, execute,
get_cur_output_dims and the top-5 classes of the first output.

    cannrt atc --model=resnet50.onnx --framework=5 --output=resnet50 --soc_version=Ascend910B1
    cannrt exec examples/acl/model/quick_start.py resnet50.om [input.npy]

Without an input file the program feeds seeded random data of the model's input shape.
"""

from __future__ import annotations

import sys

import numpy as np

import acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
NPY_FLOAT32 = 11
DEVICE_ID = 0


def check_ret(message: str, ret: int) -> None:
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def create_dataset(desc: int, count: int, size_of: object) -> tuple[int, list[tuple[int, int]]]:
    """A dataset of freshly allocated device buffers, one per model input or output."""
    dataset = acl.mdl.create_dataset()
    buffers = []
    for index in range(count):
        size = size_of(desc, index)  # type: ignore[operator]
        ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        data = acl.create_data_buffer(ptr, size)
        _, ret = acl.mdl.add_dataset_buffer(dataset, data)
        check_ret("acl.mdl.add_dataset_buffer", ret)
        buffers.append((ptr, size))
    return dataset, buffers


def destroy_dataset(dataset: int) -> None:
    for index in range(acl.mdl.get_dataset_num_buffers(dataset)):
        data = acl.mdl.get_dataset_buffer(dataset, index)
        check_ret("acl.rt.free", acl.rt.free(acl.get_data_buffer_addr(data)))
        check_ret("acl.destroy_data_buffer", acl.destroy_data_buffer(data))
    check_ret("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset(dataset))


def main(model_path: str, input_path: str | None) -> None:
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    context, ret = acl.rt.create_context(DEVICE_ID)
    check_ret("acl.rt.create_context", ret)

    model_id, ret = acl.mdl.load_from_file(model_path)
    check_ret("acl.mdl.load_from_file", ret)
    desc = acl.mdl.create_desc()
    check_ret("acl.mdl.get_desc", acl.mdl.get_desc(desc, model_id))
    inputs, in_buffers = create_dataset(desc, acl.mdl.get_num_inputs(desc), acl.mdl.get_input_size_by_index)
    outputs, out_buffers = create_dataset(desc, acl.mdl.get_num_outputs(desc), acl.mdl.get_output_size_by_index)

    dims, ret = acl.mdl.get_input_dims(desc, 0)
    check_ret("acl.mdl.get_input_dims", ret)
    if input_path:
        image = np.load(input_path).astype(np.float32)
    else:
        image = np.random.default_rng(0).standard_normal(dims["dims"]).astype(np.float32)
    ptr, size = in_buffers[0]
    check_ret(
        "acl.rt.memcpy", acl.rt.memcpy(ptr, size, acl.util.numpy_to_ptr(image), image.nbytes, ACL_MEMCPY_HOST_TO_DEVICE)
    )

    check_ret("acl.mdl.execute", acl.mdl.execute(model_id, inputs, outputs))

    dims, ret = acl.mdl.get_cur_output_dims(desc, 0)
    check_ret("acl.mdl.get_cur_output_dims", ret)
    ptr, size = out_buffers[0]
    host, ret = acl.rt.malloc_host(size)
    check_ret("acl.rt.malloc_host", ret)
    check_ret("acl.rt.memcpy", acl.rt.memcpy(host, size, ptr, size, ACL_MEMCPY_DEVICE_TO_HOST))
    scores = acl.util.ptr_to_numpy(host, (size // 4,), NPY_FLOAT32).copy()
    print(f"output {dims['name']}: dims {dims['dims']}")
    top5 = np.argsort(-scores)[:5]
    for rank, index in enumerate(top5):
        print(f"top {rank + 1}: class {index}, score {scores[index]:.6f}")
    check_ret("acl.rt.free_host", acl.rt.free_host(host))

    destroy_dataset(inputs)
    destroy_dataset(outputs)
    check_ret("acl.mdl.destroy_desc", acl.mdl.destroy_desc(desc))
    check_ret("acl.mdl.unload", acl.mdl.unload(model_id))
    check_ret("acl.rt.destroy_context", acl.rt.destroy_context(context))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print("done")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
