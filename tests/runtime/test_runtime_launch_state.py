"""Kept launch shapes see the state of the device and the runtime as a fresh launch would.

Views of device memory follow remapping; a freed array, a sticky error, a change of dumping, a
dropped shape, a destroyed stream or a replaced kernel are seen by the next launch of a kept
shape as by a new one; arguments that are equal but not the same (0.0 and -0.0, blockDim True
and 1) are not taken for each other.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from launch_helpers import FAULT, MIB, SQ_DEPTH, dumped_ops, kernel_records, small_ring

import cannrt
from cannrt import CannError, Device, DeviceArray, ErrorCode, Kernel, Work, register_kernel
from cannrt.abi import CopyKind
from cannrt.dtypes import acl_code
from cannrt.kernels.registry import require_tensors
from cannrt.runtime import memory_ops as mo
from cannrt.runtime.core import Runtime, tensor_arg

# -- 4. views of device memory follow remapping ------------------------------------------------


class Remapped:
    """One VA with physical handle A mapped behind it, and handle B ready with other contents."""

    N = 1024

    def __init__(self, device: Device) -> None:
        self.ctx = ctx = device.context
        self.va = mo.reserve_address(ctx, 2 * MIB)
        self.side = mo.reserve_address(ctx, 2 * MIB)  # where a handle is mapped to read or fill it
        self.a, self.b = mo.malloc_physical(ctx, 2 * MIB), mo.malloc_physical(ctx, 2 * MIB)
        self.data_a = np.linspace(-1, 1, self.N, dtype=np.float32)
        self.data_b = np.linspace(3, -5, self.N, dtype=np.float32)
        self.fill(self.b, self.data_b)
        mo.map_memory(ctx, self.va, 2 * MIB, 0, self.a)
        self.write(self.va, self.data_a)
        self.view = DeviceArray(device, self.va, (self.N,), np.dtype(np.float32), owned=False)

    def write(self, va: int, data: np.ndarray) -> None:
        mo.memcpy(self.ctx, va, data.nbytes, data.ctypes.data, data.nbytes, CopyKind.HOST_TO_DEVICE)

    def read(self, va: int) -> np.ndarray:
        back = np.empty(self.N, np.float32)
        mo.memcpy(self.ctx, back.ctypes.data, back.nbytes, va, back.nbytes, CopyKind.DEVICE_TO_HOST)
        return back

    def fill(self, handle: int, data: np.ndarray) -> None:
        """Write data into a handle through the side mapping (then unmapped again)."""
        mo.map_memory(self.ctx, self.side, 2 * MIB, 0, handle)
        self.write(self.side, data)
        mo.unmap_memory(self.ctx, self.side)

    def contents(self, handle: int) -> np.ndarray:
        """A handle's first N floats, read through the side mapping."""
        mo.map_memory(self.ctx, self.side, 2 * MIB, 0, handle)
        try:
            return self.read(self.side)
        finally:
            mo.unmap_memory(self.ctx, self.side)

    def swap(self) -> None:
        """Put handle B behind the VA instead of A."""
        mo.unmap_memory(self.ctx, self.va)
        mo.map_memory(self.ctx, self.va, 2 * MIB, 0, self.b)


@pytest.fixture
def remapped(rt: Runtime) -> tuple[Device, cannrt.Stream, Remapped]:
    """A device, a stream on it and a Remapped VA."""
    device = Device(0)
    return device, device.stream(), Remapped(device)


def _kept_relu(stream: cannrt.Stream, x: DeviceArray, y: DeviceArray) -> None:
    """relu(x) -> y launched twice: its shape kept, its views cached on the device."""
    stream.launch("relu", x, y)
    stream.launch("relu", x, y)


def test_a_kept_shape_reads_the_memory_now_mapped_at_its_address(
    remapped: tuple[Device, cannrt.Stream, Remapped],
) -> None:
    device, stream, mem = remapped
    out = device.empty(Remapped.N, np.float32)
    _kept_relu(stream, mem.view, out)
    assert np.array_equal(out.to_numpy(stream), np.maximum(mem.data_a, 0))
    mem.swap()  # same address, other physical pages
    stream.launch("relu", mem.view, out)
    assert np.array_equal(out.to_numpy(stream), np.maximum(mem.data_b, 0))


