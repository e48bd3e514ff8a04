"""Planted float faults on the vector unit: a division by zero and an fp16 overflow, with CANN's
overflow detection on (the "overflow" dump mode) and off (inf/nan, or saturation)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from fault_helpers import check_after_fault, line_of, only_record, sync_error

import cannrt
from cannrt import CannError, ErrorCode
from cannrt.device.dumps import writes_an_input
from cannrt.kernels import builtins
from cannrt.kernels.nn import conv
from cannrt.tools.dump import load_dump_dir
from cannrt.tools.manifest import load_manifest

if TYPE_CHECKING:
    from conftest import Npu

AIVEC_OVER_FLOW = int(ErrorCode.RT_AIVEC_OVER_FLOW)
DIV_LINE = line_of(builtins._div, "np.divide")
MUL_LINE = line_of(builtins._mul, "np.multiply")
COUNT = 8 * 4096  # 8 tiling units: with block_dim 8, one per block


def _upload(npu: Npu, values: np.ndarray) -> tuple[int, object]:
    va = npu.upload(values)
    return va, npu.tensor(va, values.shape, values.dtype)


def test_a_division_by_zero_with_overflow_detection_fails_with_207016(npu: Npu, tmp_path: Path) -> None:
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    divisor = np.ones(COUNT, np.float32)
    divisor[5 * 4096 + 3] = 0.0  # in block 5's share
    _, x = _upload(npu, np.ones(COUNT, np.float32))
    _, y = _upload(npu, divisor)
    out, z = _upload(npu, np.zeros(COUNT, np.float32))
    with pytest.raises(CannError) as at_exit, cannrt.dump(tmp_path, mode="overflow", runtime=npu.rt):
        npu.launch(stream, "div", x, y, z, block_dim=8)
        error = sync_error(stream)
    assert error.code == at_exit.value.code == AIVEC_OVER_FLOW == 207016
    record = only_record(ctx)
    assert record.error_bits == ("VEC_DIV0",)
    assert (record.block_index, record.block_dim) == (5, 8)
    assert (record.arg_index, record.arg_name, record.tensor) == (2, "out", f"float32[{COUNT}]")
    assert record.fault_address == out + (5 * 4096 + 3) * 4  # the first non-finite result
    assert record.source == f"{builtins.__file__}:{DIV_LINE} in _div"
    assert record.pc_current == record.pc_start + 4 * DIV_LINE
    text = str(error)
    assert "vec error info: 0x1," in text  # VEC_DIV0
    assert "errorStr: division by zero in div: overflow detection" in text
    (dumped,) = load_dump_dir(tmp_path)  # the overflow dump holds the failing op only
    assert dumped.op_type == "RealDiv" and dumped.status == AIVEC_OVER_FLOW
    assert [t.label for t in dumped.tensors] == ["input.0", "input.1", "output.2"]
    output = dumped.tensors[2].array
    assert output is not None and np.isinf(output[5 * 4096 + 3])
    manifest = load_manifest(tmp_path / "0")
    assert list(manifest["data"]) == ["RealDiv.div.0.forward"]
    (output_entry,) = manifest["data"]["RealDiv.div.0.forward"]["output"]
    assert output_entry["data_name"] == "RealDiv.div.0.forward.output.2.npy"
    assert (Path(manifest["dump_data_dir"]) / output_entry["data_name"]).is_file()
    check_after_fault(npu, ctx, AIVEC_OVER_FLOW)


def test_an_fp16_overflow_with_overflow_detection_fails_with_207016(npu: Npu, tmp_path: Path) -> None:
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    values = np.full(COUNT, 2.0, np.float16)
    values[7 * 4096] = 300.0  # 300 * 300 = 90000 > 65504, in the last block's share
    _, x = _upload(npu, values)
    out, z = _upload(npu, np.zeros(COUNT, np.float16))
    with pytest.raises(CannError), cannrt.dump(tmp_path, mode="overflow", runtime=npu.rt):
        npu.launch(stream, "mul", x, x, z, block_dim=8)
        error = sync_error(stream)
    assert error.code == AIVEC_OVER_FLOW
    record = only_record(ctx)
    assert record.error_bits == ("VEC_INF_NAN",)
    assert (record.block_index, record.arg_name, record.tensor) == (7, "out", f"float16[{COUNT}]")
    assert record.fault_address == out + 7 * 4096 * 2
    assert record.source == f"{builtins.__file__}:{MUL_LINE} in _mul"
    assert "vec error info: 0x2," in str(error)  # VEC_INF_NAN
    check_after_fault(npu, ctx, AIVEC_OVER_FLOW)


def test_an_ai_core_overflow_with_overflow_detection_fails_with_207003(npu: Npu, tmp_path: Path) -> None:
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    _, a = _upload(npu, np.full((16, 16), 100.0, np.float16))
    _, c = _upload(npu, np.zeros((16, 16), np.float16))  # 16 x 100 x 100 = 160000 > 65504
    with pytest.raises(CannError), cannrt.dump(tmp_path, mode="overflow", runtime=npu.rt):
        npu.launch(stream, "matmul", a, a, c)
        error = sync_error(stream)
    assert error.code == int(ErrorCode.RT_AICORE_OVER_FLOW) == 207003  # matmul runs on the AI cores
    record = only_record(ctx)
    assert record.error_bits == ("VEC_INF_NAN",) and record.arg_name == "out"
    assert record.source.startswith(f"{builtins.__file__}:") and record.source.endswith(" in _matmul")
    check_after_fault(npu, ctx, 207003)


CONV_3X3 = (1, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0.0, 0.0)  # group, no activation, window, alpha, beta


@pytest.mark.parametrize("channels", [4, 64])  # one item on one thread; items on the thread team
def test_a_convolution_whose_products_overflow_fails_with_207003(npu: Npu, tmp_path: Path, channels: int) -> None:
    """The products run in BLAS on the kernels' thread team, out of numpy's float status: the
    convolution reports the inf it made itself."""
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    _, x = _upload(npu, np.full((1, channels, 32, 32), 1e20, np.float32))
    _, w = _upload(npu, np.full((channels, channels, 3, 3), 1e20, np.float32))  # 1e40 > 3.4e38
    _, y = _upload(npu, np.zeros((1, channels, 32, 32), np.float32))
    with pytest.raises(CannError), cannrt.dump(tmp_path, mode="overflow", runtime=npu.rt):
        npu.launch(stream, "nn.conv", x, w, y, *CONV_3X3)
        error = sync_error(stream)
    assert error.code == int(ErrorCode.RT_AICORE_OVER_FLOW) == 207003
    record = only_record(ctx)
    assert record.error_bits == ("VEC_INF_NAN",) and record.source.startswith(f"{conv.__file__}:")
    check_after_fault(npu, ctx, 207003)


def test_without_detection_a_convolution_overflow_sets_the_overflow_status(npu: Npu) -> None:
    stream = npu.ctx(0).create_stream()
    _, x = _upload(npu, np.full((1, 64, 32, 32), 1e20, np.float32))
    _, w = _upload(npu, np.full((64, 64, 3, 3), 1e20, np.float32))
    out, y = _upload(npu, np.zeros((1, 64, 32, 32), np.float32))
    npu.driver.overflow_status(0, reset=True)
    npu.launch(stream, "nn.conv", x, w, y, *CONV_3X3)
    stream.synchronize(timeout_ms=1000)
    assert np.isinf(npu.download(out, 64 * 32 * 32, np.float32)).all()
    assert int.from_bytes(npu.driver.overflow_status(0, reset=True)[:8], "little") == 2


def test_without_detection_an_overflow_gives_inf_and_sets_the_overflow_status(npu: Npu) -> None:
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    _, x = _upload(npu, np.full(16, 300.0, np.float16))
    out, z = _upload(npu, np.zeros(16, np.float16))
    assert npu.driver.overflow_status(0)[:8] == bytes(8)
    npu.launch(stream, "mul", x, x, z)
    stream.synchronize(timeout_ms=100)  # no error: the NPU's default inf/nan mode
    assert np.isinf(npu.download(out, 16, np.float16)).all()
    status = npu.driver.overflow_status(0, reset=True)
    assert len(status) == 64 and int.from_bytes(status[:8], "little") == 2  # the overflow flag
    assert npu.driver.overflow_status(0) == bytes(64)


def test_saturation_mode_clamps_to_the_largest_finite_value(npu: Npu) -> None:
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    npu.driver.saturation_configure(0, True)
    _, x = _upload(npu, np.array([300.0, -300.0, 2.0], np.float16))
    out, z = _upload(npu, np.zeros(3, np.float16))
    npu.launch(stream, "mul", x, npu.tensor(npu.upload(np.array([300.0, 300.0, 2.0], np.float16)), (3,), "f2"), z)
    stream.synchronize(timeout_ms=100)
    assert npu.download(out, 3, np.float16).tolist() == [65504.0, -65504.0, 4.0]


def test_an_in_place_kernels_overflow_dump_holds_its_inputs_as_they_were(npu: Npu, tmp_path: Path) -> None:
    ctx = npu.ctx(0)
    stream = ctx.create_stream()
    values = np.array([2.0, 300.0, 3.0], np.float16)  # 300 * 300 overflows fp16
    _, x = _upload(npu, values)
    with pytest.raises(CannError), cannrt.dump(tmp_path, mode="overflow", runtime=npu.rt):
        npu.launch(stream, "mul", x, x, x)  # x *= x: the output is the inputs' memory
        sync_error(stream)
    (dumped,) = load_dump_dir(tmp_path)
    assert [t.label for t in dumped.tensors] == ["input.0", "input.1", "output.2"]
    first, second, output = (t.array for t in dumped.tensors)
    assert first is not None and second is not None and output is not None
    assert first.tolist() == second.tolist() == values.tolist()  # copied before the kernel wrote over them
    assert output.tolist() == [4.0, np.inf, 9.0]


def test_a_kernel_writes_an_input_when_an_output_overlaps_an_input_tensors_bytes(npu: Npu) -> None:
    base = npu.upload(np.zeros(64, np.float32))
    x, y = npu.tensor(npu.upload(np.ones(16, np.float32)), (16,), np.float32), npu.tensor(base, (64,), np.float32)
    first, second = npu.tensor(base, (32,), np.float32), npu.tensor(base + 128, (32,), np.float32)
    assert not writes_an_input((x, x, first), (2,))  # separate buffers
    assert writes_an_input((x, x, x), (2,))  # x *= x
    assert writes_an_input((second, x, y), (2,))  # the output holds the input's bytes
    assert writes_an_input((y, x, second), (2,))  # the output is part of the input
    assert not writes_an_input((first, x, second), (2,))  # adjacent halves do not overlap
    assert not writes_an_input((y, 3, x), (2,))  # scalars are not tensors
