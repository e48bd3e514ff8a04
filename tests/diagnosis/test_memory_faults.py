"""Planted memory faults, each report checked field by field: one element past the end, a far
write, another context's address, a misaligned fp32 access, a use after free."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from fault_helpers import check_after_fault, line_of, only_record, sync_error

import cannrt
from cannrt import ErrorCode
from cannrt.kernels import builtins
from cannrt.runtime import memory_ops
from cannrt.tools.allocations import track_allocations
from cannrt.tools.dump import load_dump_dir
from cannrt.tools.manifest import load_manifest

if TYPE_CHECKING:
    from cannrt.runtime.stream import Stream
    from conftest import Npu

VECTOR_FAULT = int(ErrorCode.RT_VECTOR_CORE_EXCEPTION)  # relu and add run on the vector cores
RELU_LINE = line_of(builtins._relu, "np.maximum")
ADD_LINE = line_of(builtins._add, "np.add")


@pytest.fixture(autouse=True)
def tracking() -> Iterator[None]:
    """Allocation call sites are recorded in these tests."""
    track_allocations(True)
    yield
    track_allocations(False)


def warm_up(npu: Npu, stream: Stream, va: int) -> None:
    """A launch with arguments, so the stream's argument area is mapped before what follows."""
    npu.launch(stream, "relu", npu.tensor(va, (8,), np.float32), npu.tensor(va, (8,), np.float32))
    stream.synchronize(timeout_ms=100)


def test_one_element_past_the_end_names_block_core_line_tensor_and_allocation(npu: Npu) -> None:
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    count = 16 * 4096  # 16 tiling units of 4096 elements; 8 blocks take 2 each
    target = memory_ops.malloc(ctx, (count + 1) * 4)
    warm_up(npu, stream, target)  # the argument area first: nothing is mapped right after `source`
    source = memory_ops.malloc(ctx, count * 4, pad=False)  # aclrtMallocAlign32: no padding after it
    malloc_line = line_of(test_one_element_past_the_end_names_block_core_line_tensor_and_allocation, "pad=False")
    x = npu.tensor(source, (count + 1,), np.float32)  # one float32 more than was allocated
    npu.launch(stream, "relu", x, npu.tensor(target, (count + 1,), np.float32), block_dim=8)
    error = sync_error(stream)
    assert error.code == VECTOR_FAULT
    record = only_record(ctx)
    assert record.error_bits == ("MTE_READ_OVERFLOW",)
    assert (record.device_id, record.block_dim) == (0, 8)
    assert record.block_index == 7  # the last block holds the last element
    # least-loaded first: the warm-up left vector core 0 busiest, so blocks 0..7 took cores 1..8
    assert record.core_id == 8
    assert (record.arg_index, record.arg_name, record.tensor) == (0, "x", f"float32[{count + 1}]")
    assert (record.access_kind, record.access_address, record.access_size) == ("read", source, (count + 1) * 4)
    assert record.fault_address == source + count * 4
    assert record.source == f"{builtins.__file__}:{RELU_LINE} in _relu"
    assert record.pc_current == record.pc_start + 4 * RELU_LINE
    text = str(error)
    assert "core id is 8," in text and f"current: 0x{record.pc_current:x}," in text
    assert f"block 7 of 8 on core 8, error bits: MTE_READ_OVERFLOW, runtime code {VECTOR_FAULT}" in text
    assert f"READ of size {(count + 1) * 4} at 0x{source:x} by argument 0 'x' (float32[{count + 1}])" in text
    assert f"  at pc 0x{record.pc_current:x}: {builtins.__file__}:{RELU_LINE} in _relu" in text
    assert f"ends 4 bytes after the {count * 4}-byte allocation at 0x{source:x}" in text
    assert f"allocated at {__file__}:{malloc_line} in " in text
    check_after_fault(npu, ctx, VECTOR_FAULT)