def test_a_kept_shape_writes_into_the_memory_now_mapped_at_its_address(
    remapped: tuple[Device, cannrt.Stream, Remapped],
) -> None:
    device, stream, mem = remapped
    x = device.array(np.linspace(-2, 2, Remapped.N, dtype=np.float32))
    _kept_relu(stream, x, mem.view)
    stream.synchronize()
    first = np.maximum(np.linspace(-2, 2, Remapped.N, dtype=np.float32), 0)
    assert np.array_equal(mem.read(mem.va), first)
    mem.swap()
    x.copy_from(np.linspace(5, -1, Remapped.N, dtype=np.float32))
    stream.launch("relu", x, mem.view)
    stream.synchronize()
    second = np.maximum(np.linspace(5, -1, Remapped.N, dtype=np.float32), 0)
    assert np.array_equal(mem.read(mem.va), second)  # B got the result
    assert np.array_equal(mem.contents(mem.a), first)  # A, no longer mapped there, kept the first


def test_a_kept_shape_reads_the_remapped_memory_through_the_runtime(rt: Runtime) -> None:
    device = Device(0)
    mem = Remapped(device)
    ctx = device.context
    stream = ctx.create_stream()
    f32 = acl_code(np.dtype(np.float32))
    out = mo.malloc(ctx, 4 * Remapped.N)
    args = [
        tensor_arg(mem.va, f32, (Remapped.N,)),
        tensor_arg(mem.va, f32, (Remapped.N,)),
        tensor_arg(out, f32, (Remapped.N,)),
    ]
    rt.launch(stream, "add", 1, args)
    rt.launch(stream, "add", 1, args)
    stream.synchronize()
    assert np.array_equal(mem.read(out), 2 * mem.data_a)
    mem.swap()
    rt.launch(stream, "add", 1, args)
    stream.synchronize()
    assert np.array_equal(mem.read(out), 2 * mem.data_b)


def test_a_kept_shape_over_an_unmapped_address_faults_instead_of_reading_stale_pages(
    remapped: tuple[Device, cannrt.Stream, Remapped],
) -> None:
    device, stream, mem = remapped
    out = device.empty(Remapped.N, np.float32)
    _kept_relu(stream, mem.view, out)
    stream.synchronize()
    mo.unmap_memory(mem.ctx, mem.va)
    stream.launch("relu", mem.view, out)
    with pytest.raises(CannError) as info:
        stream.synchronize()
    assert info.value.code == FAULT
    assert f"invalid read of {4 * Remapped.N} bytes at 0x{mem.va:x}" in str(info.value)


# -- 5. a freed array cannot be launched even after its shape was kept -------------------------


@pytest.mark.parametrize("freed", [0, 2], ids=["input", "output"])
def test_a_freed_array_is_refused_even_in_a_kept_shape_and_nothing_is_enqueued(rt: Runtime, freed: int) -> None:
    device = Device(0)
    stream = device.stream()
    arrays = [device.array(np.ones(8, np.float32)), device.array(np.ones(8, np.float32)), device.empty(8)]
    stream.launch("add", *arrays)
    stream.launch("add", *arrays)
    stream.synchronize()
    tail = stream._rt.tail
    arrays[freed].free()
    with cannrt.profile() as prof:
        with pytest.raises(CannError) as info:
            stream.launch("add", *arrays)
        stream.synchronize()
    assert info.value.code == ErrorCode.RT_PARAM_INVALID
    assert "was freed" in str(info.value)
    assert stream._rt.tail == tail
    assert kernel_records(prof) == []


def test_a_freed_array_is_refused_while_a_live_one_reuses_its_memory(rt: Runtime) -> None:
    device = Device(0)
    stream = device.stream()
    x, y, out = device.array(np.ones(8, np.float32)), device.array(np.ones(8, np.float32)), device.empty(8)
    stream.launch("add", x, y, out)
    stream.launch("add", x, y, out)
    stream.synchronize()
    x.free()
    again = device.array(np.full(8, 5, np.float32))  # the pool may hand x's block straight back
    with pytest.raises(CannError) as info:
        stream.launch("add", x, y, out)
    assert info.value.code == ErrorCode.RT_PARAM_INVALID
    stream.launch("add", again, y, out)
    assert out.to_numpy(stream).tolist() == [6.0] * 8


# -- 6. a sticky error stops kept shapes -------------------------------------------------------


