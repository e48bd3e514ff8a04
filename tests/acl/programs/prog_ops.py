"""Conformance: single-operator execution (the samples' 4_blas flow) for every built-in kernel,
operator handles, attributes, model directories, tensor descriptions and data buffers."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable

import numpy as np
from _check import done, expect, ok, value

import acl

ACL_FLOAT, ACL_FLOAT16, ACL_INT8, ACL_INT32, ACL_BF16 = 0, 1, 2, 3, 27
ACL_FORMAT_NCHW, ACL_FORMAT_ND, ACL_FORMAT_NC1HWC0 = 0, 2, 3
H2D, D2H = 1, 2
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_PARSE_FILE = 100006
ACL_ERROR_OP_INPUT_NOT_MATCH = 100021
ACL_ERROR_OP_OUTPUT_NOT_MATCH = 100022
ACL_ERROR_OP_ATTR_NOT_MATCH = 100023
ACL_ERROR_OP_NOT_FOUND = 100024
ACL_ERROR_OP_LOAD_FAILED = 100025
ACL_ERROR_UNSUPPORTED_DATA_TYPE = 100026
ACL_ERROR_FORMAT_NOT_MATCH = 100027
ACL_ERROR_FEATURE_UNSUPPORTED = 200006
NUMPY = {ACL_FLOAT: np.float32, ACL_FLOAT16: np.float16, ACL_INT8: np.int8, ACL_INT32: np.int32}

STREAM = [0]
allocations: list[int] = []


def tensor(array: np.ndarray, dtype: int, fmt: int = ACL_FORMAT_ND) -> tuple[int, int, int]:
    """(desc, data buffer, device pointer) holding array."""
    desc = acl.create_tensor_desc(dtype, list(array.shape), fmt)
    size = acl.get_tensor_desc_size(desc)
    expect(size, array.nbytes, "get_tensor_desc_size")
    ptr = value(acl.rt.malloc(max(size, 1), 0), "malloc")
    allocations.append(ptr)
    if size:
        ok(acl.rt.memcpy(ptr, size, acl.util.numpy_to_ptr(np.ascontiguousarray(array)), size, H2D), "upload")
    return desc, acl.create_data_buffer(ptr, size), ptr


def output(shape: tuple[int, ...], dtype: int) -> tuple[int, int, int]:
    return tensor(np.zeros(shape, NUMPY[dtype]), dtype)


def download(ptr: int, shape: tuple[int, ...], dtype: int) -> np.ndarray:
    host = np.zeros(shape, NUMPY[dtype])
    ok(acl.rt.memcpy(acl.util.numpy_to_ptr(host), host.nbytes, ptr, host.nbytes, D2H), "download")
    return host


def run(
    op: str,
    inputs: list[np.ndarray],
    in_types: list[int],
    out_shape: tuple[int, ...],
    out_type: int,
    attr: int = 0,
    execute: Callable[..., int] = acl.op.execute_v2,
) -> np.ndarray:
    ins = [tensor(a, t) for a, t in zip(inputs, in_types, strict=True)]
    out = output(out_shape, out_type)
    ret = execute(op, [i[0] for i in ins], [i[1] for i in ins], [out[0]], [out[1]], attr, STREAM[0])
    ok(ret, f"execute_v2 {op}")
    ok(acl.rt.synchronize_stream(STREAM[0]), f"sync {op}")
    return download(out[2], out_shape, out_type)


def close(got: np.ndarray, want: np.ndarray, what: str, tol: float = 1e-3) -> None:
    expect(bool(np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)), True, what)


def every_operator() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    y = rng.standard_normal((8, 16)).astype(np.float32)
    close(run("Add", [x, y], [ACL_FLOAT] * 2, (8, 16), ACL_FLOAT), x + y, "Add")
    close(run("Add", [x, y], [ACL_FLOAT] * 2, (8, 16), ACL_FLOAT, execute=acl.op.execute), x + y, "Add (execute)")
    close(run("Mul", [x, y[0]], [ACL_FLOAT] * 2, (8, 16), ACL_FLOAT), x * y[0], "Mul with broadcasting")
    close(run("Relu", [x], [ACL_FLOAT], (8, 16), ACL_FLOAT), np.maximum(x, 0), "Relu")
    gelu = x / (1 + np.exp(-1.59576912 * (x + 0.044715 * x**3)))
    close(run("Gelu", [x.astype(np.float16)], [ACL_FLOAT16], (8, 16), ACL_FLOAT16), gelu, "Gelu fp16", 1e-2)
    attr = acl.op.create_attr()
    ok(acl.op.set_attr_list_int(attr, "axes", [0]), "set_attr_list_int axes")
    soft = np.exp(x) / np.exp(x).sum(axis=0, keepdims=True)
    close(run("SoftmaxV2", [x], [ACL_FLOAT], (8, 16), ACL_FLOAT, attr), soft, "SoftmaxV2 axis 0")
    acl.op.destroy_attr(attr)
    a = rng.standard_normal((8, 32)).astype(np.float16)
    b = rng.standard_normal((32, 16)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    close(run("MatMul", [a, b], [ACL_FLOAT16] * 2, (8, 16), ACL_FLOAT), want, "MatMul fp16 -> fp32", 1e-2)
    bias = np.arange(16, dtype=np.float32)
    got = run("MatMulV2", [a, b, bias], [ACL_FLOAT16, ACL_FLOAT16, ACL_FLOAT], (8, 16), ACL_FLOAT)
    close(got, want + bias, "MatMulV2 with bias", 1e-2)
    ints = rng.integers(-5, 5, (4, 4)).astype(np.int8)
    close(run("MatMul", [ints, ints], [ACL_INT8] * 2, (4, 4), ACL_INT32), ints.astype(np.int32) @ ints, "int8 MatMul")
    cast_attr = acl.op.create_attr()
    ok(acl.op.set_attr_int(cast_attr, "dst_type", ACL_FLOAT16), "set_attr_int dst_type")
    close(run("Cast", [x], [ACL_FLOAT], (8, 16), ACL_FLOAT16, cast_attr), x.astype(np.float16), "Cast")
    acl.op.destroy_attr(cast_attr)


def handles() -> None:
    x = np.arange(-8, 8, dtype=np.float32)
    in_desc, in_buf, _ = tensor(x, ACL_FLOAT)
    out_desc, out_buf, out_ptr = output((16,), ACL_FLOAT)
    handle = value(acl.op.create_handle("Relu", [in_desc], [out_desc], 0), "create_handle")
    for _ in range(3):
        ok(acl.op.execute_with_handle(handle, [in_buf], [out_buf], STREAM[0]), "execute_with_handle")
    ok(acl.rt.synchronize_stream(STREAM[0]), "sync")
    close(download(out_ptr, (16,), ACL_FLOAT), np.maximum(x, 0), "Relu by handle")
    expect(
        acl.op.execute_with_handle(handle, [in_buf, in_buf], [out_buf], 0),
        ACL_ERROR_OP_INPUT_NOT_MATCH,
        "too many input buffers",
    )
    expect(acl.op.execute_with_handle(handle, [in_buf], [], 0), ACL_ERROR_OP_OUTPUT_NOT_MATCH, "no output buffer")
    acl.op.destroy_handle(handle)
    expect(acl.op.execute_with_handle(handle, [in_buf], [out_buf], 0), ACL_ERROR_INVALID_PARAM, "destroyed handle")
    expect(acl.op.create_handle("Nope", [in_desc], [out_desc], 0), (0, ACL_ERROR_OP_NOT_FOUND), "unknown op")


def operator_errors() -> None:
    f32, _, _ = tensor(np.zeros((4, 4), np.float32), ACL_FLOAT)
    f16, _, _ = tensor(np.zeros((4, 4), np.float16), ACL_FLOAT16)
    i32, _, _ = tensor(np.zeros((4, 4), np.int32), ACL_INT32)
    wrong, _, _ = tensor(np.zeros((3, 5), np.float32), ACL_FLOAT)
    nc1, _, _ = tensor(np.zeros((4, 4), np.float32), ACL_FLOAT, ACL_FORMAT_NC1HWC0)
    nchw, _, _ = tensor(np.zeros((1, 1, 4, 4), np.float32), ACL_FLOAT, ACL_FORMAT_NCHW)

    def create(op: str, ins: list[int], outs: list[int], attr: int = 0) -> int:
        return int(acl.op.create_handle(op, ins, outs, attr)[1])

    expect(create("Add", [f32], [f32]), ACL_ERROR_OP_INPUT_NOT_MATCH, "Add with one input")
    expect(create("Relu", [f32], [f32, f32]), ACL_ERROR_OP_OUTPUT_NOT_MATCH, "Relu with two outputs")
    expect(create("Add", [f32, f16], [f32]), ACL_ERROR_OP_INPUT_NOT_MATCH, "mixed data types")
    expect(create("Add", [f32, wrong], [f32]), ACL_ERROR_OP_INPUT_NOT_MATCH, "shapes do not broadcast")
    expect(create("Gelu", [i32], [i32]), ACL_ERROR_UNSUPPORTED_DATA_TYPE, "Gelu on int32")
    expect(create("Relu", [nc1], [nc1]), ACL_ERROR_FORMAT_NOT_MATCH, "NC1HWC0 needs a conversion")
    expect(create("Relu", [nchw], [nchw]), 0, "NCHW is fine for elementwise ops")
    expect(create("MatMul", [i32, i32], [i32]), ACL_ERROR_UNSUPPORTED_DATA_TYPE, "MatMul on int32")
    attr = acl.op.create_attr()
    ok(acl.op.set_attr_bool(attr, "transpose_x1", True), "set_attr_bool")
    expect(create("MatMul", [f32, f32], [f32], attr), ACL_ERROR_FEATURE_UNSUPPORTED, "transposed MatMul")
    ok(acl.op.set_attr_list_int(attr, "axes", [0, 1]), "set_attr_list_int")
    expect(create("SoftmaxV2", [f32], [f32], attr), ACL_ERROR_OP_ATTR_NOT_MATCH, "two softmax axes")
    ok(acl.op.set_attr_int(attr, "dst_type", ACL_INT32), "set_attr_int")
    expect(create("Cast", [f32], [f16], attr), ACL_ERROR_OP_ATTR_NOT_MATCH, "dst_type differs from output")
    acl.op.destroy_attr(attr)
    expect(acl.op.set_attr_int(attr, "x", 1), ACL_ERROR_INVALID_PARAM, "destroyed attr")
    expect(create("Relu", [f32], [f32], attr), ACL_ERROR_INVALID_PARAM, "destroyed attr in a call")
    expect(create("Relu", [12345], [f32]), ACL_ERROR_INVALID_PARAM, "unknown tensor description")
    small = acl.create_data_buffer(allocations[0], 4)
    big_desc, big_buf, _ = tensor(np.zeros(64, np.float32), ACL_FLOAT)
    expect(
        acl.op.execute_v2("Relu", [big_desc], [small], [big_desc], [big_buf], 0, 0),
        ACL_ERROR_INVALID_PARAM,
        "buffer smaller than its tensor",
    )
    expect(
        acl.op.execute_v2("Relu", [big_desc], [999], [big_desc], [big_buf], 0, 0),
        ACL_ERROR_INVALID_PARAM,
        "unknown data buffer",
    )
    ok(acl.destroy_data_buffer(small), "destroy_data_buffer")


def attributes() -> None:
    attr = acl.op.create_attr()
    setters = [
        (acl.op.set_attr_int, 3),
        (acl.op.set_attr_float, 0.5),
        (acl.op.set_attr_bool, False),
        (acl.op.set_attr_string, "s"),
        (acl.op.set_attr_data_type, ACL_FLOAT16),
        (acl.op.set_attr_list_int, [1, 2]),
        (acl.op.set_attr_list_int, np.array([1, 2], np.int64)),
        (acl.op.set_attr_list_float, [0.5]),
        (acl.op.set_attr_list_bool, [True]),
        (acl.op.set_attr_list_string, ["a"]),
        (acl.op.set_attr_list_data_type, [ACL_FLOAT]),
        (acl.op.set_attr_list_list_int, [[1], [2, 3]]),
    ]
    for setter, attr_value in setters:
        ok(setter(attr, "name", attr_value), setter.__name__)
    acl.op.destroy_attr(attr)


def descriptions_and_buffers() -> None:
    desc = acl.create_tensor_desc(ACL_BF16, [2, 3, 4], ACL_FORMAT_NCHW)
    expect((acl.get_tensor_desc_type(desc), acl.get_tensor_desc_format(desc)), (ACL_BF16, 0), "type, format")
    expect((acl.get_tensor_desc_num_dims(desc), acl.get_tensor_desc_element_count(desc)), (3, 24), "rank, count")
    expect(acl.get_tensor_desc_size(desc), 48, "bf16 size")
    expect(acl.get_tensor_desc_dim_v2(desc, 2), (4, 0), "dim 2")
    expect(acl.get_tensor_desc_dim_v2(desc, 3), (0, ACL_ERROR_INVALID_PARAM), "dim out of range")
    acl.set_tensor_desc_name(desc, "x")
    expect(acl.get_tensor_desc_name(desc), "x", "name")
    acl.destroy_tensor_desc(desc)
    expect(acl.get_tensor_desc_size(desc), 0, "destroyed desc")
    expect(acl.create_tensor_desc(99, [1], ACL_FORMAT_ND), 0, "unknown data type")
    expect(acl.create_tensor_desc(ACL_FLOAT, [-1], ACL_FORMAT_ND), 0, "negative dim")
    expect(acl.get_data_type_size(ACL_FLOAT16), 2, "get_data_type_size")
    buffer = acl.create_data_buffer(0x10000, 128)
    expect((acl.get_data_buffer_addr(buffer), acl.get_data_buffer_size_v2(buffer)), (0x10000, 128), "buffer")
    expect(acl.get_data_buffer_size(buffer), 128, "get_data_buffer_size")
    ok(acl.update_data_buffer(buffer, 0x20000, 64), "update_data_buffer")
    expect(acl.get_data_buffer_addr(buffer), 0x20000, "updated")
    ok(acl.destroy_data_buffer(buffer), "destroy_data_buffer")
    expect(acl.destroy_data_buffer(buffer), ACL_ERROR_INVALID_PARAM, "destroy twice")
    expect(acl.update_data_buffer(buffer, 0, 0), ACL_ERROR_INVALID_PARAM, "update destroyed")
    expect(acl.create_data_buffer(0x1000, -1), 0, "negative size")
    empty = acl.create_data_buffer(0, 0)
    expect(empty != 0, True, "(0, 0) describes an absent optional input")
    ok(acl.destroy_data_buffer(empty), "destroy empty")


def model_dir() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        expect(acl.op.set_model_dir(os.path.join(tmp, "missing")), ACL_ERROR_INVALID_PARAM, "missing directory")
        bad = os.path.join(tmp, "bad")
        os.makedirs(bad)
        with open(os.path.join(bad, "ops.json"), "w") as handle:
            handle.write("[{")
        expect(acl.op.set_model_dir(bad), ACL_ERROR_PARSE_FILE, "unparsable JSON")
        unknown = os.path.join(tmp, "unknown")
        os.makedirs(unknown)
        with open(os.path.join(unknown, "ops.json"), "w") as handle:
            json.dump([{"op": "Conv2D", "input_desc": [], "output_desc": []}], handle)
        expect(acl.op.set_model_dir(unknown), ACL_ERROR_OP_LOAD_FAILED, "operator without a kernel")
        good = os.path.join(tmp, "good")
        os.makedirs(good)
        desc = {"format": "ND", "shape": [-1, 16], "type": "float32"}
        with open(os.path.join(good, "ops.json"), "w") as handle:
            json.dump([{"op": "Relu", "input_desc": [desc], "output_desc": [desc], "attr": []}], handle)
        ok(acl.op.set_model_dir(good), "set_model_dir")
    x = np.ones((3, 16), np.float32)
    close(run("Relu", [x], [ACL_FLOAT], (3, 16), ACL_FLOAT), x, "a call matching the model (-1 dim)")
    f32, _, _ = tensor(np.zeros((3, 8), np.float32), ACL_FLOAT)
    expect(acl.op.create_handle("Relu", [f32], [f32], 0)[1], ACL_ERROR_OP_NOT_FOUND, "shape not in the models")
    expect(acl.op.create_handle("Gelu", [f32], [f32], 0)[1], ACL_ERROR_OP_NOT_FOUND, "op not in the models")


def main() -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    STREAM[0] = value(acl.rt.create_stream(), "create_stream")
    every_operator()
    handles()
    operator_errors()
    attributes()
    descriptions_and_buffers()
    model_dir()
    for ptr in allocations:
        ok(acl.rt.free(ptr), "free")
    ok(acl.rt.destroy_stream(STREAM[0]), "destroy_stream")
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")
    done("ops")


if __name__ == "__main__":
    sys.exit(main())
