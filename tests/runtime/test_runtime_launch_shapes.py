"""Kept launch shapes behave exactly like fresh, checked launches.

A stream keeps each launch shape (kernel, blockDim, arguments) with its packed SQE and a slot of
its argument area; the device keeps views of kernel arguments and parameter blocks while an
address space's mappings are unchanged. None of that may change what a launch computes: slots
are reused only once the device fetched their last launch, a replaced kernel runs its new body,
1, 1.0 and True stay different arguments, views follow remapping, and a freed array, a sticky
error or a change of dumping is seen by the next launch of a kept shape as by a new one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from launch_helpers import kernel_records, small_ring

import cannrt
from cannrt import Device, Kernel, Work, register_kernel
from cannrt.abi import CopyKind, TensorArg
from cannrt.dtypes import acl_code
from cannrt.kernels.registry import ArgSpecs, KernelArgumentError, require_tensors
from cannrt.runtime import memory_ops as mo
from cannrt.runtime.core import Runtime, tensor_arg

# -- 1. argument slots are reused only once the device fetched their last launch ---------------


Program = list[tuple[str, int, int]]  # (kernel, blockDim, index of the accumulator it updates)


def _program(count: int, seed: int) -> Program:
    """Launches updating `count` accumulators in place (acc += x, acc *= m), each accumulator
    2..5 times, all interleaved: up to 4 * count distinct shapes (add or mul, blockDim 1 or 2),
    repeated at random places."""
    rng = np.random.default_rng(seed)
    launches: Program = []
    for index in range(count):
        for _ in range(2 + index % 4):
            launches.append((("add", "mul")[int(rng.integers(2))], 1 + int(rng.integers(2)), index))
    return [launches[i] for i in rng.permutation(len(launches))]


def _operands(count: int) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Initial accumulators, addends and multipliers (int32: every result is exact)."""
    accs = [np.full(3 + index % 5, index, np.int32) for index in range(count)]
    adds = [np.arange(3 + index % 5, dtype=np.int32) + index for index in range(count)]
    muls = [np.full(3 + index % 5, 2 if index % 3 == 0 else -1, np.int32) for index in range(count)]
    return accs, adds, muls


def _expected(program: Program, count: int) -> list[np.ndarray]:
    accs, adds, muls = _operands(count)
    for kernel, _, index in program:
        accs[index] = accs[index] + adds[index] if kernel == "add" else accs[index] * muls[index]
    return accs


COUNT = 40  # up to 160 distinct shapes on 8 argument slots (and more than the 32 shapes a stream keeps)


def test_many_more_shapes_than_slots_launched_without_synchronising_all_compute_right_api(
    make_runtime: Callable[..., Runtime],
) -> None:
    small_ring(make_runtime)
    device = Device(0)
    stream = device.stream()
    accs, adds, muls = ([device.array(a) for a in arrays] for arrays in _operands(COUNT))
    program = _program(COUNT, seed=1)
    with cannrt.profile() as prof:
        for kernel, block_dim, index in program:
            other = adds[index] if kernel == "add" else muls[index]
            stream.launch(kernel, accs[index], other, accs[index], block_dim=block_dim)
        stream.synchronize()
    for acc, expected in zip(accs, _expected(program, COUNT), strict=True):
        assert np.array_equal(acc.to_numpy(), expected)
    # each task's parameter block, as the device read it, is the one of its own launch
    sent = []
    for kernel, _, index in program:
        other = adds[index] if kernel == "add" else muls[index]
        sent.append((kernel, accs[index].tensor_arg(), other.tensor_arg(), accs[index].tensor_arg()))
    assert [(r.name, *r.args) for r in kernel_records(prof)] == sent