def _overrun(device: Device) -> tuple[DeviceArray, DeviceArray]:
    """relu arguments reading 256 bytes of a 64-byte allocation: a device fault."""
    small = mo.malloc(device.context, 64)
    out = mo.malloc(device.context, 1024)
    f32 = np.dtype(np.float32)
    return (
        DeviceArray(device, small, (64,), f32, owned=False),
        DeviceArray(device, out, (64,), f32, owned=False),
    )


@pytest.mark.parametrize("where", ["same stream", "other stream"])
def test_a_sticky_error_refuses_a_kept_shape_with_tensor_arguments(rt: Runtime, where: str) -> None:
    device = Device(0)
    stream = device.stream()
    x, y, out = device.array(np.ones(8, np.float32)), device.array(np.ones(8, np.float32)), device.empty(8)
    stream.launch("add", x, y, out)
    stream.launch("add", x, y, out)
    stream.synchronize()
    faulty = stream if where == "same stream" else device.stream()
    faulty.launch("relu", *_overrun(device))
    with pytest.raises(CannError) as fault:
        faulty.synchronize()
    assert fault.value.code == FAULT
    tail = stream._rt.tail
    with pytest.raises(CannError) as api:
        stream.launch("add", x, y, out)
    with pytest.raises(CannError) as runtime:
        rt.launch(stream._rt, "add", 1, [x.tensor_arg(), y.tensor_arg(), out.tensor_arg()])
    assert api.value.code == runtime.value.code == FAULT
    assert stream._rt.tail == tail


def test_a_sticky_error_seen_on_another_stream_refuses_a_kept_shape_before_any_sync(rt: Runtime) -> None:
    device = Device(0)
    stream, faulty = device.stream(), device.stream()
    x, out = device.array(np.ones(8, np.float32)), device.empty(8)
    stream.launch("relu", x, out)
    stream.launch("relu", x, out)
    faulty.launch("relu", *_overrun(device))
    with pytest.raises(CannError):
        faulty.synchronize()
    tail = stream._rt.tail
    with pytest.raises(CannError) as info:
        stream.launch("relu", x, out)
    assert info.value.code == FAULT
    assert stream._rt.tail == tail


# -- 7. dumping switched on after shapes were kept, and off again ------------------------------


def test_launches_after_a_dump_ended_are_not_dumped_by_a_later_dump_of_other_ops(rt: Runtime, tmp_path: Path) -> None:
    device = Device(0)
    stream = device.stream()
    x, y, z = device.array(np.linspace(-1, 1, 8, dtype=np.float32)), device.empty(8), device.empty(8)
    stream.launch("relu", x, y)
    stream.launch("relu", x, y)  # kept before the dump
    with cannrt.dump(tmp_path / "first") as first:
        stream.launch("relu", x, y)
        stream.launch("relu", x, z)  # a shape first kept while dumping
        stream.launch("relu", x, z)
    assert dumped_ops(first.files) == ["relu"] * 3
    with cannrt.dump(tmp_path / "second", ops={"marker"}) as second:
        stream.launch("relu", x, y)  # relu is not on this dump's list
        stream.launch("relu", x, z)
        stream.launch("relu", x, y, name="marker")
    assert dumped_ops(second.files) == ["marker"]
    stream.launch("relu", x, z)
    stream.synchronize()
    assert np.array_equal(z.to_numpy(), np.maximum(np.linspace(-1, 1, 8, dtype=np.float32), 0))


def test_launches_after_a_dump_ended_carry_no_dump_flag(rt: Runtime, tmp_path: Path) -> None:
    device = Device(0)
    stream = device.stream()
    x, y, z = device.array(np.ones(8, np.float32)), device.empty(8), device.empty(8)
    stream.launch("relu", x, y)
    stream.launch("relu", x, y)
    with cannrt.dump(tmp_path) as result:
        stream.launch("relu", x, y)
        stream.launch("relu", x, z)
    assert len(result.files) == 2
    # the device dumps every kernel whose SQE asks for it: after the dump, none may ask
    rt.driver.dump_configure(0, True, True, False)
    for _ in range(3):
        stream.launch("relu", x, y)
        stream.launch("relu", x, z)
    stream.synchronize()
    assert rt.driver.dump_read(0, rt.host_time_ns) == []


