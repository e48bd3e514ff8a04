"""An offline model through an AclLiteModel-style wrapper, as 57 of the pyACL samples run their
models: outputs built from get_output_dims and get_output_data_type, and a check for the
"ascend_mbatch_shape_data" input on every execute.

    cannrt exec examples/acl/model/acllite_style.py resnet50.om
"""

from __future__ import annotations

import sys

import numpy as np

import acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
DEVICE_ID = 0
NUMPY_TYPES = {0: np.float32, 1: np.float16, 2: np.int8, 3: np.int32, 4: np.uint8, 9: np.int64, 12: np.bool_}


def check_ret(message: str, ret: int) -> None:
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


class AclLiteResource:
    """Device, context and stream of the program."""

    def __init__(self, device_id: int = DEVICE_ID) -> None:
        check_ret("acl.init", acl.init())
        check_ret("acl.rt.set_device", acl.rt.set_device(device_id))
        self.device_id = device_id
        self.context, ret = acl.rt.create_context(device_id)
        check_ret("acl.rt.create_context", ret)
        self.stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)

    def release(self) -> None:
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(self.stream))
        check_ret("acl.rt.destroy_context", acl.rt.destroy_context(self.context))
        check_ret("acl.rt.reset_device", acl.rt.reset_device(self.device_id))
        check_ret("acl.finalize", acl.finalize())


class AclLiteModel:
    """Load a model, keep its output dataset, run it on numpy arrays."""

    def __init__(self, model_path: str) -> None:
        self.model_id, ret = acl.mdl.load_from_file(model_path)
        check_ret("acl.mdl.load_from_file", ret)
        self.desc = acl.mdl.create_desc()
        check_ret("acl.mdl.get_desc", acl.mdl.get_desc(self.desc, self.model_id))
        self.output_dataset = acl.mdl.create_dataset()
        self.outputs = []
        for index in range(acl.mdl.get_num_outputs(self.desc)):
            size = acl.mdl.get_output_size_by_index(self.desc, index)
            ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
            check_ret("acl.rt.malloc", ret)
            dims, ret = acl.mdl.get_output_dims(self.desc, index)
            check_ret("acl.mdl.get_output_dims", ret)
            dtype = NUMPY_TYPES[acl.mdl.get_output_data_type(self.desc, index)]
            buffer = acl.create_data_buffer(ptr, size)
            _, ret = acl.mdl.add_dataset_buffer(self.output_dataset, buffer)
            check_ret("acl.mdl.add_dataset_buffer", ret)
            self.outputs.append((ptr, size, tuple(dims["dims"]), dtype, buffer))

    def execute(self, input_list: list[np.ndarray]) -> list[np.ndarray]:
        _, ret = acl.mdl.get_input_index_by_name(self.desc, "ascend_mbatch_shape_data")
        self.is_dynamic = ret == ACL_SUCCESS  # a static model has no such input
        dataset, staged = acl.mdl.create_dataset(), []
        for array in input_list:
            data = np.ascontiguousarray(array)
            ptr, ret = acl.rt.malloc(data.nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
            check_ret("acl.rt.malloc", ret)
            check_ret(
                "acl.rt.memcpy",
                acl.rt.memcpy(ptr, data.nbytes, acl.util.numpy_to_ptr(data), data.nbytes, ACL_MEMCPY_HOST_TO_DEVICE),
            )
            buffer = acl.create_data_buffer(ptr, data.nbytes)
            _, ret = acl.mdl.add_dataset_buffer(dataset, buffer)
            check_ret("acl.mdl.add_dataset_buffer", ret)
            staged.append((ptr, buffer))
        check_ret("acl.mdl.execute", acl.mdl.execute(self.model_id, dataset, self.output_dataset))
        results = []
        for ptr, size, dims, dtype, _ in self.outputs:
            host = np.empty(dims, dtype=dtype)
            assert host.nbytes == size, (host.nbytes, size)  # acllite relies on this
            check_ret(
                "acl.rt.memcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(host), size, ptr, size, ACL_MEMCPY_DEVICE_TO_HOST)
            )
            results.append(host)
        for ptr, buffer in staged:
            check_ret("acl.destroy_data_buffer", acl.destroy_data_buffer(buffer))
            check_ret("acl.rt.free", acl.rt.free(ptr))
        check_ret("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset(dataset))
        return results

    def release(self) -> None:
        for ptr, _, _, _, buffer in self.outputs:
            check_ret("acl.destroy_data_buffer", acl.destroy_data_buffer(buffer))
            check_ret("acl.rt.free", acl.rt.free(ptr))
        check_ret("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset(self.output_dataset))
        check_ret("acl.mdl.destroy_desc", acl.mdl.destroy_desc(self.desc))
        check_ret("acl.mdl.unload", acl.mdl.unload(self.model_id))


def main(model_path: str) -> None:
    resource = AclLiteResource()
    model = AclLiteModel(model_path)
    dims, ret = acl.mdl.get_input_dims(model.desc, 0)
    check_ret("acl.mdl.get_input_dims", ret)
    image = np.random.default_rng(0).standard_normal(dims["dims"]).astype(np.float32)
    for run in range(2):
        outputs = model.execute([image])
        print(
            f"run {run}: dynamic {model.is_dynamic}, "
            + ", ".join(
                f"output {i} {o.shape} sum {float(o.astype(np.float64).sum()):.6f}" for i, o in enumerate(outputs)
            )
        )
    model.release()
    resource.release()
    print("done")


if __name__ == "__main__":
    main(sys.argv[1])