def test_many_more_shapes_than_slots_launched_without_synchronising_all_compute_right_runtime(
    make_runtime: Callable[..., Runtime],
) -> None:
    runtime = small_ring(make_runtime)
    ctx = runtime.set_device(0)
    stream = ctx.create_stream()

    def upload(array: np.ndarray) -> TensorArg:
        va = mo.malloc(ctx, array.nbytes)
        mo.memcpy(ctx, va, array.nbytes, array.ctypes.data, array.nbytes, CopyKind.HOST_TO_DEVICE)
        return tensor_arg(va, acl_code(array.dtype), array.shape)

    accs, adds, muls = ([upload(a) for a in arrays] for arrays in _operands(COUNT))
    program = _program(COUNT, seed=2)
    for kernel, block_dim, index in program:
        other = adds[index] if kernel == "add" else muls[index]
        runtime.launch(stream, kernel, block_dim, [accs[index], other, accs[index]])
    stream.synchronize()
    for acc, expected in zip(accs, _expected(program, COUNT), strict=True):
        back = np.empty_like(expected)
        mo.memcpy(ctx, back.ctypes.data, back.nbytes, acc.address, back.nbytes, CopyKind.DEVICE_TO_HOST)
        assert np.array_equal(back, expected)


def test_two_streams_interleaving_many_shapes_each_keep_their_own_slots(
    make_runtime: Callable[..., Runtime],
) -> None:
    small_ring(make_runtime)
    device = Device(0)
    streams = [device.stream(), device.stream()]
    accs, adds, muls = ([device.array(a) for a in arrays] for arrays in _operands(COUNT))
    program = _program(COUNT, seed=3)
    for kernel, block_dim, index in program:  # accumulator i lives on stream i % 2
        other = adds[index] if kernel == "add" else muls[index]
        streams[index % 2].launch(kernel, accs[index], other, accs[index], block_dim=block_dim)
    device.synchronize()
    for acc, expected in zip(accs, _expected(program, COUNT), strict=True):
        assert np.array_equal(acc.to_numpy(), expected)


def _scaled_add(acc: np.ndarray, x: np.ndarray, k: int) -> None:
    acc += k * x


def _check_scaled_add(specs: ArgSpecs) -> None:
    acc, x = require_tensors("test_scaled_add", specs, 2, scalars=1)
    if len(specs) != 3 or not isinstance(specs[2], int) or acc.shape != x.shape:
        raise KernelArgumentError("test_scaled_add takes acc, x of one shape and an int k")


def test_shapes_differing_only_in_a_scalar_each_carry_their_own_parameter_block(
    make_runtime: Callable[..., Runtime],
) -> None:
    small_ring(make_runtime)
    register_kernel(
        Kernel("test_scaled_add", _scaled_add, lambda s: Work(), _check_scaled_add, outputs=(0,)), replace=True
    )
    device = Device(0)
    stream = device.stream()
    acc = device.array(np.zeros(4, np.int64))
    x = device.array(np.ones(4, np.int64))
    scalars = [k % 11 + 1 for k in range(100)]  # 11 distinct shapes, each repeated, on 8 slots
    for k in scalars:
        stream.launch("test_scaled_add", acc, x, k)
    assert np.array_equal(acc.to_numpy(stream), np.full(4, sum(scalars), np.int64))


def test_a_later_stream_reusing_a_destroyed_streams_argument_memory_sends_its_own_arguments(rt: Runtime) -> None:
    device = Device(0)
    x = device.array(np.arange(8, dtype=np.float32))
    outs = [device.array(np.zeros(8, np.float32)) for _ in range(4)]
    for index, out in enumerate(outs):  # each stream's argument area is freed with the stream
        stream = device.stream()
        stream.launch("relu", x, out)
        stream.launch("relu", x, out)
        stream.synchronize()
        stream.destroy()
        for other in outs[index + 1 :]:
            assert other.to_numpy().tolist() == [0.0] * 8
        assert np.array_equal(out.to_numpy(), np.arange(8, dtype=np.float32))


# -- 2. a replaced kernel with tensor arguments runs its new body ------------------------------


LOG: list[str] = []