def test_a_launch_named_for_a_filtered_dump_is_dumped_after_an_unnamed_launch_of_its_shape(
    rt: Runtime, tmp_path: Path
) -> None:
    device = Device(0)
    stream = device.stream()
    x, y = device.array(np.ones(8, np.float32)), device.empty(8)
    with cannrt.dump(tmp_path, ops={"fc1"}) as result:
        stream.launch("relu", x, y)  # not on the list
        stream.launch("relu", x, y, name="fc1")
    assert dumped_ops(result.files) == ["fc1"]


def test_a_launch_named_for_a_filtered_dump_is_dumped_after_unnamed_launches_kept_before_it(
    rt: Runtime, tmp_path: Path
) -> None:
    device = Device(0)
    stream = device.stream()
    x, y = device.array(np.ones(8, np.float32)), device.empty(8)
    stream.launch("relu", x, y)
    stream.launch("relu", x, y)  # kept before the dump
    with cannrt.dump(tmp_path, ops={"fc1"}) as result:
        stream.launch("relu", x, y)
        stream.launch("relu", x, y, name="fc1")
        stream.launch("relu", x, y)
    assert dumped_ops(result.files) == ["fc1"]


# -- 8. what a review of the launch path found ---------------------------------------------------
def test_a_sender_of_a_dropped_shape_hands_its_launch_back_to_the_checks(
    make_runtime: Callable[..., Runtime],
) -> None:
    """A caller may hold a shape's sender while other launches evict the shape and give its
    argument slot to another shape: that sender must not send an SQE pointing at the slot."""
    small_ring(make_runtime)
    device = Device(0)
    stream = device.stream()
    x, y = device.array(np.full(4, 2.0, np.float32)), device.array(np.full(4, 3.0, np.float32))
    z = device.empty(4, np.float32)
    stream.launch("add", x, y, z)
    (send,) = stream._rt.launcher.senders.values()  # held, as by another thread about to call it
    others = [device.array(np.full(4, float(i), np.float32)) for i in range(SQ_DEPTH + 2)]
    w = device.empty(4, np.float32)
    for other in others:  # more shapes with arguments than slots: the first shape is evicted
        stream.launch("add", other, other, w)
    z.copy_from(np.zeros(4, np.float32), stream)
    send()
    assert z.to_numpy(stream).tolist() == [5.0] * 4


def test_a_forced_destroy_leaves_no_fault_behind(rt: Runtime) -> None:
    """destroy(force=True) with launches not yet fetched: their parameter blocks are read before
    the argument area goes, so no spurious fault is recorded (and none reaches a later stream)."""
    device = Device(0)
    stream = device.stream()
    x = device.array(np.ones(16, np.float32))
    for _ in range(5):
        stream.launch("relu", x, x)
    stream.destroy(force=True)
    later = device.stream()
    later.launch("relu", x, x)
    later.synchronize()
    assert device.context.exception_records == []


def test_zero_and_negative_zero_are_different_launches(rt: Runtime) -> None:
    seen: list[str] = []
    register_kernel(
        Kernel(
            "test_sign",
            lambda out, value: seen.append(float(value).hex()),
            lambda specs: Work(),
            lambda specs: require_tensors("test_sign", specs, 1, 1) and None,
            outputs=(0,),
        ),
        replace=True,
    )
    device = Device(0)
    stream = device.stream()
    out = device.empty(1, np.float32)
    for value in (0.0, -0.0, 0.0):
        stream.launch("test_sign", out, value)
    stream.synchronize()
    assert seen == [(0.0).hex(), (-0.0).hex(), (0.0).hex()]


@pytest.mark.parametrize("block_dim", [True, 1.0])
def test_a_block_dim_that_is_not_an_int_is_refused_even_when_an_equal_shape_is_kept(
    rt: Runtime, block_dim: object
) -> None:
    device = Device(0)
    stream = device.stream()
    x = device.array(np.ones(8, np.float32))
    stream.launch("relu", x, x)
    stream.launch("relu", x, x)  # kept, with a sender
    tail = stream._rt.tail
    with pytest.raises(CannError) as info:
        stream.launch("relu", x, x, block_dim=block_dim)  # type: ignore[arg-type]
    assert info.value.code == ErrorCode.RT_PARAM_INVALID
    assert stream._rt.tail == tail  # nothing enqueued