def test_a_padded_malloc_is_reported_with_its_requested_size(npu: Npu) -> None:
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    target = memory_ops.malloc(ctx, 8192)
    warm_up(npu, stream, target)
    source = memory_ops.malloc(ctx, 4096)  # 4128 bytes mapped: CANN pads 32 bytes
    npu.launch(stream, "relu", npu.tensor(source, (1033,), np.float32), npu.tensor(target, (1033,), np.float32))
    text = str(sync_error(stream))
    assert f"read of 4132 bytes at 0x{source:x} ends 36 bytes after the 4096-byte allocation at 0x{source:x}" in text
    assert "4128" not in text


def test_a_far_write_names_the_user_allocation_not_the_runtime_argument_area(npu: Npu) -> None:
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    source = memory_ops.malloc(ctx, 4096)
    warm_up(npu, stream, source)  # the stream's argument area exists before the faulting launch
    far = source + (64 << 20)  # 64 MiB past the allocation: unmapped
    npu.launch(stream, "relu", npu.tensor(source, (1024,), np.float32), npu.tensor(far, (1024,), np.float32))
    error = sync_error(stream)
    assert error.code == VECTOR_FAULT
    record = only_record(ctx)
    assert record.error_bits == ("MTE_WRITE_OVERFLOW",)
    assert (record.arg_index, record.arg_name, record.access_kind) == (1, "out", "write")
    assert record.fault_address == far and record.block_index == 0
    assert record.source == f"{builtins.__file__}:{RELU_LINE} in _relu"
    text = str(error)
    gap = far - (source + 4096)
    assert f"write of 4096 bytes at 0x{far:x} is {gap} bytes after the 4096-byte allocation at 0x{source:x}" in text
    assert "nearest allocation" not in text  # the MMU's mappings (argument areas among them) are not named
    check_after_fault(npu, ctx, VECTOR_FAULT)


def test_another_contexts_address_faults_and_says_whose_it_is(npu: Npu) -> None:
    mine = npu.ctx(0)
    stream = mine.create_stream()
    out = memory_ops.malloc(mine, 4096)
    other = npu.rt.create_context(0)
    theirs = memory_ops.malloc(other, 4096)
    npu.rt.set_context(mine)
    y = npu.tensor(out, (1024,), np.float32)
    npu.launch(stream, "add", npu.tensor(out, (1024,), np.float32), npu.tensor(theirs, (1024,), np.float32), y)
    error = sync_error(stream)
    assert error.code == VECTOR_FAULT
    record = only_record(mine)
    assert record.error_bits == ("MTE_READ_OVERFLOW",)
    assert (record.arg_index, record.arg_name, record.access_address) == (1, "y", theirs)
    assert record.source == f"{builtins.__file__}:{ADD_LINE} in _add"
    text = str(error)
    assert f"address belongs to address space {other.asid}, not {mine.asid}" in text
    assert f"0x{theirs:x} belongs to another context (device 0), not this one" in text
    assert other.sticky_code == 0  # the owner of the address is not blamed
    check_after_fault(npu, mine, VECTOR_FAULT)


def test_a_misaligned_fp32_access_raises_mte_err_addr_misalign(npu: Npu) -> None:
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    buffer = memory_ops.malloc(ctx, 4096)
    out = memory_ops.malloc(ctx, 4096)
    npu.launch(stream, "relu", npu.tensor(buffer + 2, (64,), np.float32), npu.tensor(out, (64,), np.float32))
    error = sync_error(stream)
    assert error.code == VECTOR_FAULT
    record = only_record(ctx)
    assert record.error_bits == ("MTE_ERR_ADDR_MISALIGN",)
    assert (record.arg_index, record.arg_name, record.fault_address) == (0, "x", buffer + 2)
    assert record.source == f"{builtins.__file__}:{RELU_LINE} in _relu"
    text = str(error)
    assert "mte error info: 0x4," in text  # bit 2 of the MTE word
    assert f"misaligned read of 256 bytes at 0x{buffer + 2:x}: not a multiple of the 4-byte element size" in text
    check_after_fault(npu, ctx, VECTOR_FAULT)