def _scale_kernel(label: str, factor: int) -> Kernel:
    def body(x: np.ndarray, acc: np.ndarray) -> None:
        LOG.append(label)
        acc += factor * x

    def check(specs: ArgSpecs) -> None:
        require_tensors("test_scale", specs, 2)

    return Kernel("test_scale", body, lambda s: Work(), check, outputs=(1,))


@pytest.fixture
def _scale_a() -> Kernel:
    LOG.clear()
    return register_kernel(_scale_kernel("a", 2), replace=True)


def test_a_replaced_kernel_with_tensor_arguments_runs_its_new_body_api(rt: Runtime, _scale_a: Kernel) -> None:
    device = Device(0)
    stream = device.stream()
    x, acc = device.array(np.arange(4, dtype=np.int32)), device.array(np.zeros(4, np.int32))
    stream.launch("test_scale", x, acc)
    stream.launch("test_scale", x, acc)  # a kept shape from here on
    register_kernel(_scale_kernel("b", 3), replace=True)
    stream.launch("test_scale", x, acc)
    stream.launch("test_scale", x, acc)
    register_kernel(_scale_a, replace=True)  # the first binary again
    stream.launch("test_scale", x, acc)
    stream.synchronize()
    # launches queued before a replacement still run the binary they were launched with
    assert LOG == ["a", "a", "b", "b", "a"]
    assert np.array_equal(acc.to_numpy(), (2 + 2 + 3 + 3 + 2) * np.arange(4, dtype=np.int32))


def test_a_replaced_kernel_with_tensor_arguments_runs_its_new_body_runtime(rt: Runtime, _scale_a: Kernel) -> None:
    ctx = rt.set_device(0)
    stream = ctx.create_stream()
    x, acc = mo.malloc(ctx, 16), mo.malloc(ctx, 16)
    mo.memset(ctx, acc, 16, 0, 16)
    data = np.arange(4, dtype=np.int32)
    mo.memcpy(ctx, x, 16, data.ctypes.data, 16, CopyKind.HOST_TO_DEVICE)
    args = [tensor_arg(x, acl_code(np.dtype(np.int32)), (4,)), tensor_arg(acc, acl_code(np.dtype(np.int32)), (4,))]
    rt.launch(stream, "test_scale", 1, args)
    rt.launch(stream, "test_scale", 1, args)
    register_kernel(_scale_kernel("b", 3), replace=True)
    rt.launch(stream, "test_scale", 1, args)
    stream.synchronize()
    back = np.empty(4, np.int32)
    mo.memcpy(ctx, back.ctypes.data, 16, acc, 16, CopyKind.DEVICE_TO_HOST)
    assert LOG == ["a", "a", "b"]
    assert np.array_equal(back, 7 * data)


def test_a_replaced_kernel_runs_its_new_body_on_every_stream_that_kept_the_shape(rt: Runtime, _scale_a: Kernel) -> None:
    device = Device(0)
    first, second = device.stream(), device.stream()
    x = device.array(np.ones(4, np.int32))
    accs = [device.array(np.zeros(4, np.int32)) for _ in range(2)]
    for stream, acc in ((first, accs[0]), (second, accs[1])):
        stream.launch("test_scale", x, acc)
        stream.launch("test_scale", x, acc)
    device.synchronize()
    register_kernel(_scale_kernel("b", 3), replace=True)
    first.launch("test_scale", x, accs[0])
    second.launch("test_scale", x, accs[1])
    device.synchronize()
    assert LOG == ["a"] * 4 + ["b"] * 2
    for acc in accs:
        assert acc.to_numpy().tolist() == [2 + 2 + 3] * 4


# -- 3. 1, 1.0 and True are different launches -------------------------------------------------


kernel_saw: list[tuple[type, object]] = []


def _see(out: np.ndarray, value: object) -> None:
    """Writes what it was given: the value, 1 if it is an int, 1 if it is a float."""
    kernel_saw.append((type(value), value))
    out[0] = float(value)  # type: ignore[arg-type]
    out[1] = isinstance(value, int)
    out[2] = isinstance(value, float)


