"""Single-operator execution, pyACL style (the samples' 4_blas flow): load the operator models,
describe tensors, wrap device memory in data buffers, run Add with acl.op.execute_v2 and
MatMulV2 through an operator handle.

On an NPU, op_models/ holds .om files made by `atc --singleop=ops.json`; cannrt reads the JSON
itself, so the directory holds ops.json. Run it with:  cannrt exec examples/acl/single_op.py
"""

from __future__ import annotations

import os

import numpy as np

import acl

ACL_SUCCESS = 0
ACL_FLOAT = 0
ACL_FLOAT16 = 1
ACL_FORMAT_ND = 2
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
DEVICE_ID = 0
MODEL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "op_models")

resources: list[tuple[int, int, int]] = []  # (desc, data buffer, device pointer)


def check_ret(message: str, ret: int) -> None:
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def device_tensor(array: np.ndarray, acl_type: int) -> tuple[int, int, int]:
    """A tensor description, a data buffer and device memory holding array."""
    desc = acl.create_tensor_desc(acl_type, list(array.shape), ACL_FORMAT_ND)
    size = acl.get_tensor_desc_size(desc)
    ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    host = np.ascontiguousarray(array)
    check_ret("acl.rt.memcpy", acl.rt.memcpy(ptr, size, acl.util.numpy_to_ptr(host), size, ACL_MEMCPY_HOST_TO_DEVICE))
    resources.append((desc, acl.create_data_buffer(ptr, size), ptr))
    return resources[-1]


def read_back(ptr: int, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    host = np.empty(shape, dtype=dtype)
    check_ret(
        "acl.rt.memcpy",
        acl.rt.memcpy(acl.util.numpy_to_ptr(host), host.nbytes, ptr, host.nbytes, ACL_MEMCPY_DEVICE_TO_HOST),
    )
    return host


def run_add(stream: int) -> None:
    a = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float16)
    b = np.ones((8, 16), dtype=np.float16)
    (a_desc, a_buf, _), (b_desc, b_buf, _) = device_tensor(a, ACL_FLOAT16), device_tensor(b, ACL_FLOAT16)
    c_desc, c_buf, c_ptr = device_tensor(np.zeros((8, 16), np.float16), ACL_FLOAT16)
    attr = acl.op.create_attr()
    check_ret(
        "acl.op.execute_v2", acl.op.execute_v2("Add", [a_desc, b_desc], [a_buf, b_buf], [c_desc], [c_buf], attr, stream)
    )
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    acl.op.destroy_attr(attr)
    print(f"Add: max error {float(np.abs(read_back(c_ptr, (8, 16), np.float16) - (a + b)).max())}")


def run_matmul(stream: int) -> None:
    x = np.random.default_rng(2).standard_normal((4, 16)).astype(np.float16)
    w = np.random.default_rng(3).standard_normal((16, 32)).astype(np.float16)
    (x_desc, x_buf, _), (w_desc, w_buf, _) = device_tensor(x, ACL_FLOAT16), device_tensor(w, ACL_FLOAT16)
    y_desc, y_buf, y_ptr = device_tensor(np.zeros((4, 32), np.float32), ACL_FLOAT)
    attr = acl.op.create_attr()
    check_ret("set_attr_bool", acl.op.set_attr_bool(attr, "transpose_x1", False))
    check_ret("set_attr_bool", acl.op.set_attr_bool(attr, "transpose_x2", False))
    handle, ret = acl.op.create_handle("MatMulV2", [x_desc, w_desc], [y_desc], attr)
    check_ret("acl.op.create_handle", ret)
    check_ret("acl.op.execute_with_handle", acl.op.execute_with_handle(handle, [x_buf, w_buf], [y_buf], stream))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    want = x.astype(np.float32) @ w.astype(np.float32)
    print(f"MatMulV2: max error {float(np.abs(read_back(y_ptr, (4, 32), np.float32) - want).max()):.2e}")
    acl.op.destroy_handle(handle)
    acl.op.destroy_attr(attr)


def main() -> None:
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    check_ret("acl.op.set_model_dir", acl.op.set_model_dir(MODEL_DIR))
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    run_add(stream)
    run_matmul(stream)
    for desc, buffer, ptr in resources:
        check_ret("acl.destroy_data_buffer", acl.destroy_data_buffer(buffer))
        acl.destroy_tensor_desc(desc)
        check_ret("acl.rt.free", acl.rt.free(ptr))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print("done")


if __name__ == "__main__":
    main()