def test_a_read_of_freed_memory_names_the_free(npu: Npu) -> None:
    """The freed VA stays unmapped here (nothing reuses it before the launch)."""
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    out = memory_ops.malloc(ctx, 4096)
    warm_up(npu, stream, out)  # the argument area first, so it cannot land on the freed VA
    gone = memory_ops.malloc(ctx, 4096)
    memory_ops.free(ctx, gone)
    free_line = line_of(test_a_read_of_freed_memory_names_the_free, "memory_ops.free(ctx, gone)")
    npu.launch(stream, "relu", npu.tensor(gone, (1024,), np.float32), npu.tensor(out, (1024,), np.float32))
    error = sync_error(stream)
    assert error.code == VECTOR_FAULT
    text = str(error)
    assert f"read of 4096 bytes at 0x{gone:x} lies inside the freed 4096-byte allocation at 0x{gone:x}" in text
    assert f"freed at {__file__}:{free_line} in " in text
    check_after_fault(npu, ctx, VECTOR_FAULT)


def test_a_use_after_free_faults_even_when_memory_is_allocated_again(npu: Npu) -> None:
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    out = memory_ops.malloc(ctx, 4096)
    gone = memory_ops.malloc(ctx, 4096)
    memory_ops.free(ctx, gone)
    memory_ops.malloc(ctx, 4096)  # without a quarantine this takes the freed VA at once
    npu.launch(stream, "relu", npu.tensor(gone, (1024,), np.float32), npu.tensor(out, (1024,), np.float32))
    error = sync_error(stream)
    assert error.code == VECTOR_FAULT
    assert f"lies inside the freed 4096-byte allocation at 0x{gone:x}" in str(error)
    check_after_fault(npu, ctx, VECTOR_FAULT)


def test_a_pool_block_overrun_names_the_block_and_where_the_array_was_made(npu: Npu) -> None:
    device = cannrt.Device(0)
    stream = npu.ctx(0).create_stream()
    array = device.empty((1024,), np.float32)  # a 4096-byte block inside a 2 MiB pool segment
    made_line = line_of(test_a_pool_block_overrun_names_the_block_and_where_the_array_was_made, "device.empty")
    out = memory_ops.malloc(npu.ctx(0), 8192)
    npu.launch(stream, "relu", npu.tensor(array.address, (1025,), np.float32), npu.tensor(out, (1025,), np.float32))
    error = sync_error(stream)
    assert error.code == VECTOR_FAULT
    text = str(error)
    assert f"read of 4100 bytes at 0x{array.address:x} ends 4 bytes after the 4096-byte allocation at " in text
    assert f"allocated at {__file__}:{made_line} in " in text
    assert "2097152" not in text  # the pool's segment is not the user's allocation


def test_a_fault_outside_a_dump_session_leaves_an_exception_dump(npu: Npu) -> None:
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    data = np.arange(64, dtype=np.float32)
    source = npu.upload(data)
    far = source + (64 << 20)
    npu.launch(stream, "add", npu.tensor(source, (64,), np.float32), npu.tensor(source, (64,), np.float32),
               npu.tensor(far, (64,), np.float32))  # fmt: skip
    sync_error(stream)
    folder = Path(os.environ["ASCEND_WORK_PATH"]) / "extra-info" / "data-dump" / "0"
    (dumped,) = load_dump_dir(folder)
    assert dumped.exception and dumped.status == VECTOR_FAULT and dumped.op_type == "Add"
    x, _, z = dumped.tensors
    assert x.array is not None and np.array_equal(x.array, data) and z.array is None  # the refused one
    manifest = load_manifest(folder)
    (entry,) = manifest["data"].values()
    assert entry["exception"] and entry["output"][0]["readable"] is False