def _check_see(specs: ArgSpecs) -> None:
    require_tensors("test_see", specs, 1, scalars=1)
    if len(specs) != 2 or isinstance(specs[1], TensorArg):
        raise KernelArgumentError("test_see takes an output and one scalar")


@pytest.fixture
def _see_kernel() -> None:
    kernel_saw.clear()
    register_kernel(Kernel("test_see", _see, lambda s: Work(), _check_see, outputs=(0,)), replace=True)


VALUES: list[object] = [1, 1.0, 1, True, 1.0, 2.5]
# on the device: ints (True is packed as the int 1) and floats, each as launched
SEEN_ON_DEVICE = [(int, 1), (float, 1.0), (int, 1), (int, 1), (float, 1.0), (float, 2.5)]


def test_int_float_and_bool_scalars_are_launched_with_their_own_parameter_blocks(
    rt: Runtime, _see_kernel: None
) -> None:
    device = Device(0)
    stream = device.stream()
    out = device.empty(3, np.float64)
    with cannrt.profile() as prof:
        for value in VALUES:  # queued together: every launch after the first of 1 is a kept shape
            stream.launch("test_see", out, value)
        stream.synchronize()
    # the arguments the device decoded from each task's parameter block (True travels as the int 1)
    assert [(type(r.args[1]), r.args[1]) for r in kernel_records(prof)] == SEEN_ON_DEVICE


def test_int_float_and_bool_scalars_reach_the_kernel_as_launched(rt: Runtime, _see_kernel: None) -> None:
    device = Device(0)
    stream = device.stream()
    out = device.empty(3, np.float64)
    seen_in_out = []
    for value in VALUES:
        stream.launch("test_see", out, value)
        seen_in_out.append(out.to_numpy(stream).tolist())
    assert kernel_saw == SEEN_ON_DEVICE
    assert seen_in_out == [[1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0], [1.0, 1.0, 0.0],
                           [1.0, 0.0, 1.0], [2.5, 0.0, 1.0]]  # fmt: skip


def test_an_int_launched_after_an_equal_float_reaches_the_kernel_as_an_int_runtime(
    rt: Runtime, _see_kernel: None
) -> None:
    ctx = rt.set_device(0)
    stream = ctx.create_stream()
    out = tensor_arg(mo.malloc(ctx, 24), acl_code(np.dtype(np.float64)), (3,))
    for value in (1.0, 1, True, 1.0):  # queued together, run after the last launch
        rt.launch(stream, "test_see", 1, [out, value])
    stream.synchronize()
    assert kernel_saw == [(float, 1.0), (int, 1), (int, 1), (float, 1.0)]


def test_int_and_float_scalars_of_distinct_values_reach_the_kernel_as_launched(rt: Runtime, _see_kernel: None) -> None:
    device = Device(0)
    stream = device.stream()
    out = device.empty(3, np.float64)
    for value in (3, 3.5, 3, 3.5):  # unequal values: nothing to confuse
        stream.launch("test_see", out, value)
    stream.synchronize()
    assert kernel_saw == [(int, 3), (float, 3.5), (int, 3), (float, 3.5)]


def test_a_replaced_kernel_is_costed_by_its_own_work(rt: Runtime) -> None:
    """The modelled duration of a launch shape follows the kernel registered now."""

    def spin_kernel(ns: int) -> Kernel:
        return Kernel("test_costed", lambda: None, lambda specs: Work(fixed_ns=ns), lambda specs: None, outputs=())

    device = Device(0)
    stream = device.stream()
    durations = []
    for ns in (1_000, 1_000_000):
        register_kernel(spin_kernel(ns), replace=True)
        start = stream.record()
        stream.launch("test_costed")
        end = stream.record()
        end.synchronize()
        durations.append(start.elapsed_ms(end))
    assert durations[1] > 100 * durations[0]
